package lab

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The embedded machine-api-operator module must require the revision the lab says it builds
// (MAOVersion) and name exactly the commands the lab builds as its tools, so that `make
// mao-mod` (go mod tidy) keeps their dependencies and nothing else.
func TestMAOModulePinsVersionAndCommands(t *testing.T) {
	var pinned string
	if m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(maoModule) + ` (v\S+)`).FindSubmatch(maoGoMod); m != nil {
		pinned = string(m[1])
	}
	if pinned != MAOVersion {
		t.Errorf("maomod/go.mod.txt requires %s %q, the lab builds MAOVersion %s", maoModule, pinned, MAOVersion)
	}
	if got, want := maoTools(maoGoMod), maoCommandPackages(); !slices.Equal(got, want) {
		t.Errorf("maomod/go.mod.txt names tools %v, the lab builds %v", got, want)
	}
	if regexp.MustCompile(`(?m)^replace\b`).Match(maoGoMod) {
		t.Errorf("maomod/go.mod.txt replaces modules; the lab builds machine-api-operator's commands from the pinned modules unchanged")
	}
	// The module's go.sum must hold the pinned revision itself, or the build reaches the
	// checksum database for it.
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(maoModule+" "+MAOVersion) + ` h1:`).Match(maoGoSum) {
		t.Errorf("maomod/go.sum.txt lacks %s %s", maoModule, MAOVersion)
	}
}

// maoTools are the packages of the tool directives of go.mod (one-line or block form), sorted.
func maoTools(goMod []byte) []string {
	var tools []string
	inBlock := false
	for _, line := range strings.Split(string(goMod), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "tool (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "":
			tools = append(tools, line)
		case strings.HasPrefix(line, "tool "):
			tools = append(tools, strings.TrimSpace(strings.TrimPrefix(line, "tool ")))
		}
	}
	slices.Sort(tools)
	return tools
}

// maoCommandPackages are the packages of maoCommands, sorted.
func maoCommandPackages() []string {
	var pkgs []string
	for _, name := range maoCommands {
		pkgs = append(pkgs, maoModule+"/cmd/"+name)
	}
	slices.Sort(pkgs)
	return pkgs
}
