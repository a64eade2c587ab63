package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
)

// TestUpPlatformFlag: --platform refuses unknown values, listing the known ones, and
// --cluster-name and --capa where they do not apply, before anything starts; --help says
// what --capa costs.
func TestUpPlatformFlag(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := runCommand(t, newUpCommand, "--state-dir", dir, "--platform", "gcp")
	if code != 2 || !strings.Contains(errOut, `--platform "gcp": unknown platform (known: sim, aws)`) {
		t.Errorf("exit %d, want 2 naming --platform and the known platforms: %s", code, errOut)
	}
	_, errOut, code = runCommand(t, newUpCommand, "--state-dir", dir, "--platform", "aws", "--cluster-name", "mine")
	if code != 2 || !strings.Contains(errOut, "--cluster-name applies to --platform sim only") {
		t.Errorf("exit %d, want 2 naming --cluster-name: %s", code, errOut)
	}
	_, errOut, code = runCommand(t, newUpCommand, "--state-dir", dir, "--capa")
	if code != 2 || !strings.Contains(errOut, "--capa applies to --platform aws only") {
		t.Errorf("exit %d, want 2 naming --capa: %s", code, errOut)
	}
	help, _, _ := runCommand(t, newUpCommand, "--help")
	wantAll(t, "up --help", help, "--capa", "Cluster API Provider AWS", "about 10 minutes on 2 cores", "--capa=false skips it")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused start left %d entries in the state directory", len(entries))
	}
}

// TestUpAWSLab starts the lab as `machina up --platform aws` does (startUpLab) and checks the
// seeded OpenShift-style cluster: its Machines run as EC2 instances of the front with
// aws:///<zone>/i-… provider IDs and Nodes, the MachineSets carry the scale-from-zero
// annotations of their instance type, describe and plan read it, the upstream CAPA
// controller runs next to machina's and nothing of it remains once the lab stopped, and the
// same state directory refuses to start as another platform.
func TestUpAWSLab(t *testing.T) {
	dir := t.TempDir()
	f, u, logFile, progress := startTestUpLab(t, dir, "--platform", "aws")
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			u.stop()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("progress:\n%s\nmanager log (tail):\n%s", progress.String(), tail(string(b), 60))
		}
	})
	c, err := client.New(u.lab.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	mapiNS, capiNS := manager.Env{}.Namespaces()
	cl := demo.DefaultAWSCluster(mapiNS, capiNS, nil)

	machines := waitAWSMachines(t, c, cl)
	checkInstances(t, u.cloud.EC2().URL(), cl, machines)
	waitCapacityAnnotations(t, c, cl)
	wantAll(t, "progress", progress.String(), "AWS cluster seeded", "export AWS_ACCESS_KEY_ID=")
	poll(t, time.Minute, "the progress report sees every Machine up", func(context.Context) (bool, string, error) {
		return strings.Contains(progress.String(), "machina up: Machines in openshift-machine-api: 2 of 2 Running, 2 with a Node"), progress.String(), nil
	})

	out, errOut, code := runCommand(t, newDescribeCommand, "--kubeconfig", u.lab.KubeconfigPath, "--color=never")
	if code != 0 {
		t.Fatalf("describe: exit %d: %s", code, errOut)
	}
	wantAll(t, "describe", out, append(cl.MachineSetNames(), cl.Name)...)
	waitPlanReady(t, u.lab.KubeconfigPath, cl)
	checkCAPARunning(t, u, dir, progress.String())
	migrateAWSFleet(t, u.lab.KubeconfigPath)
	checkInstances(t, u.cloud.EC2().URL(), cl, machines)

	pids, healthURL := u.lab.PIDs(), u.capa.HealthURL
	u.stop()
	stopped = true
	checkCAPAGone(t, dir, pids, healthURL)
	f.platform = "sim"
	if _, err := startUpLab(context.Background(), dir, f, progress); err == nil || !strings.Contains(err.Error(), "was seeded with --platform aws") {
		t.Fatalf("restarting the AWS lab as --platform sim: %v, want a refusal naming --platform aws", err)
	}
}

