// Package server is machina's simulated cloud: an EC2-like HTTP/JSON API on a loopback
// address whose state lives in a bbolt file, with fault injection and, given a kubeconfig,
// a simulated kubelet that turns running instances into Nodes.
//
// Embed it with New and Start; URL gives the address to hand to clients
// (internal/cloud/client).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	bolt "go.etcd.io/bbolt"
	"k8s.io/client-go/rest"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/cloud/kubelet"
)

// Delays shape the instance lifecycle. Zero Pending and ShuttingDown make transitions
// immediate (benchmarks).
type Delays struct {
	// Pending is how long an instance stays pending before it is running.
	Pending time.Duration
	// ShuttingDown is how long a terminated instance stays shutting-down.
	ShuttingDown time.Duration
	// TerminatedRetention is how long a terminated instance stays visible before it is
	// purged. Zero means the default, one hour.
	TerminatedRetention time.Duration
}

// DefaultTerminatedRetention is used when Delays.TerminatedRetention is zero.
const DefaultTerminatedRetention = time.Hour

// DefaultMaxUserDataBytes is the default limit on decoded user data.
const DefaultMaxUserDataBytes = 64 << 10

// maxRequestBytes bounds every request body.
const maxRequestBytes = 1 << 20

// Options configure a Server.
type Options struct {
	// StateDir holds the state file (cloud.db). Required.
	StateDir string
	// NoSync skips fsync of the state file: the state still survives restarts (and
	// crashes) of the cloud process, but not a crash of the machine. For tests and
	// benchmarks.
	NoSync bool
	// Addr is the loopback address to listen on; default 127.0.0.1:0 (a free port).
	Addr   string
	Delays Delays
	// CatalogueFile, if set, is a JSON or YAML api.Catalogue merged into the built-in one.
	CatalogueFile string
	// Catalogue, if set, is merged after CatalogueFile (for embedding and tests).
	Catalogue *api.Catalogue
	// MaxUserDataBytes limits decoded user data; default DefaultMaxUserDataBytes.
	MaxUserDataBytes int
	// Faults are injected at start, in addition to the persisted ones.
	Faults []api.Fault
	// Seed seeds the random source of fault rates; zero picks a random seed.
	Seed uint64
	// SweepInterval is how often terminated instances are purged and scaling groups
	// reconciled; default one second.
	SweepInterval time.Duration
	// KubeConfig is the cluster the simulated kubelet registers Nodes in; nil runs no
	// kubelet.
	KubeConfig *rest.Config
	// Kubelet tunes the simulated kubelet (its Config and Source are filled in).
	Kubelet kubelet.Options
	Logger  logr.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// EC2, if set, also serves the EC2 front (internal/cloud/ec2) on its own loopback
	// port, over the same instances; the catalogue then includes its AWS defaults.
	EC2 *ec2.Options
}

// Server is a running (or startable) simulated cloud.
type Server struct {
	opts      Options
	log       logr.Logger
	now       func() time.Time
	cat       *catalogue
	retention time.Duration

	mu    sync.RWMutex // guards the maps below and serialises writes to db
	db    *bolt.DB
	inst  map[string]*instance
	byTag tagIndex // instance IDs by tag, kept by setInstance and dropInstance
	toks  map[string]tokenRecord
	nets  map[string]*network
	ntoks map[string]string // network client token → network ID
	grps  map[string]*group
	gname map[string]string // group name → ID

	faultMu sync.Mutex
	faults  map[string]*api.Fault
	rng     *rand.Rand

	stats stats

	listener net.Listener
	http     *http.Server
	kubelet  *kubelet.Kubelet
	ec2      *ec2.Front
	cancel   context.CancelFunc
	done     chan struct{}
	reqSeq   uint64
	reqMu    sync.Mutex
	closed   sync.Once
}

