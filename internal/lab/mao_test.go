package lab_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/scheme"
)

// startMAO starts machine-api-operator's controllers against l and stops them when the test
// ends, printing their logs' last lines if it failed. The first run on a machine builds them.
func startMAO(t *testing.T, l *lab.Lab) *lab.MAO {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	mao, err := l.StartMAO(ctx, lab.MAOOptions{Progress: testLogWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, path := range mao.LogPaths {
				if b, err := os.ReadFile(path); err == nil {
					t.Logf("--- %s (%s) ---\n%s", name, path, tailLines(string(b), 40))
				}
			}
		}
		mao.Stop()
	})
	return mao
}

// createInfrastructure creates the Infrastructure "cluster" machine-api-operator's machineset
// command reads when it starts, on no platform.
func createInfrastructure(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.NonePlatformType}}}
	if err := c.Create(ctx, infra); err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "mao-lab",
		PlatformStatus:         &configv1.PlatformStatus{Type: configv1.NonePlatformType},
		ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if err := c.Status().Update(ctx, infra); err != nil {
		t.Fatal(err)
	}
}

// TestStartMAOFailsWhole: a command that exits while starting (here the last one, with a flag
// it refuses) makes StartMAO fail naming it and quoting its complaint, and stops the commands
// that had started: the lab runs only its own processes again.
func TestStartMAOFailsWhole(t *testing.T) {
	l := labtest.Start(t)
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartMAO(context.Background(), lab.MAOOptions{}); err == nil || !strings.Contains(err.Error(), `Infrastructure "cluster"`) {
		t.Fatalf("StartMAO without an Infrastructure = %v, want an error naming it", err)
	}
	createInfrastructure(t, c)
	before := l.PIDs()
	opts := lab.WithMAOExtraArgs(lab.MAOOptions{Progress: testLogWriter{t}}, lab.MAONodeLink, "--no-such-flag")
	mao, err := l.StartMAO(context.Background(), opts)
	if err == nil {
		mao.Stop()
		t.Fatal("StartMAO with a flag nodelink-controller refuses succeeded")
	}
	if mao != nil || !strings.Contains(err.Error(), lab.MAONodeLink) || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("StartMAO = %v, %v; want nil and an error naming nodelink-controller and quoting its complaint", mao, err)
	}
	t.Logf("StartMAO failed as it should: %v", err)
	// The commands before it had started, and were stopped.
	if b, err := os.ReadFile(filepath.Join(l.Dir, "logs", "mao-"+lab.MAOMachineSet+".log")); err != nil || !strings.Contains(string(b), "Starting workers") {
		t.Errorf("the machineset command had not started before nodelink-controller failed (%v)", err)
	}
	if after := l.PIDs(); !slices.Equal(after, before) {
		t.Errorf("after the failed start the lab runs %v, want only its own %v", after, before)
	}
	if err := l.Failed(); err != nil {
		t.Errorf("the lab reports a failed component after StartMAO cleaned up: %v", err)
	}
}

// TestMAOControllersHonourAuthority runs machine-api-operator's own controllers, unchanged, as
// their own ServiceAccount identity, with the MachineAPIMigration gate on and machina's
// admission policies in force, and shows its MachineSet controller deciding by
// status.authoritativeAPI: paused with its own reason when the Cluster API is authoritative,
// creating Machines when the Machine API is, and filling an empty status.authoritativeAPI in
// from spec itself. The status.authoritativeAPI machina's migration controller writes in a
// cluster the test writes as machina's identity. machine-api-operator stamps
// status.observedGeneration with its Paused condition on a mirror; machina's
// machina-mirror-status policy lets that stamp through (the generation the controller saw).
func TestMAOControllersHonourAuthority(t *testing.T) {
	l := labtest.Start(t)
	c, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := l.ManagerConfig()
	if err != nil {
		t.Fatal(err)
	}
	machina, err := client.New(mcfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	createInfrastructure(t, c)
	mao := startMAO(t, l)
	checkMAOIdentity(t, mao)
	if b, err := os.ReadFile(mao.LogPaths[lab.MAOMachineSet]); err != nil || !strings.Contains(string(b), "FeatureGateMachineAPIMigration initialised: true") {
		t.Fatalf("the machineset command does not report MachineAPIMigration on (%v)", err)
	}

	// (a) The Cluster API is authoritative: paused, in machine-api-operator's words, no Machine.
	capi := createMachineSet(t, c, "capi-owned", machinev1beta1.MachineAuthorityClusterAPI, 2)
	patchStatus(t, machina, capi, `{"status":{"authoritativeAPI":"ClusterAPI"}}`)
	// (b) The Machine API is authoritative: not paused, and two Machines it controls.
	mapi := createMachineSet(t, c, "mapi-owned", machinev1beta1.MachineAuthorityMachineAPI, 2)
	patchStatus(t, machina, mapi, `{"status":{"authoritativeAPI":"MachineAPI"}}`)
	// (c) No status.authoritativeAPI: machine-api-operator sets it from spec.
	undecided := createMachineSet(t, c, "undecided", machinev1beta1.MachineAuthorityClusterAPI, 1)

	waitPaused(t, c, capi, "True", "AuthoritativeAPINotMachineAPI", "The AuthoritativeAPI status is set to 'ClusterAPI'")
	if n := len(machinesOf(t, c, capi)); n != 0 {
		t.Errorf("the paused MachineSet %s has %d Machines, want 0", capi.Name, n)
	}
	waitPaused(t, c, mapi, "False", "AuthoritativeAPIMachineAPI", "The AuthoritativeAPI status is set to 'MachineAPI'")
	waitFor(t, time.Minute, "machine-api-operator creates 2 Machines of "+mapi.Name, func(context.Context) (bool, error) {
		return len(machinesOf(t, c, mapi)) == 2, nil
	})
	t.Logf("MachineSet %s: %d Machines controlled by it", mapi.Name, len(machinesOf(t, c, mapi)))

	waitFor(t, time.Minute, "machine-api-operator sets "+undecided.Name+"'s status.authoritativeAPI", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(undecided), undecided)
		return err == nil && undecided.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI, err
	})
	checkStatusWrittenBy(t, c, undecided, lab.MAOMachineSet)
	waitPaused(t, c, undecided, "True", "AuthoritativeAPINotMachineAPI", "The AuthoritativeAPI status is set to 'ClusterAPI'")
	if n := len(machinesOf(t, c, undecided)); n != 0 {
		t.Errorf("the paused MachineSet %s has %d Machines, want 0", undecided.Name, n)
	}

	if err := mao.Failed(); err != nil {
		t.Error(err)
	}
}

