package document

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/machina-dev/machina/internal/convert"
)

func TestDecodeWhere(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"yaml second document", "apiVersion: v1\nkind: List\nitems: []\n---\nfoo: [\n", "document 2: not valid YAML"},
		{"list item", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n", "document 1, item 1: unknown kind v1 Pod"},
		{"no kind", "metadata: {name: x}\n", "document 1: apiVersion and kind are required"},
		{"scalar", "hello\n", "document 1: not a Kubernetes object"},
		{"json stream", `{"apiVersion":"machine.openshift.io/v1beta1","kind":"MachineHealthCheck","metadata":{"name":"a"}} {"apiVersion":`, "document 2: not valid JSON"},
		{"wrong field type", "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSet\nspec:\n  replicas: many\n", "document 1: machine.openshift.io/v1beta1 MachineSet:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.in))
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an InputError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDecodeUnknownFieldIsAWarning(t *testing.T) {
	docs, err := Decode(strings.NewReader("apiVersion: machine.openshift.io/v1beta1\nkind: MachineHealthCheck\nmetadata: {name: x}\nspec:\n  selector: {}\n  maxUnhealty: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || len(docs[0].Warnings) != 1 || !strings.Contains(docs[0].Warnings[0], "maxUnhealty") {
		t.Fatalf("want one warning about maxUnhealty, got %+v", docs)
	}
}

// FuzzDecode feeds arbitrary bytes through decoding, conversion and encoding: nothing may
// panic, and whatever converts must encode.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{"testdata/aws/worker.yaml", "testdata/aws/spot.yaml", "testdata/aws/capi-machineset.yaml", "testdata/sim/workers.yaml", "testdata/sim/capi.yaml", "testdata/aws/context.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"List"}]}`))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		docs, err := Decode(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, to := range []Direction{ToOther, ToClusterAPI, ToMachineAPI} {
			res, err := Convert(docs, Options{To: to, Namespaces: convert.OpenShiftNamespaces})
			if err != nil {
				continue
			}
			if _, err := Marshal(res.Objects, "yaml"); err != nil {
				t.Fatalf("converted objects do not encode: %v", err)
			}
			_ = WriteReport(res)
		}
	})
}
