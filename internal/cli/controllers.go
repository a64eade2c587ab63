package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/manager"
)

// selectGroups resolves a --controllers value against the groups built into machina
// (internal/controllers), as a usage error naming the flag.
func selectGroups(s *controllers.Settings, spec string) ([]manager.Group, error) {
	groups, err := controllers.Select(s, spec)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("--controllers: %w", err)}
	}
	return groups, nil
}

// groupHelp lists the controller groups for --help.
func groupHelp() string {
	var b strings.Builder
	for _, g := range controllers.Groups(nil) {
		fmt.Fprintf(&b, "  %-12s %s\n", g.Name, g.Description)
	}
	return b.String()
}

// addGroupFlags registers every group's own flags (whether selected or not, so --help lists
// them), which set s.
func addGroupFlags(fs *pflag.FlagSet, s *controllers.Settings) {
	for _, g := range controllers.Groups(s) {
		if g.AddFlags != nil {
			g.AddFlags(fs)
		}
	}
}