// New validates the options and loads the catalogue. It touches neither the state file
// nor the network; Start does.
func New(opts Options) (*Server, error) {
	if opts.StateDir == "" {
		return nil, errors.New("cloud: a state directory is required")
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if err := checkLoopback(opts.Addr); err != nil {
		return nil, err
	}
	if opts.MaxUserDataBytes <= 0 {
		opts.MaxUserDataBytes = DefaultMaxUserDataBytes
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Delays.Pending < 0 || opts.Delays.ShuttingDown < 0 || opts.Delays.TerminatedRetention < 0 {
		return nil, errors.New("cloud: delays must not be negative")
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	cat, err := loadCatalogue(opts.CatalogueFile, opts.Catalogue, opts.EC2 != nil)
	if err != nil {
		return nil, err
	}
	for i := range opts.Faults {
		if aerr := validateFault(cat, &opts.Faults[i]); aerr != nil {
			return nil, fmt.Errorf("cloud: fault %d: %w", i+1, aerr)
		}
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		now:       opts.Now,
		cat:       cat,
		retention: opts.Delays.TerminatedRetention,
		rng:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		done:      make(chan struct{}),
	}
	if s.retention == 0 {
		s.retention = DefaultTerminatedRetention
	}
	s.stats.reset(s.now())
	return s, nil
}

// checkLoopback refuses listen addresses that are not on a loopback interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("cloud: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("cloud: listen address %q is not a loopback address (use 127.0.0.1:<port>)", addr)
	}
	return nil
}

// Start opens the state file, starts listening and serving, the background sweep and,
// with a KubeConfig, the simulated kubelet. It returns once the API is reachable; ctx
// bounds the lifetime of the background work (Close stops it too).
func (s *Server) Start(ctx context.Context) error {
	db, err := openStore(s.opts.StateDir, s.opts.NoSync)
	if err != nil {
		return err
	}
	s.db = db
	if err := s.load(); err != nil {
		_ = db.Close()
		return fmt.Errorf("cloud: loading state from %s: %w", filepath.Join(s.opts.StateDir, stateFileName), err)
	}
	for i := range s.opts.Faults {
		// Start-up faults get IDs derived from their content, so starting again with the
		// same faults replaces them instead of adding copies.
		f := s.opts.Faults[i]
		if _, err := s.createFault(f, "fault-start-"+requestHash(f)[:16]); err != nil {
			_ = db.Close()
			return err
		}
	}
	addr := s.opts.Addr
	if host, port, _ := net.SplitHostPort(addr); host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("cloud: listening on %s: %w", addr, err)
	}
	s.listener = ln
	ctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	// Requests inherit ctx, so injected latency ends when the server stops.
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if s.opts.KubeConfig != nil {
		ko := s.opts.Kubelet
		ko.Config = s.opts.KubeConfig
		ko.Source = s
		ko.Logger = s.log.WithName("kubelet")
		ko.Now = s.now
		k, err := kubelet.New(ko)
		if err != nil {
			cancel()
			_ = ln.Close()
			_ = db.Close()
			return err
		}
		s.kubelet = k
	}
	if s.opts.EC2 != nil {
		eo := *s.opts.EC2
		eo.Logger = s.log.WithName("ec2")
		eo.Now = s.now
		front, err := ec2.New(s, eo)
		if err == nil {
			err = front.Start(ctx)
		}
		if err != nil {
			cancel()
			_ = ln.Close()
			_ = db.Close()
			return err
		}
		s.ec2 = front
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "cloud API server stopped")
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.sweepLoop(ctx)
	}()
	if s.kubelet != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.kubelet.Run(ctx); err != nil && ctx.Err() == nil {
				s.log.Error(err, "simulated kubelet stopped")
			}
		}()
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
	go func() { //nolint:gosec // the shutdown needs a context of its own: ctx is already done
		<-ctx.Done()
		shutdownCtx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = s.http.Shutdown(shutdownCtx)
	}()
	s.log.Info("simulated cloud listening", "url", s.URL(), "stateDir", s.opts.StateDir)
	return nil
}

// URL is the base URL of the API, e.g. http://127.0.0.1:41234. Valid after Start.
func (s *Server) URL() string {
	if s.listener == nil {
		return ""
	}
	return "http://" + s.listener.Addr().String()
}

// EC2 is the EC2 front, nil unless Options.EC2 was set. Valid after Start.
func (s *Server) EC2() *ec2.Front { return s.ec2 }

// Close stops serving and the background work and closes the state file. It is safe to
// call more than once.
func (s *Server) Close() {
	s.closed.Do(func() {
		if s.cancel == nil {
			return
		}
		s.cancel()
		<-s.done
		if s.ec2 != nil {
			s.ec2.Close()
		}
		s.mu.Lock()
		_ = s.db.Close()
		s.mu.Unlock()
	})
}

// load fills the in-memory indexes from the state file.
func (s *Server) load() error {
	s.inst = map[string]*instance{}
	s.byTag = tagIndex{}
	s.toks = map[string]tokenRecord{}
	s.nets = map[string]*network{}
	s.ntoks = map[string]string{}
	s.grps = map[string]*group{}
	s.gname = map[string]string{}
	s.faults = map[string]*api.Fault{}
	return s.db.View(func(tx *bolt.Tx) error {
		if err := loadAll(tx, bucketInstances, func(k, v []byte) error {
			var i instance
			if err := json.Unmarshal(v, &i); err != nil {
				return err
			}
			s.setInstance(&i)
			return nil
		}); err != nil {
			return err
		}
		if err := loadAll(tx, bucketTokens, func(k, v []byte) error {
			var t tokenRecord
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			s.toks[string(k)] = t
			return nil
		}); err != nil {
			return err
		}
		if err := loadAll(tx, bucketNetworks, func(k, v []byte) error {
			var n network
			if err := json.Unmarshal(v, &n); err != nil {
				return err
			}
			s.nets[n.NetworkID] = &n
			s.ntoks[n.ClientToken] = n.NetworkID
			return nil
		}); err != nil {
			return err
		}
		if err := loadAll(tx, bucketGroups, func(k, v []byte) error {
			var g group
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			s.grps[g.ScalingGroupID] = &g
			s.gname[g.Name] = g.ScalingGroupID
			return nil
		}); err != nil {
			return err
		}
		return loadAll(tx, bucketFaults, func(k, v []byte) error {
			var f api.Fault
			if err := json.Unmarshal(v, &f); err != nil {
				return err
			}
			s.faults[f.FaultID] = &f
			return nil
		})
	})
}

// update runs fn in a write transaction. The caller holds s.mu.
func (s *Server) update(fn func(tx *bolt.Tx) error) error {
	return s.db.Update(fn)
}