var providerIDPattern = regexp.MustCompile(`^aws:///(us-east-1[a-z])/(i-[0-9a-f]+)$`)

// startTestUpLab starts the lab as `machina up` with args does (startUpLab) in dir, with
// a pending delay of 500ms, the manager's log in dir/manager.log; it returns the flags, the
// lab, that log's path and the progress written so far and from now on.
func startTestUpLab(t *testing.T, dir string, args ...string) (*upFlags, *upLab, string, *syncBuffer) {
	t.Helper()
	f := &upFlags{}
	if err := newUpCommandWith(f).ParseFlags(append([]string{"--state-dir", dir, "--pending-delay", "500ms"}, args...)); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "manager.log")
	w, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	setupLoggingTo(w, 0)
	progress := &syncBuffer{}
	u, err := startUpLab(context.Background(), dir, f, progress)
	if err != nil {
		t.Fatalf("starting the lab (%v): %v\n%s", args, err, progress.String())
	}
	return f, u, logFile, progress
}

// waitAWSMachines waits until each worker MachineSet's Machine is Running with an
// aws:///<its zone>/i-… provider ID and a Node of that provider ID.
func waitAWSMachines(t *testing.T, c client.Client, cl demo.AWSCluster) []machinev1beta1.Machine {
	t.Helper()
	var list machinev1beta1.MachineList
	poll(t, 5*time.Minute, "every AWS Machine Running with a Node", func(ctx context.Context) (bool, string, error) {
		if err := c.List(ctx, &list, client.InNamespace(cl.MachineAPINamespace)); err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		ok := len(list.Items) == len(cl.Zones)*awsLabReplicas
		for _, m := range list.Items {
			desc, good := awsMachineReady(ctx, c, cl, &m)
			seen = append(seen, desc)
			ok = ok && good
		}
		return ok, strings.Join(seen, "; "), nil
	})
	return list.Items
}

func awsMachineReady(ctx context.Context, c client.Client, cl demo.AWSCluster, m *machinev1beta1.Machine) (string, bool) {
	id := ptr.Deref(m.Spec.ProviderID, "")
	desc := fmt.Sprintf("%s: phase %q providerID %q", m.Name, ptr.Deref(m.Status.Phase, ""), id)
	match := providerIDPattern.FindStringSubmatch(id)
	zone := strings.TrimPrefix(m.Labels["machine.openshift.io/cluster-api-machineset"], cl.Name+"-worker-")
	if ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning || match == nil || match[1] != zone || m.Status.NodeRef == nil {
		return desc, false
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		return desc + ": " + err.Error(), false
	}
	return desc + " node " + node.Name, node.Spec.ProviderID == id
}

// checkInstances asks the EC2 front, with aws-sdk-go-v2 and the lab key pair, for the
// cluster's running instances: exactly the Machines' instances.
func checkInstances(t *testing.T, url string, cl demo.AWSCluster, machines []machinev1beta1.Machine) {
	t.Helper()
	svc := awsec2.New(awsec2.Options{Region: cl.Region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(ec2.LabAccessKeyID, ec2.LabSecretAccessKey, "")})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := svc.DescribeInstances(ctx, &awsec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + cl.Name), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: []string{"running"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			got = append(got, fmt.Sprintf("%s/%s/%s", aws.ToString(i.Placement.AvailabilityZone), aws.ToString(i.InstanceId), i.InstanceType))
		}
	}
	for _, m := range machines {
		match := providerIDPattern.FindStringSubmatch(ptr.Deref(m.Spec.ProviderID, ""))
		want = append(want, fmt.Sprintf("%s/%s/%s", match[1], match[2], cl.InstanceType))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("EC2 reports the cluster's running instances %v, want the Machines' %v", got, want)
	}
}

