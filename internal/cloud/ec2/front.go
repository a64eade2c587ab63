// Package ec2 is the simulated cloud's EC2 front: the EC2 Query protocol (form-encoded
// POST, XML answers in EC2's namespace and shapes, EC2 error codes), Signature Version 4
// verified against configured credentials, and, on their own paths of the same port, the
// STS and classic/v2 Elastic Load Balancing calls a machine controller needs. Unmodified
// AWS clients (aws-sdk-go-v2, the aws CLI) use it by changing only the endpoint.
//
// It holds no state of its own: every call goes to a Model, which the server
// (internal/cloud/server) implements over the same instance store, state machine, faults
// and kubelet as its JSON API. The network it describes (VPC, subnets, security groups,
// AMIs, instance types, load balancers) is the catalogue's AWS section.
package ec2

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// The documented lab key pair: what `machina cloud` and `machina up` accept unless told
// otherwise. It opens nothing but the local simulated cloud.
const (
	LabAccessKeyID     = "AKIAMACHINALAB000001"                     //nolint:gosec // the documented lab key pair, not a secret
	LabSecretAccessKey = "machina/lab/simulated+cloud/secret/key01" //nolint:gosec // the documented lab key pair, not a secret
)

// Credential is an access key pair the front accepts. A ReadOnly one may only call
// Describe*/Get* actions; anything else answers UnauthorizedOperation.
type Credential struct {
	AccessKeyID     string
	SecretAccessKey string
	ReadOnly        bool
	// UserName names the IAM user GetCallerIdentity reports; default machina-lab.
	UserName string
}

// Options configure a Front.
type Options struct {
	// Addr is the loopback address to listen on; default 127.0.0.1:0 (a free port).
	Addr string
	// Credentials are the accepted key pairs; default the lab key pair.
	Credentials []Credential
	// MaxClockSkew bounds how far a request's X-Amz-Date may be from now; default 15m.
	MaxClockSkew time.Duration
	Logger       logr.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Front serves the EC2 (and STS, ELB) Query API over a Model.
type Front struct {
	m     Model
	opts  Options
	log   logr.Logger
	net   *network
	creds map[string]Credential
	calls callCounter

	listener net.Listener
	http     *http.Server
	done     chan struct{}
}

// New checks the options and the catalogue's AWS section. It does not listen; Start does.
func New(m Model, opts Options) (*Front, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if err := checkLoopback(opts.Addr); err != nil {
		return nil, err
	}
	if len(opts.Credentials) == 0 {
		opts.Credentials = []Credential{{AccessKeyID: LabAccessKeyID, SecretAccessKey: LabSecretAccessKey}}
	}
	if opts.MaxClockSkew <= 0 {
		opts.MaxClockSkew = 15 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Front{m: m, opts: opts, log: opts.Logger, creds: map[string]Credential{}, done: make(chan struct{})}
	for _, c := range opts.Credentials {
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return nil, errors.New("ec2: a credential needs an access key ID and a secret access key")
		}
		if c.UserName == "" {
			c.UserName = "machina-lab"
		}
		f.creds[c.AccessKeyID] = c
	}
	cat := m.Catalogue()
	if cat.AWS == nil {
		return nil, errors.New("ec2: the catalogue has no aws section")
	}
	f.net = newNetwork(cat)
	return f, nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ec2: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("ec2: listen address %q is not a loopback address (use 127.0.0.1:<port>)", addr)
	}
	return nil
}

// Start listens and serves until ctx ends or Close.
func (f *Front) Start(ctx context.Context) error {
	addr := f.opts.Addr
	if host, port, _ := net.SplitHostPort(addr); host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("ec2: listening on %s: %w", addr, err)
	}
	f.listener = ln
	f.http = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		defer close(f.done)
		if err := f.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error(err, "EC2 front stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	f.log.Info("EC2 front listening", "url", f.URL(), "region", f.net.region)
	return nil
}

