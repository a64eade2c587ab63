package cli

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
)

// lostManager is a manager whose Start ends as controller-runtime's does when the Lease is lost.
type lostManager struct {
	ctrl.Manager
	starts int
}

func (m *lostManager) Start(context.Context) error {
	m.starts++
	return errors.New("leader election lost")
}

// A manager that lost its Lease ends `machina manager` with an error (exit code 1), and is not
// started again in the same process.
func TestManagerExitsWhenLeaderElectionLost(t *testing.T) {
	m := &lostManager{}
	err := runManager(context.Background(), m)
	if err == nil || !strings.Contains(err.Error(), "leader election lost") {
		t.Fatalf("runManager: %v, want the leader election lost error", err)
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == 0 {
		t.Fatalf("exit code 0 for %v", err)
	}
	if m.starts != 1 {
		t.Fatalf("the manager was started %d times", m.starts)
	}
}

// A --max-concurrent-reconciles below 1 is a usage error (exit 2) naming the flag, given
// before any cluster is asked.
func TestManagerBadConcurrency(t *testing.T) {
	for _, v := range []string{"0", "-3"} {
		cmd := newManagerCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		cmd.SetArgs([]string{"--max-concurrent-reconciles", v, "--kubeconfig", filepath.Join(t.TempDir(), "absent")})
		err := cmd.ExecuteContext(t.Context())
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), "--max-concurrent-reconciles "+v+": must be at least 1") {
			t.Errorf("--max-concurrent-reconciles %s: got %v; want exit 2 naming the flag", v, err)
		}
	}
}
