package lab

import (
	"bytes"
	"os"
	"testing"
)

// The embedded tools module must be identical to hack/tools, which `make tools-mod` tidies.
func TestToolsModuleMatchesHackTools(t *testing.T) {
	for _, f := range []struct {
		embedded []byte
		path     string
	}{{toolsGoMod, "../../hack/tools/go.mod"}, {toolsGoSum, "../../hack/tools/go.sum"}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, f.embedded) {
			t.Errorf("%s differs from the lab's embedded copy: run `make tools-mod`", f.path)
		}
	}
}