// Close stops serving. It is safe to call more than once.
func (f *Front) Close() {
	if f.http == nil {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.http.Shutdown(c)
	<-f.done
}

// URL is the EC2 endpoint, e.g. http://127.0.0.1:41235. Valid after Start.
func (f *Front) URL() string {
	if f.listener == nil {
		return ""
	}
	return "http://" + f.listener.Addr().String()
}

// Paths of the other services on the same port.
const (
	PathSTS   = "/sts"
	PathELB   = "/elb"
	PathELBv2 = "/elbv2"
)

// Region is the region the front serves.
func (f *Front) Region() string { return f.net.region }

// ExportLine is one shell line that points AWS SDKs and the aws CLI at the front with the
// first configured credential. The region is set twice: the SDKs read AWS_REGION, the aws
// CLI v1 only AWS_DEFAULT_REGION ("You must specify a region" without it).
func (f *Front) ExportLine() string {
	c := f.opts.Credentials[0]
	u := f.URL()
	return fmt.Sprintf("export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=%s AWS_DEFAULT_REGION=%s AWS_ENDPOINT_URL_EC2=%s "+
		"AWS_ENDPOINT_URL_STS=%s AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING=%s AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2=%s",
		c.AccessKeyID, c.SecretAccessKey, f.net.region, f.net.region, u, u+PathSTS, u+PathELB, u+PathELBv2)
}

// service is one Query API on the front.
type service struct {
	name    string // signing name
	version string
	ns      string // XML namespace of answers
	ec2     bool   // EC2's own response and error shapes
	actions map[string]action
}

// action is one call: it parses the parameters and answers a body, or an error.
type action struct {
	run func(f *Front, c *call) (any, error)
	// mutating actions need a read-write credential.
	mutating bool
}

// call is one request being served.
type call struct {
	ctx    context.Context
	svc    *service
	action string
	p      *params
	cred   Credential
	reqID  string
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// ServeHTTP answers one Query API request: route by path, verify the signature, parse the
// form, dispatch the action, write XML.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	svc := f.serviceFor(r.URL.Path)
	if svc == nil {
		f.calls.add(RejectedCall)
		f.writeError(w, ec2Service, reqID, errorf(http.StatusNotFound, "InvalidAction", "no service at path %s (EC2 /, STS %s, ELB %s, ELBv2 %s)", r.URL.Path, PathSTS, PathELB, PathELBv2))
		return
	}
	if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	c, err := f.readCall(w, r, svc, reqID)
	if err != nil {
		f.calls.add(RejectedCall)
		f.writeError(w, svc, reqID, err)
		return
	}
	f.calls.add(c.action)
	resp, err := f.dispatch(c)
	if err != nil {
		e := ec2Error(err, nil)
		f.m.RecordCall(c.action, true, e.Code == "RequestLimitExceeded")
		f.writeError(w, svc, reqID, e)
		return
	}
	f.m.RecordCall(c.action, false, false)
	f.writeResult(w, c, resp)
}

func (f *Front) serviceFor(path string) *service {
	switch strings.TrimSuffix(path, "/") {
	case "", "/healthz":
		return ec2Service
	case PathSTS:
		return stsService
	case PathELB:
		return elbService
	case PathELBv2:
		return elbv2Service
	}
	return nil
}

// dispatch checks the action and the credential's rights and runs the action; unused
// parameters are refused before anything changes (actions parse first, act second).
func (f *Front) dispatch(c *call) (resp any, err error) {
	a, ok := c.svc.actions[c.action]
	if !ok {
		return nil, errorf(http.StatusBadRequest, "InvalidAction", "The action %s is not valid for this web service (%s).", c.action, c.svc.name)
	}
	if a.mutating && c.cred.ReadOnly {
		return nil, errorf(http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation: %s is read-only and %s changes resources.", c.cred.AccessKeyID, c.action)
	}
	defer func() {
		if p := recover(); p != nil {
			f.log.Error(fmt.Errorf("panic: %v", p), "EC2 action panicked", "action", c.action)
			resp, err = nil, errorf(http.StatusInternalServerError, "InternalError", "internal error in %s", c.action)
		}
	}()
	return a.run(f, c)
}

// readCall reads and authenticates the request and parses its form.
func (f *Front) readCall(w http.ResponseWriter, r *http.Request, svc *service, reqID string) (*call, error) {
	if r.Method != http.MethodPost {
		return nil, errorf(http.StatusMethodNotAllowed, "InvalidHttpRequest", "%s takes POST with a form-encoded body, not %s", svc.name, r.Method)
	}
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	cred, err := f.verify(r, body, svc.name)
	if err != nil {
		return nil, err
	}
	p, err := parseForm(r, body)
	if err != nil {
		return nil, err
	}
	action := p.str("Action")
	if action == "" {
		return nil, errorf(http.StatusBadRequest, "MissingAction", "The request must contain the parameter Action.")
	}
	if v := p.str("Version"); v != svc.version {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterValue", "Version %q is not supported by %s; use %s.", v, svc.name, svc.version)
	}
	return &call{ctx: r.Context(), svc: svc, action: action, p: p, cred: cred, reqID: reqID}, nil
}

// fault applies the cloud's injected faults to this call.
func (c *call) fault(f *Front, ids []string, tags map[string]string) error {
	return f.m.InjectFaults(c.ctx, c.action, ids, tags)
}

// IsAction reports whether name is an action of the front that faults can target.
func IsAction(name string) bool {
	for _, s := range []*service{ec2Service, stsService, elbService, elbv2Service} {
		if _, ok := s.actions[name]; ok {
			return true
		}
	}
	return false
}

// instances are the visible instances of the front's region.
func (f *Front) instances(ids ...string) []api.Instance { return f.m.Instances(f.net.region, ids...) }
