// Command crdsync refreshes config/crd/upstream from the Go modules go.mod pins
// (`make crds`), or with -check reports drift and exits 1.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/machina-dev/machina/internal/crdsync"
)

func main() {
	check := flag.Bool("check", false, "report drift instead of writing")
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	drifted, err := crdsync.Sync(*root, *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdsync:", err)
		os.Exit(2)
	}
	for _, d := range drifted {
		fmt.Println("drifted:", d)
	}
	if len(drifted) > 0 {
		os.Exit(1)
	}
}
