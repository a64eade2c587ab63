package cli

import (
	"fmt"
	"strings"

	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/manager"
)

// selectGroups resolves a --controllers value against the groups built into machina
// (internal/controllers), as a usage error naming the flag.
func selectGroups(spec string) ([]manager.Group, error) {
	groups, err := controllers.Select(spec)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("--controllers: %w", err)}
	}
	return groups, nil
}

// groupHelp lists the controller groups for --help.
func groupHelp() string {
	var b strings.Builder
	for _, g := range controllers.Groups() {
		fmt.Fprintf(&b, "  %-12s %s\n", g.Name, g.Description)
	}
	return b.String()
}
