package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/scheme"
)

// checkCAPARunning: the AWS lab runs the upstream CAPA controller, its /readyz answers ok,
// its log is where `up` says, and both are in the progress and in what `up` prints.
func checkCAPARunning(t *testing.T, u *upLab, dir, progress string) {
	t.Helper()
	if u.capa == nil {
		t.Fatalf("the AWS lab started without CAPA:\n%s", progress)
	}
	resp, err := http.Get(u.capa.HealthURL)
	if err != nil {
		t.Fatalf("CAPA's health endpoint: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("%s: HTTP %d %q, want 200 ok", u.capa.HealthURL, resp.StatusCode, body)
	}
	if fi, err := os.Stat(u.capa.LogPath); err != nil || fi.Size() == 0 || !strings.HasPrefix(u.capa.LogPath, dir) {
		t.Errorf("CAPA's log %s (in %s): %v, want a non-empty file in the state directory", u.capa.LogPath, dir, err)
	}
	wantAll(t, "progress", progress, "machina up: CAPA controller running: health "+u.capa.HealthURL)
	wantAll(t, "what up prints", u.banner(dir), "CAPA controller: health "+u.capa.HealthURL+"   log "+u.capa.LogPath)
	if err := u.capa.Failed(); err != nil {
		t.Errorf("CAPA: %v", err)
	}
}

// checkCAPAGone: after `up` stopped, none of the lab's processes (CAPA's among them) runs,
// CAPA's health endpoint is gone, and the lab, started again on the same state directory,
// has no CAPA webhook registration kube-apiserver would call.
func checkCAPAGone(t *testing.T, dir string, pids []int, healthURL string) {
	t.Helper()
	checkProcessesGone(t, pids, "after up stopped")
	hc := &http.Client{Timeout: 2 * time.Second}
	if resp, err := hc.Get(healthURL); err == nil {
		resp.Body.Close()
		t.Errorf("CAPA's health endpoint %s still answers after up stopped", healthURL)
	}
	l, err := lab.Start(context.Background(), lab.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range []client.ObjectList{&admissionregistrationv1.MutatingWebhookConfigurationList{},
		&admissionregistrationv1.ValidatingWebhookConfigurationList{}} {
		if err := c.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		var names []string
		switch l := list.(type) {
		case *admissionregistrationv1.MutatingWebhookConfigurationList:
			for _, w := range l.Items {
				names = append(names, w.Name)
			}
		case *admissionregistrationv1.ValidatingWebhookConfigurationList:
			for _, w := range l.Items {
				names = append(names, w.Name)
			}
		}
		for _, n := range names {
			if strings.HasPrefix(n, "capa-") {
				t.Errorf("webhook configuration %s is still registered after up stopped", n)
			}
		}
	}
}

// TestUpAWSCAPAFails: when CAPA cannot be built or started, `up --platform aws` fails with a
// message naming CAPA, the cause and --capa=false, and stops everything it had started (the
// control plane's processes; the controllers and cloud with them).
func TestUpAWSCAPAFails(t *testing.T) {
	dir := t.TempDir()
	f := &upFlags{}
	if err := newUpCommandWith(f).ParseFlags([]string{"--platform", "aws", "--state-dir", dir}); err != nil {
		t.Fatal(err)
	}
	w, err := os.Create(dir + "/manager.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	setupLoggingTo(w, 0)
	var pids []int
	var ec2URL string
	f.startCAPA = func(_ context.Context, l *lab.Lab, opts lab.CAPAOptions) (*lab.CAPA, error) {
		pids, ec2URL = l.PIDs(), opts.EC2URL
		return nil, errors.New("lab: building the Cluster API Provider AWS v2.13.0 controller: go build: exit status 1")
	}
	var progress syncBuffer
	u, err := startUpLab(context.Background(), dir, f, &progress)
	if err == nil {
		u.stop()
		t.Fatal("up started the AWS lab although CAPA failed")
	}
	wantAll(t, "the error", err.Error(), "Cluster API Provider AWS controller (CAPA", "could not be built or started",
		"--capa=false", "go build: exit status 1")
	if len(pids) == 0 || ec2URL == "" {
		t.Fatalf("CAPA was not asked to start against a running lab and EC2 front (pids %v, EC2 %q):\n%s", pids, ec2URL, progress.String())
	}
	checkProcessesGone(t, pids, "after the failed start")
	hc := &http.Client{Timeout: 2 * time.Second}
	if resp, err := hc.Get(ec2URL); err == nil {
		resp.Body.Close()
		t.Errorf("the EC2 front %s still answers after the failed start", ec2URL)
	}
}

// checkProcessesGone: none of the lab's processes pids exists any more.
func checkProcessesGone(t *testing.T, pids []int, when string) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d of the lab still exists %s (kill 0: %v)", pid, when, err)
		}
	}
}