// waitCapacityAnnotations waits for the scale-from-zero annotations of the catalogue's
// figures for the MachineSets' instance type.
func waitCapacityAnnotations(t *testing.T, c client.Client, cl demo.AWSCluster) {
	t.Helper()
	i := slices.IndexFunc(api.DefaultAWSCatalogue().InstanceTypes, func(it api.InstanceType) bool { return it.Name == cl.InstanceType })
	if i < 0 {
		t.Fatalf("the catalogue has no %s", cl.InstanceType)
	}
	it := api.DefaultAWSCatalogue().InstanceTypes[i]
	want := map[string]string{"machine.openshift.io/vCPU": strconv.Itoa(it.VCPU), "machine.openshift.io/memoryMb": strconv.FormatInt(it.MemoryMiB, 10),
		"machine.openshift.io/GPU": strconv.Itoa(it.GPU)}
	poll(t, 2*time.Minute, "scale-from-zero annotations on the AWS MachineSets", func(ctx context.Context) (bool, string, error) {
		var seen []string
		ok := true
		for _, name := range cl.MachineSetNames() {
			ms := &machinev1beta1.MachineSet{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: cl.MachineAPINamespace, Name: name}, ms); err != nil {
				return false, err.Error(), nil
			}
			seen = append(seen, fmt.Sprintf("%s: %v", name, ms.Annotations))
			for k, v := range want {
				ok = ok && ms.Annotations[k] == v
			}
			ok = ok && strings.Contains(ms.Annotations["capacity.cluster-autoscaler.kubernetes.io/labels"], "kubernetes.io/arch="+it.Architecture)
		}
		return ok, strings.Join(seen, "; "), nil
	})
}

// migrateAWSFleet moves the AWS lab's whole fleet to the Cluster API, where the upstream
// CAPA controller takes the AWSMachines, and back, with machina migrate --all, each way once
// plan calls everything ready.
func migrateAWSFleet(t *testing.T, kubeconfig string) {
	t.Helper()
	for _, to := range []string{"ClusterAPI", "MachineAPI"} {
		poll(t, 3*time.Minute, "plan --to "+to+": every resource ready", func(context.Context) (bool, string, error) {
			out, errOut, code := runCommand(t, newPlanCommand, "--kubeconfig", kubeconfig, "--to", to)
			return code == 0, out + errOut, nil
		})
		out, errOut, code := runCommand(t, newMigrateCommand, "--kubeconfig", kubeconfig, "--all", "--to", to, "--timeout", "3m")
		t.Logf("machina migrate --all --to %s:\n%s%s", to, out, errOut)
		if code != 0 {
			t.Fatalf("machina migrate --all --to %s: exit %d", to, code)
		}
		wantAll(t, "migrate --all --to "+to, out, "wave: MachineSets", "wave: Machines", to+"-authoritative")
	}
}

// waitPlanReady runs plan until the sync has mirrored the cluster and every resource can
// move to the Cluster API.
func waitPlanReady(t *testing.T, kubeconfig string, cl demo.AWSCluster) {
	t.Helper()
	poll(t, 3*time.Minute, "plan: every resource ready", func(context.Context) (bool, string, error) {
		out, errOut, code := runCommand(t, newPlanCommand, "--kubeconfig", kubeconfig)
		if code == planExitBadInput {
			return false, "", fmt.Errorf("plan: exit %d: %s", code, errOut)
		}
		for _, name := range cl.MachineSetNames() {
			if !strings.Contains(out, name) {
				return false, out + errOut, nil
			}
		}
		return code == 0, out + errOut, nil
	})
}

// poll checks cond every 500ms until it holds, failing the test with cond's last
// description after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		// Each check gets its own deadline, so the last one still says what it saw.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, desc, err := cond(ctx)
		last = desc
		return ok, err
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v (last seen: %s)", what, timeout, err, last)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
