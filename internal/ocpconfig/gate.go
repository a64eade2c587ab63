package ocpconfig

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Gate holds back the controllers of one group while the cluster's FeatureGate does not
// enable MachineAPIMigration, and looks again every period (level-triggered: whatever the
// gate says now is acted upon, however it got there):
//
//   - enabled at start, or no FeatureGate to check: the controllers start with the manager,
//     as without the gate;
//   - off at start (or undetermined): the controllers wait; once the gate is enabled the
//     group's check runs (the installed CRDs carry the authority fields) and they start, and
//     their informers' first lists bring every object to them;
//   - turned off while they run: they stop (their work queues end; nothing is half-written,
//     every step of the sync and migration being safe to interrupt). A controller cannot be
//     started twice in one manager, so if the gate is then enabled again the Gate ends the
//     manager with an error saying so, and the restarted process starts them.
//
// The Gate itself runs on every replica (it only reads); the controllers it holds still wait
// for leader election as usual.
type Gate struct {
	group  string
	reader client.Reader
	period time.Duration
	check  func(context.Context) error
	log    logr.Logger

	mu      sync.Mutex
	state   GateState
	open    chan struct{} // closed once the controllers may start
	opened  bool
	stopped bool // the gate closed again after opening: the controllers were stopped
	cancels []context.CancelFunc
}

// NewGate reads the gate once, logs what it found and, when the group may run, runs check
// (which then fails the group's setup, as it would without the gate). reader must read the API
// server itself (a manager's APIReader). Add the Gate to the manager (it is a Runnable) and
// the group's controllers through Manager.
func NewGate(ctx context.Context, group string, reader client.Reader, period time.Duration, check func(context.Context) error) (*Gate, error) {
	g := &Gate{group: group, reader: reader, period: period, check: check, open: make(chan struct{}),
		log: ctrl.Log.WithName("ocpconfig").WithValues("group", group)}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := ReadGate(ctx, reader)
	if err != nil {
		return nil, err
	}
	g.state = s
	switch {
	case !s.Checked:
		g.log.Info("starting without the feature gate check: " + s.Why)
	case s.Enabled:
		g.log.Info("starting: " + s.Why)
	default:
		g.log.Info(fmt.Sprintf("not starting the %s controllers: %s; they start once it does (looking again every %s)", group, s.Why, period))
		return g, nil
	}
	if err := g.runCheck(ctx); err != nil {
		return nil, err
	}
	g.opened = true
	close(g.open)
	return g, nil
}

func (g *Gate) runCheck(ctx context.Context) error {
	if g.check == nil {
		return nil
	}
	return g.check(ctx)
}

// State is what the gate said at its last look.
func (g *Gate) State() GateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// Running reports whether the group's controllers may be running: the gate opened and did not
// close again.
func (g *Gate) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened && !g.stopped
}

// NeedLeaderElection is false: every replica follows the gate; it only reads.
func (g *Gate) NeedLeaderElection() bool { return false }

// Start looks at the gate every period until ctx ends. It returns an error (which stops the
// manager) when the group's check fails as the gate opens, or when the gate is enabled again
// after it stopped the controllers.
func (g *Gate) Start(ctx context.Context) error {
	t := time.NewTicker(g.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := g.look(ctx); err != nil {
			return err
		}
	}
}

// look reads the gate once and acts on what it says.
func (g *Gate) look(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := ReadGate(rctx, g.reader)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Error(err, "reading the feature gate; keeping what it said last")
		}
		return nil
	}
	g.mu.Lock()
	before := g.state
	g.state = s
	opened, stopped := g.opened, g.stopped
	g.mu.Unlock()
	switch {
	case s.Operate() && !opened:
		if err := g.runCheck(rctx); err != nil {
			return fmt.Errorf("controller group %s: %w", g.group, err)
		}
		g.log.Info(fmt.Sprintf("starting the %s controllers: %s", g.group, s.Why))
		g.mu.Lock()
		g.opened = true
		close(g.open)
		g.mu.Unlock()
	case s.Operate() && stopped:
		return fmt.Errorf("controller group %s: %s again after its controllers were stopped; a controller runs once per process, so the manager stops to be started again", g.group, s.Why)
	case !s.Operate() && opened && !stopped:
		g.log.Info(fmt.Sprintf("stopping the %s controllers: %s; they start again when the manager restarts with it enabled", g.group, s.Why))
		g.mu.Lock()
		g.stopped = true
		cancels := g.cancels
		g.cancels = nil
		g.mu.Unlock()
		for _, c := range cancels {
			c()
		}
	case s.Why != before.Why:
		g.log.Info("feature gate: " + s.Why)
	}
	return nil
}

// Manager returns mgr with every Runnable added through it held by the gate: the group's
// controllers, added by their builders, start only once the gate opens, and stop when it
// closes again. Everything else passes through to mgr.
func (g *Gate) Manager(mgr ctrl.Manager) ctrl.Manager { return &gatedManager{Manager: mgr, gate: g} }

type gatedManager struct {
	ctrl.Manager
	gate *Gate
}

func (m *gatedManager) Add(r manager.Runnable) error {
	return m.Manager.Add(&gatedRunnable{Runnable: r, gate: m.gate})
}

// gatedRunnable is a controller (or any Runnable) that starts when its Gate opens.
type gatedRunnable struct {
	manager.Runnable
	gate *Gate
}

// NeedLeaderElection is the wrapped Runnable's (true when it does not say: the manager's default).
func (r *gatedRunnable) NeedLeaderElection() bool {
	if le, ok := r.Runnable.(manager.LeaderElectionRunnable); ok {
		return le.NeedLeaderElection()
	}
	return true
}

func (r *gatedRunnable) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-r.gate.open:
	}
	held, cancel := context.WithCancel(ctx)
	defer cancel()
	g := r.gate
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		<-ctx.Done() // the gate closed before this one started: wait for the restart
		return nil
	}
	g.cancels = append(g.cancels, cancel)
	g.mu.Unlock()
	err := r.Runnable.Start(held)
	if err != nil && held.Err() != nil && ctx.Err() == nil {
		// Stopped by the gate before it was done starting (a controller still waiting for
		// its caches says so with an error): that is the stop asked for, not a failure.
		g.log.V(1).Info("stopped while starting", "error", err.Error())
		return nil
	}
	return err
}
