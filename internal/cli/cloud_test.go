package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/client"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// machina runs the command line with args and returns its output.
func machina(t *testing.T, args ...string) string {
	t.Helper()
	cmd := NewRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("machina %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestCloudCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	cmd := NewRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"cloud", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--pending-delay", "0",
		"--fault", "capacity,zone=sim-east-1c"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	urlRE := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)`)
	var url string
	deadline := time.Now().Add(10 * time.Second)
	for url == "" {
		if m := urlRE.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("machina cloud did not report its URL:\n%s", out.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}

	c, err := client.New(url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := api.RunInstancesRequest{ClientToken: "t1", Region: "sim-east-1", Zone: "sim-east-1c", InstanceType: "s1.small",
		Image: "sim-rhcos-9", Tags: map[string]string{"pool": "cli"}}
	if _, err := c.RunInstances(ctx, req); !client.IsCapacity(err) {
		t.Fatalf("the --fault flag was not applied: %v", err)
	}
	req.Zone = "sim-east-1a"
	inst, err := c.RunInstances(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	id := strings.TrimSpace(machina(t, "cloud", "fault", "add", "--url", url, "throttle,op=DescribeImages,retry-after=1,count=1"))
	if !strings.HasPrefix(id, "fault-") {
		t.Errorf("fault add printed %q", id)
	}
	list := machina(t, "cloud", "fault", "list", "--url", url)
	if !strings.Contains(list, "capacity") || !strings.Contains(list, "sim-east-1c") || !strings.Contains(list, id) || !strings.Contains(list, "retry after 1s") {
		t.Errorf("fault list:\n%s", list)
	}
	if got := machina(t, "cloud", "instances", "--url", url, "--tag", "pool=cli"); !strings.Contains(got, inst.Instance.InstanceID) || !strings.Contains(got, "running") {
		t.Errorf("instances:\n%s", got)
	}
	if got := machina(t, "cloud", "kill", "--url", url, "--tag", "pool=cli"); !strings.Contains(got, inst.Instance.InstanceID+"\trunning -> terminated") {
		t.Errorf("kill:\n%s", got)
	}
	if got := machina(t, "cloud", "fault", "clear", "--url", url); !strings.Contains(got, "2 fault(s) removed") {
		t.Errorf("fault clear: %s", got)
	}
	if got := machina(t, "cloud", "stats", "--url", url); !strings.Contains(got, `"instancesCreated": 1`) {
		t.Errorf("stats:\n%s", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("machina cloud returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("machina cloud did not stop when its context ended")
	}

	bad := NewRootCommand()
	bad.SetOut(&bytes.Buffer{})
	bad.SetErr(&bytes.Buffer{})
	bad.SetArgs([]string{"cloud", "--listen", "0.0.0.0:0", "--state-dir", t.TempDir()})
	if err := bad.Execute(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("non-loopback --listen: %v", err)
	}
}
