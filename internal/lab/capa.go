package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// CAPANamespace and CAPAServiceAccount are where CAPA's release manifests put the controller
// (config/default: namespace capa-system, name prefix capa-).
const (
	CAPANamespace      = "capa-system"
	CAPAServiceAccount = "capa-controller-manager"
	// CAPAUser is the identity the lab's CAPA controller runs as: its ServiceAccount's name,
	// bound to the ClusterRole of CAPA's own config/rbac and nothing else.
	CAPAUser = "system:serviceaccount:" + CAPANamespace + ":" + CAPAServiceAccount
)

// CAPAFeatureGates are the feature gates the lab sets on CAPA, every other one at its
// default (ROSA, EKSFargate, EventBridgeInstanceState, AlternativeGCStrategy stay off).
//   - BootstrapFormatIgnition on: OpenShift's user data is Ignition, and its AWSMachines say
//     ignition.storageType UnencryptedUserData.
//   - EKS and MachinePool off: their kinds are not installed in the lab; with them on CAPA
//     would watch CRDs that do not exist and never become ready.
//   - AutoControllerIdentityCreator on (its default): CAPA creates the cluster-wide
//     AWSClusterControllerIdentity "default" its AWSCluster webhook defaults identityRef to;
//     that identity is CAPA's own credentials (the lab key pair in its environment).
//   - ExternalResourceGC and TagUnmanagedNetworkResources off: the first only acts when an
//     AWSCluster CAPA manages is deleted (the lab's is externally managed), the second tags
//     subnets and security groups of a network CAPA does not own, which the installer's
//     network (the EC2 front's catalogue) does not allow, as OpenShift runs it.
var CAPAFeatureGates = []string{
	"AutoControllerIdentityCreator=true",
	"BootstrapFormatIgnition=true",
	"EKS=false",
	"ExternalResourceGC=false",
	"MachinePool=false",
	"TagUnmanagedNetworkResources=false",
}

// CAPAOptions configure StartCAPA.
type CAPAOptions struct {
	// EC2URL is the simulated cloud's EC2 front (srv.EC2().URL()). CAPA's EC2, STS and
	// classic and v2 ELB clients are pointed at it. Required.
	EC2URL string
	// Region is the front's region, the signing region of the endpoints. Required.
	Region string
	// AccessKeyID and SecretAccessKey are CAPA's AWS credentials, passed in its environment
	// only; default the lab key pair (ec2.LabAccessKeyID, ec2.LabSecretAccessKey).
	AccessKeyID, SecretAccessKey string
	// Namespace limits CAPA to the Cluster API objects of one namespace (--namespace), as
	// OpenShift limits it to openshift-cluster-api; "" watches every namespace.
	Namespace string
	// Progress receives the build's and the start's progress. Optional.
	Progress io.Writer

	// extraArgs are appended to the manager's flags (tests only: a flag CAPA refuses makes
	// it exit at once).
	extraArgs []string
}

