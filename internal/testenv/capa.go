package testenv

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
)

// StartCAPA starts the upstream CAPA controller against the lab and its EC2 front (Options.EC2),
// watching namespace; the first start builds it into the cache (lab.EnsureCAPA). It is stopped
// at cleanup, and when the test failed the last errors of its log are logged.
func (e *Env) StartCAPA(namespace string) *lab.CAPA {
	e.T.Helper()
	if e.EC2URL == "" {
		e.T.Fatal("StartCAPA needs the EC2 front (testenv.Options.EC2)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	capa, err := e.Lab.StartCAPA(ctx, lab.CAPAOptions{EC2URL: e.EC2URL, Region: e.Server.EC2().Region(), Namespace: namespace,
		Progress: labtest.LogWriter(e.T)})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Logf("CAPA %s up in %s", lab.CAPAVersion, time.Since(start).Round(100*time.Millisecond))
	e.T.Cleanup(func() {
		if e.T.Failed() {
			e.T.Logf("CAPA's log %s, last errors:\n%s", capa.LogPath, lastErrors(capa.LogPath, 15))
		}
		capa.Stop()
	})
	return capa
}

// lastErrors returns the last n error lines of a klog-format log.
func lastErrors(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var errs []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "E") || strings.Contains(l, "rror") {
			errs = append(errs, l)
		}
	}
	return strings.Join(errs[max(0, len(errs)-n):], "\n")
}
