package cli

import (
	"context"
	"errors"
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
