package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/machina-dev/machina/internal/provider"
)

const docTestdata = "../document/testdata/"

// runConvertCmd runs `machina convert args...` in-process (see runCommand).
func runConvertCmd(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runCommandIn(t, newConvertCommand, stdin, args...)
}

func TestConvertCommand(t *testing.T) {
	capiMachine, err := os.ReadFile("testdata/convert/capi-machine.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		args      []string
		stdin     string
		code      int
		stdout    []string
		stderr    []string
		noStdout  bool
		notStderr []string
	}{{
		name:      "installer MachineSet with Infrastructure",
		args:      []string{"-f", docTestdata + "aws/worker.yaml", "--infrastructure", docTestdata + "aws/context.yaml"},
		stdout:    []string{"kind: AWSMachineTemplate", "name: ci-op-7x2kq-abcde-worker-us-east-1a-", "kind: MachineSet", "clusterName: ci-op-7x2kq-abcde", "failureDomain: us-east-1a", "\n---\n"},
		stderr:    []string{"MachineSet openshift-machine-api/ci-op-7x2kq-abcde-worker-us-east-1a (document 1): converted\n"},
		notStderr: []string{"note:"},
	}, {
		name:   "no flags: values taken from the input and noted",
		args:   []string{"-f", docTestdata + "aws/spot.yaml"},
		stdout: []string{"spotMarketOptions:", "maxPrice: \"0.085\"", "marketType: Spot"},
		stderr: []string{`note: cluster name "ci-op-7x2kq-abcde" taken from MachineSet`, `note: cluster region "us-east-1" taken from`, "(document 1, item 2): converted"},
	}, {
		name: "not convertible: exit 1 with every error and its path",
		args: []string{"-f", docTestdata + "aws/unconvertible.yaml", "--infrastructure", docTestdata + "aws/context.yaml"},
		code: 1,
		stderr: []string{
			"(document 1): not convertible (10 errors)",
			`error: spec.template.spec.providerSpec.value.placement.region: Invalid value: "us-west-2": the cluster's region is us-east-1`,
			`error: spec.template.spec.providerSpec.value.ami.filters: Invalid value: ["name"]`,
			`error: spec.template.spec.providerSpec.value.blockDevices[0].ebs.kmsKey.filters`,
			`error: spec.template.spec.providerSpec.value.subnet.arn`,
			`error: spec.deletePolicy: Unsupported value: "Smallest"`,
			"Error: 1 of 1 objects could not be converted",
		},
		noStdout: true,
	}, {
		name:   "mixed: the convertible object is still written, exit 1",
		args:   []string{"-f", "testdata/convert/mixed.yaml", "--region", "sim-east-1"},
		code:   1,
		stdout: []string{"kind: SimMachine", "name: good"},
		stderr: []string{"Machine openshift-machine-api/good (document 1, item 1): converted", "Machine openshift-machine-api/bad (document 1, item 2): not convertible (2 errors)",
			"error: spec.providerSpec.value.instanceType: Required value", "error: spec.providerSpec.value.userDataSecret: Required value"},
		notStderr: []string{"name: bad"},
	}, {
		name:   "JSON stream on stdin, JSON out",
		args:   []string{"-f", "-", "-o", "json", "--cluster-name", "lab-7x2kq"},
		stdin:  mustRead(t, "testdata/convert/stream.json"),
		stdout: []string{`"kind": "List"`, `"kind": "MachineHealthCheck"`, `"nodeStartupTimeoutSeconds": 600`, `"timeoutSeconds": 2`},
		stderr: []string{"(document 2): converted with 1 warning", "warning: spec.unhealthyConditions[0].timeout: 1.5s rounded up to 2s"},
	}, {
		name:   "Cluster API to Machine API",
		args:   []string{"-f", "-", "--to", "machineapi", "--region", "sim-east-1"},
		stdin:  string(capiMachine),
		stdout: []string{"apiVersion: machine.openshift.io/v1beta1", "kind: Machine", "namespace: openshift-machine-api", "providerID: sim://sim-east-1/sim-east-1a/i-77", "zone: sim-east-1a"},
		stderr: []string{"Machine openshift-cluster-api/lab-7x2kq-w-1 (document 1): converted\n"},
	}, {
		name:      "oc get output: server fields, status and last-applied are not carried",
		args:      []string{"-f", "testdata/convert/oc-get.yaml"},
		stdout:    []string{"kind: SimMachineTemplate", "name: lab-7x2kq-worker-a\n", "unhealthyLessThanOrEqualTo: 40%", "nodeStartupTimeoutSeconds: 600"},
		stderr:    []string{"MachineHealthCheck openshift-machine-api/workers (document 1, item 1): converted with 1 warning", "warning: metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]: dropped", "MachineSet openshift-machine-api/lab-7x2kq-worker-a (document 1, item 2): converted\n"},
		notStderr: []string{"uid:", "resourceVersion:", "\nstatus:", "last-applied-configuration: ", "creationTimestamp", "managedFields"},
	}, {
		name:     "Cluster API without a region: bad input",
		args:     []string{"-f", "testdata/convert/capi-machine.yaml"},
		code:     2,
		noStdout: true,
		stderr:   []string{"Error: testdata/convert/capi-machine.yaml: document 1: cannot tell the cluster's sim region: give --region"},
	}, {
		name:      "--infrastructure without a region: the region from the input, not a request for --infrastructure",
		args:      []string{"-f", docTestdata + "aws/spot.yaml", "--infrastructure", "testdata/convert/infrastructure-no-region.yaml"},
		stderr:    []string{`note: cluster region "us-east-1" taken from MachineSet`, "the cluster-wide objects given name no aws region; give --region to set it"},
		notStderr: []string{"give --region or --infrastructure", "cluster name"},
	}, {
		name:      "--infrastructure without a region, Cluster API input without a zone",
		args:      []string{"-f", docTestdata + "aws/capi-machineset.yaml", "--infrastructure", "testdata/convert/infrastructure-no-region.yaml"},
		code:      2,
		noStdout:  true,
		stderr:    []string{"cannot tell the cluster's aws region: the cluster-wide objects given name no aws region; give --region to set it"},
		notStderr: []string{"give --region or --infrastructure", "--region, or --infrastructure"},
	}, {
		name:     "unparsable document: bad input naming it",
		args:     []string{"-f", "testdata/convert/bad-yaml.yaml"},
		code:     2,
		noStdout: true,
		stderr:   []string{"Error: testdata/convert/bad-yaml.yaml: document 2: not valid YAML"},
	}, {
		name:     "unknown kind: bad input",
		args:     []string{"-f", "testdata/convert/unknown-kind.yaml"},
		code:     2,
		noStdout: true,
		stderr:   []string{"document 1: unknown kind cluster.x-k8s.io/v1beta1 MachineSet"},
	}, {
		name:     "already in the target API: bad input",
		args:     []string{"-f", docTestdata + "aws/worker.yaml", "--to", "machineapi"},
		code:     2,
		noStdout: true,
		stderr:   []string{"document 1: MachineSet openshift-machine-api/ci-op-7x2kq-abcde-worker-us-east-1a is already a Machine API object"},
	}, {
		name:      "node labels the Cluster API is configured to propagate",
		args:      []string{"-f", docTestdata + "aws/unconvertible.yaml", "--infrastructure", docTestdata + "aws/context.yaml", "--additional-sync-machine-labels", `^topology\.example\.com/`},
		code:      1,
		stderr:    []string{"not convertible (9 errors)"},
		notStderr: []string{"topology.example.com/rack"},
	}, {
		name: "bad --additional-sync-machine-labels", args: []string{"-f", "-", "--additional-sync-machine-labels", "("}, code: 2, noStdout: true, stderr: []string{"missing closing )"},
	}, {
		name: "missing file", args: []string{"-f", "testdata/convert/nope.yaml"}, code: 2, noStdout: true,
		stderr: []string{"no such file"},
	}, {
		name: "no -f", args: nil, code: 2, noStdout: true, stderr: []string{"no input"},
	}, {
		name: "bad --to", args: []string{"-f", "-", "--to", "kubernetes"}, code: 2, noStdout: true, stderr: []string{`--to "kubernetes"`},
	}, {
		name: "empty input", args: []string{"-f", "-"}, stdin: "# nothing\n---\n", code: 2, noStdout: true, stderr: []string{"standard input: no objects"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runConvertCmd(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", code, tc.code, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			if tc.noStdout && stdout != "" {
				t.Errorf("unexpected stdout:\n%s", stdout)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			for _, s := range tc.notStderr {
				if strings.Contains(stderr+stdout, s) {
					t.Errorf("output unexpectedly contains %q", s)
				}
			}
		})
	}
}

// TestConvertBackWithTheSameFlags converts installer MachineSets and a Machine to the Cluster
// API and the output back again with the same flags each time: none, or the cluster-wide
// objects (the Cluster API side names its region by its failure domains).
func TestConvertBackWithTheSameFlags(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		flags      []string
	}{
		{"no flags", "aws/spot.yaml", nil},
		{"no flags, a Machine", "aws/machine-dedicated-host.yaml", nil},
		{"--infrastructure", "aws/worker.yaml", []string{"--infrastructure", docTestdata + "aws/context.yaml"}},
		{"--infrastructure with the AWSCluster, a control-plane Machine", "aws/control-plane.yaml", []string{"--infrastructure", docTestdata + "aws/control-plane.context.yaml"}},
		{"--additional-sync-machine-labels", "aws/edge-local-zone.yaml", []string{"--additional-sync-machine-labels", `^machine\.openshift\.io/(zone-type|zone-group|parent-zone-name)$`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capi, stderr, code := runConvertCmd(t, "", append([]string{"-f", docTestdata + tc.file}, tc.flags...)...)
			if code != 0 {
				t.Fatalf("to the Cluster API: exit %d\n%s", code, stderr)
			}
			mapi, stderr, code := runConvertCmd(t, capi, append([]string{"-f", "-"}, tc.flags...)...)
			if code != 0 {
				t.Fatalf("back to the Machine API with the same flags: exit %d\n%s", code, stderr)
			}
			if !strings.Contains(mapi, "kind: AWSMachineProviderConfig") {
				t.Errorf("no providerSpec in:\n%s", mapi)
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConvertHelpListsRegisteredKinds(t *testing.T) {
	cmd := newConvertCommand()
	help := cmd.Long + cmd.Flags().Lookup("infrastructure").Usage
	for _, p := range provider.Builtin().All() {
		for _, gvk := range p.InfraKinds() {
			if !strings.Contains(help, gvk.Kind) {
				t.Errorf("convert --help does not name %s's %s", p.Name, gvk.Kind)
			}
		}
	}
}
