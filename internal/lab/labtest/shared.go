package labtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/lab"
)

// A package whose tests each need a plain lab and change nothing another test reads can share
// one: a lab start is about ten seconds of two busy cores, and config/admission alone started
// seven. Its tests run one after another (none calls t.Parallel), create objects under names
// of their own and put back what they change of cluster-wide objects (the Infrastructure).

var shared struct {
	sync.Mutex
	main bool
	lab  *lab.Lab
	dir  string
	err  error
}

// Main is the TestMain of a package using Shared: it runs the tests, then stops the shared
// lab and removes its directory (unless MACHINA_KEEP_LAB_LOGS is set).
func Main(m *testing.M) {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if shared.lab != nil {
		shared.lab.Stop()
	}
	if shared.dir != "" && os.Getenv("MACHINA_KEEP_LAB_LOGS") == "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.Unlock()
	os.Exit(code)
}

// Shared returns the package's shared lab (all CRDs and admission policies, no
// kube-controller-manager), starting it for the first test that asks. The package must use
// Main as its TestMain. A start that failed fails every test asking again.
func Shared(t testing.TB) *lab.Lab {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		t.Fatal("labtest.Shared needs labtest.Main as the package's TestMain")
	}
	if shared.lab == nil && shared.err == nil {
		shared.lab, shared.dir, shared.err = startShared(t)
	}
	if shared.err != nil {
		t.Fatalf("starting the shared lab: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("shared lab logs are in %s/logs (removed when the package's tests end unless MACHINA_KEEP_LAB_LOGS is set)", shared.dir)
		}
	})
	return shared.lab
}

func startShared(t testing.TB) (*lab.Lab, string, error) {
	dir, err := os.MkdirTemp("", "machina-shared-lab-")
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// Progress goes to the first test only while the lab starts, before that test ends.
	l, err := lab.Start(ctx, lab.Options{Dir: dir, FastDisk: true, Progress: testWriter{t}})
	if err != nil {
		return nil, dir, fmt.Errorf("%w (logs in %s/logs)", err, dir)
	}
	return l, dir, nil
}
