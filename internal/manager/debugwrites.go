package manager

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"

	"github.com/go-logr/logr"
)

var nameRe = regexp.MustCompile(`/(machines|nodes|events|machinesets)/[^/?]+`)

// debugRT prints every write of the manager (MACHINA_DEBUG_WRITES=1) as "WRITE method path
// code" on stderr, names reduced, for the benchmarks' breakdowns. With detail
// (MACHINA_DEBUG_WRITES=2) it also logs each write through the request context's logger, so
// the line names the controller and the object, with the full path and the request body.
type debugRT struct {
	next   http.RoundTripper
	detail bool
}

func (d debugRT) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if d.detail && r.GetBody != nil {
		if rc, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(rc, 4000))
			_ = rc.Close()
			body = string(b)
		}
	}
	resp, err := d.next.RoundTrip(r)
	if r.Method != http.MethodGet {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		fmt.Fprintf(os.Stderr, "WRITE %s %s %d\n", r.Method, nameRe.ReplaceAllString(r.URL.Path, "/$1/X"), code)
		if d.detail {
			logr.FromContextOrDiscard(r.Context()).Info("debug write", "method", r.Method, "path", r.URL.Path, "code", code, "body", body)
		}
	}
	return resp, err
}
