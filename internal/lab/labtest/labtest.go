// Package labtest starts a lab for a test and stops it when the test ends.
package labtest

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/lab"
)

// Option adjusts the lab options of a test.
type Option func(*lab.Options)

// WithControllerManager also starts kube-controller-manager (garbage collection, disruption,
// node lifecycle, namespaces).
func WithControllerManager() Option { return func(o *lab.Options) { o.ControllerManager = true } }

// Start starts a throwaway lab in a temporary directory. The first run on a machine builds
// the control-plane binaries (minutes); progress goes to the test log.
func Start(t testing.TB, opts ...Option) *lab.Lab {
	t.Helper()
	o := lab.Options{Dir: t.TempDir(), FastDisk: true, Progress: testWriter{t}}
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	l, err := lab.Start(ctx, o)
	if err != nil {
		t.Fatalf("starting lab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("MACHINA_KEEP_LAB_LOGS") == "" {
			t.Logf("lab logs are in %s/logs (kept only for the life of the test's temp dir)", o.Dir)
		}
		l.Stop()
	})
	return l
}

// LogWriter writes progress lines (a lab's, CAPA's) to the test log.
func LogWriter(t testing.TB) io.Writer { return testWriter{t} }

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