// checkMAOIdentity: the commands' kubeconfig authenticates as their ServiceAccount identity,
// not as an administrator.
func checkMAOIdentity(t *testing.T, mao *lab.MAO) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", mao.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != lab.MAOUser || slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("machine-api-operator authenticates as %s %v, want %s without system:masters", u.Username, u.Groups, lab.MAOUser)
	}
}

func createMachineSet(t *testing.T, c client.Client, name string, authority machinev1beta1.MachineAuthority, replicas int32) *machinev1beta1.MachineSet {
	t.Helper()
	labels := map[string]string{"mao-test": name}
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lab.MAONamespace},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas:         ptr.To(replicas),
			Selector:         metav1.LabelSelector{MatchLabels: labels},
			AuthoritativeAPI: authority,
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: simProviderSpec(t)}}},
		}}
	if err := c.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// patchStatus merge-patches ms's status with the JSON format (fmt.Sprintf with args) as the
// client c.
func patchStatus(t *testing.T, c client.Client, ms *machinev1beta1.MachineSet, format string, args ...any) {
	t.Helper()
	p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, format, args...))
	if err := c.Status().Patch(context.Background(), ms, p); err != nil {
		t.Fatal(err)
	}
}

// waitPaused waits until ms has the Paused condition machine-api-operator writes.
func waitPaused(t *testing.T, c client.Client, ms *machinev1beta1.MachineSet, status, reason, message string) {
	t.Helper()
	var last string
	waitFor(t, time.Minute, "MachineSet "+ms.Name+" has Paused "+status+" ("+reason+")", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ms), ms); err != nil {
			return false, err
		}
		for _, cond := range ms.Status.Conditions {
			if cond.Type == "Paused" {
				last = string(cond.Status) + " " + cond.Reason + ": " + cond.Message
				return string(cond.Status) == status && cond.Reason == reason && cond.Message == message, nil
			}
		}
		return false, nil
	})
	t.Logf("MachineSet %s: status.authoritativeAPI %s, Paused %s", ms.Name, ms.Status.AuthoritativeAPI, last)
}

// machinesOf lists the Machines ms controls.
func machinesOf(t *testing.T, c client.Client, ms *machinev1beta1.MachineSet) []machinev1beta1.Machine {
	t.Helper()
	list := &machinev1beta1.MachineList{}
	if err := c.List(context.Background(), list, client.InNamespace(ms.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []machinev1beta1.Machine
	for _, m := range list.Items {
		if ref := metav1.GetControllerOf(&m); ref != nil && ref.UID == ms.UID {
			out = append(out, m)
		}
	}
	return out
}

// checkStatusWrittenBy: the field manager of ms's status.authoritativeAPI is manager (the
// name kube-apiserver gives a client by its user agent, here the command's name).
func checkStatusWrittenBy(t *testing.T, c client.Client, ms *machinev1beta1.MachineSet, manager string) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ms), ms); err != nil {
		t.Fatal(err)
	}
	var writers []string
	for _, mf := range ms.ManagedFields {
		if mf.Subresource == "status" && mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:authoritativeAPI"`) {
			writers = append(writers, mf.Manager)
		}
	}
	if !slices.Equal(writers, []string{manager}) {
		t.Errorf("MachineSet %s: status.authoritativeAPI written by %v, want only %s", ms.Name, writers, manager)
	}
	t.Logf("MachineSet %s: status.authoritativeAPI %s written by %v", ms.Name, ms.Status.AuthoritativeAPI, writers)
}
