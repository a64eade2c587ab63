package document

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/machina-dev/machina/internal/convert"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func decodeFile(t *testing.T, path string) []Document {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

// fixtureOptions reads the options of a fixture: the context objects of X.context.yaml when
// there is one (else the directory's context.yaml), and the flags on a leading
// "# flags: --additional-sync-machine-labels=REGEX,..." line.
func fixtureOptions(t *testing.T, in string, dirContext []Document) Options {
	t.Helper()
	opts := Options{Namespaces: convert.OpenShiftNamespaces, Context: dirContext}
	own := strings.TrimSuffix(in, ".yaml") + ".context.yaml"
	if _, err := os.Stat(own); err == nil {
		opts.Context = decodeFile(t, own)
	}
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if flags, ok := strings.CutPrefix(first, "# flags: "); ok {
		for _, f := range strings.Fields(flags) {
			v, ok := strings.CutPrefix(f, convert.SyncMachineLabelsFlag+"=")
			if !ok {
				t.Fatalf("%s: unknown flag %s", in, f)
			}
			if opts.AdditionalSyncMachineLabels, err = convert.ParseSyncMachineLabels(strings.Split(v, ",")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return opts
}

// TestGolden converts every fixture in testdata/<platform>/ (with its context, see
// fixtureOptions), then converts the result back with the same options, and compares both
// reports and outputs with the .golden file next to the fixture. Run with -update to rewrite
// the golden files.
func TestGolden(t *testing.T) {
	for _, platform := range []string{"aws", "azure", "gcp", "openstack", "powervs", "sim", "vsphere"} {
		dir := filepath.Join("testdata", platform)
		ctxDocs := decodeFile(t, filepath.Join(dir, "context.yaml"))
		inputs, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range inputs {
			if strings.HasSuffix(in, "context.yaml") {
				continue
			}
			t.Run(platform+"/"+strings.TrimSuffix(filepath.Base(in), ".yaml"), func(t *testing.T) {
				opts := fixtureOptions(t, in, ctxDocs)
				var out bytes.Buffer
				res, err := Convert(decodeFile(t, in), opts)
				if err != nil {
					t.Fatal(err)
				}
				write := func(title string, res *Result) {
					out.WriteString("### " + title + ": report\n")
					out.WriteString(WriteReport(res))
					out.WriteString("### " + title + ": objects\n")
					b, err := Marshal(res.Objects, "yaml")
					if err != nil {
						t.Fatal(err)
					}
					out.Write(b)
				}
				write("converted", res)
				if len(res.Objects) > 0 {
					b, _ := Marshal(res.Objects, "yaml")
					docs, err := Decode(bytes.NewReader(b))
					if err != nil {
						t.Fatalf("output does not decode: %v", err)
					}
					back, err := Convert(docs, opts)
					if err != nil {
						t.Fatal(err)
					}
					write("converted back", back)
				}
				golden := strings.TrimSuffix(in, ".yaml") + ".golden"
				if *update {
					if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if !bytes.Equal(want, out.Bytes()) {
					t.Errorf("%s differs from the conversion (run go test -update to accept):\n%s", golden, out.String())
				}
			})
		}
	}
}
