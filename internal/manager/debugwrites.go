package manager

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
)

var nameRe = regexp.MustCompile(`/(machines|nodes|events|machinesets)/[^/?]+`)

type debugRT struct{ next http.RoundTripper }

func (d debugRT) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if r.Method != http.MethodGet {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		fmt.Fprintf(os.Stderr, "WRITE %s %s %d\n", r.Method, nameRe.ReplaceAllString(r.URL.Path, "/$1/X"), code)
	}
	return resp, err
}