// validate refuses options CAPA's --service-endpoints could not carry, naming the field.
func (o CAPAOptions) validate() error {
	u, err := url.Parse(o.EC2URL)
	switch {
	case o.EC2URL == "":
		return errors.New("lab: CAPAOptions.EC2URL is required (the EC2 front's URL)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		strings.ContainsAny(o.EC2URL, ",;="):
		return fmt.Errorf("lab: CAPAOptions.EC2URL %q is not an http(s) URL without query, fragment, ',', ';' or '='", o.EC2URL)
	case o.Region == "":
		return errors.New("lab: CAPAOptions.Region is required (the EC2 front's region)")
	case strings.ContainsAny(o.Region, ":;,= /"):
		return fmt.Errorf("lab: CAPAOptions.Region %q is not a region name", o.Region)
	}
	return nil
}

// CAPA is a running Cluster API Provider AWS controller manager. Lab.Stop also stops it.
type CAPA struct {
	// HealthURL is CAPA's readiness endpoint (/readyz on --health-addr).
	HealthURL string
	// WebhookURL is where kube-apiserver calls CAPA's admission webhooks.
	WebhookURL string
	// KubeconfigPath is the kubeconfig CAPA uses (CAPAUser's client certificate).
	KubeconfigPath string
	// LogPath is CAPA's log, <lab>/logs/capa.log.
	LogPath string
	// Build is the executable and the release manifests it runs from.
	Build CAPABuild

	lab  *Lab
	proc *process
}

// StartCAPA builds (on first use, see EnsureCAPA) and starts the upstream CAPA controller
// manager against the lab and the simulated cloud's EC2 front, as OpenShift runs it: only
// the AWSCluster, AWSMachine and AWSMachineTemplate controllers, the feature gates of
// CAPAFeatureGates, no leader election, health and diagnostics on free loopback ports.
//
// Before it starts, the lab gets what CAPA's release manifests declare: the namespace
// capa-system, the ServiceAccount capa-controller-manager, the ClusterRole capa-manager-role
// from CAPA's config/rbac bound to it, and the CRDs of CAPA's identity and cluster template
// kinds its controllers and webhooks read. CAPA authenticates as CAPAUser with a client
// certificate of the lab's CA. Its webhooks serve a certificate of the lab's CA and are
// registered with kube-apiserver (CAPA's config/webhook, the kinds the lab serves) once it
// is ready. It returns when CAPA's /readyz answers ok; on any failure it stops what it
// started, removes the webhook registrations and returns an error saying what failed.
func (l *Lab) StartCAPA(ctx context.Context, opts CAPAOptions) (c *CAPA, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.AccessKeyID == "" && opts.SecretAccessKey == "" {
		opts.AccessKeyID, opts.SecretAccessKey = ec2.LabAccessKeyID, ec2.LabSecretAccessKey
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	build, err := EnsureCAPA(ctx, progress)
	if err != nil {
		return nil, err
	}
	c = &CAPA{lab: l, Build: build, LogPath: filepath.Join(l.Dir, "logs", "capa.log")}
	defer func() {
		if err != nil {
			c.Stop()
			c, err = nil, fmt.Errorf("lab: starting the CAPA controller: %w", err)
		}
	}()
	if err := l.installCAPA(ctx, build); err != nil {
		return c, err
	}
	dir := filepath.Join(l.Dir, "capa")
	if err := c.writeCredentials(dir); err != nil {
		return c, err
	}
	start := time.Now()
	if err := c.launch(ctx, dir, opts); err != nil {
		return c, err
	}
	if err := l.registerCAPAWebhooks(ctx, build, c.WebhookURL); err != nil {
		return c, err
	}
	fmt.Fprintf(progress, "lab: CAPA controller %s ready in %s as %s (log %s)\n",
		CAPAVersion, time.Since(start).Round(100*time.Millisecond), CAPAUser, c.LogPath)
	return c, nil
}

// Stop ends CAPA and removes its webhook registrations, so kube-apiserver does not call a
// webhook nobody serves: the registrations go first, while CAPA still answers, and Stop
// returns once kube-apiserver has stopped calling them (it learns of the deletion through a
// watch, which a loaded machine delays; a create right after Stop once failed calling the
// stopped CAPA's webhook). It is safe to call more than once.
func (c *CAPA) Stop() {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.lab.removeCAPAWebhooks(ctx)
	if c.proc != nil {
		c.proc.stop(15 * time.Second)
		c.lab.removeProc(c.proc)
	}
	c.lab.waitCAPAWebhooksGone(ctx)
}

// Failed returns an error if CAPA has exited on its own.
func (c *CAPA) Failed() error {
	if c.proc != nil && c.proc.exited() {
		return c.proc.failure()
	}
	return nil
}

// writeCredentials writes CAPA's kubeconfig (CAPAUser with a ServiceAccount's groups) and
// its webhook serving certificate (127.0.0.1 and localhost) signed by the lab's CA.
func (c *CAPA) writeCredentials(dir string) error {
	certDir := filepath.Join(dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	cfg, err := c.lab.UserConfig(CAPAUser, "system:serviceaccounts", "system:serviceaccounts:"+CAPANamespace)
	if err != nil {
		return err
	}
	c.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(c.KubeconfigPath, cfg, "machina-lab"); err != nil {
		return err
	}
	return c.lab.writeServingCert(certDir, "capa-webhook-service")
}

// launch starts the manager on fresh ports (health, diagnostics, webhooks) and waits for
// its /readyz.
func (c *CAPA) launch(ctx context.Context, dir string, opts CAPAOptions) error {
	env := capaEnv(dir, c.KubeconfigPath, opts)
	p, err := c.lab.startWithPorts(ctx, "capa", 3, func(ports []int) (*process, error) {
		args := capaArgs(ports, filepath.Join(dir, "webhook-certs"), opts)
		p, err := startProcessWithEnv("capa-controller-manager", c.LogPath, env, c.Build.Manager, args...)
		if p != nil {
			p.url = "https://127.0.0.1:" + strconv.Itoa(ports[2])
		}
		return p, err
	}, func(p *process) error {
		return waitHealthy(ctx, p, &http.Client{Timeout: 2 * time.Second}, healthURL(p), "ok", 3*time.Minute)
	})
	if err != nil {
		return err
	}
	c.proc, c.HealthURL, c.WebhookURL = p, healthURL(p), p.url
	return nil
}

func healthURL(p *process) string {
	for _, a := range p.cmd.Args {
		if v, ok := strings.CutPrefix(a, "--health-addr="); ok {
			return "http://" + v + "/readyz"
		}
	}
	return ""
}

// capaArgs are the manager's flags: ports[0] health, ports[1] diagnostics, ports[2] webhooks.
func capaArgs(ports []int, certDir string, opts CAPAOptions) []string {
	args := []string{
		"--leader-elect=false",
		"--health-addr=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--diagnostics-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--webhook-port=" + strconv.Itoa(ports[2]),
		"--webhook-cert-dir=" + certDir,
		"--service-endpoints=" + CAPAServiceEndpoints(opts.EC2URL, opts.Region),
		"--feature-gates=" + strings.Join(CAPAFeatureGates, ","),
		"--v=2",
	}
	if opts.Namespace != "" {
		args = append(args, "--namespace="+opts.Namespace)
	}
	return append(args, opts.extraArgs...)
}

// capaUnservedServices are the other AWS services CAPA has clients for. The front does not
// serve them; they are pointed at a path of it all the same, so that nothing CAPA does in
// the lab can reach AWS itself: such a call fails locally (the front counts it as
// ec2.RejectedCall) instead.
var capaUnservedServices = []string{"s3", "secretsmanager", "ssm", "tagging", "sqs", "events", "eks"}

// CAPAServiceEndpoints is the --service-endpoints value that points CAPA's EC2, STS and
// classic and v2 ELB clients at the EC2 front, signed for region, and every other client
// of capaUnservedServices at <ec2URL>/unserved/<service>.
func CAPAServiceEndpoints(ec2URL, region string) string {
	pairs := []string{
		"ec2=" + ec2URL,
		"sts=" + ec2URL + ec2.PathSTS,
		"elasticloadbalancing=" + ec2URL + ec2.PathELB,
		"Elastic Load Balancing v2=" + ec2URL + ec2.PathELBv2,
	}
	for _, svc := range capaUnservedServices {
		pairs = append(pairs, svc+"="+ec2URL+"/unserved/"+svc)
	}
	return region + ":" + strings.Join(pairs, ",")
}

// capaEnv is CAPA's whole environment: its kubeconfig and AWS credentials, and nothing of
// machina's own environment, so no AWS profile, shared config or instance role of the
// machine it runs on can reach it.
func capaEnv(dir, kubeconfig string, opts CAPAOptions) []string {
	none := filepath.Join(dir, "no-aws-config")
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + dir,
		"KUBECONFIG=" + kubeconfig,
		"AWS_ACCESS_KEY_ID=" + opts.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + opts.SecretAccessKey,
		"AWS_REGION=" + opts.Region,
		"AWS_CONFIG_FILE=" + none,
		"AWS_SHARED_CREDENTIALS_FILE=" + none,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// startProcessWithEnv is startProcess with the child's whole environment given.
func startProcessWithEnv(name, logPath string, env []string, binary string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}
