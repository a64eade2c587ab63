package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/controllers"
	"github.com/machina-dev/machina/internal/demo"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/scheme"
	"github.com/machina-dev/machina/internal/upstream"
)

// upstreamFlagHelp is --upstream's help.
const upstreamFlagHelp = "with --platform aws, run the controllers OpenShift users run instead of machina's own: " +
	"machine-api-operator's MachineSet, MachineHealthCheck, NodeLink and Machine controllers (the last with machina's EC2 actuator), " +
	"the upstream Cluster API core and CAPA; machina runs only " + upstream.Groups + " (first start builds them, about 10 minutes on 2 cores)"

// upstreamReplaced are the controller groups whose work the upstream controllers do: running
// them too would give the same objects two controllers.
var upstreamReplaced = []string{"machineapi", "aws", "clusterapi", "sim"}

// checkUpstream refuses --upstream where it does not apply, and flags that contradict it.
func (f *upFlags) checkUpstream(p upPlatform) error {
	if !f.upstream {
		return nil
	}
	switch {
	case !p.capa:
		return &ExitError{Code: 2, Err: fmt.Errorf("--upstream applies to --platform aws only: the %s lab has no AWS cluster for it", p.name)}
	case !f.capa:
		return &ExitError{Code: 2, Err: fmt.Errorf("--upstream runs CAPA as the Cluster API's provider: leave out --capa=false")}
	case f.noDemo:
		return &ExitError{Code: 2, Err: fmt.Errorf("--upstream needs the demo cluster (machine-api-operator reads its Infrastructure at start): leave out --no-demo")}
	}
	if f.changed == nil || !f.changed("controllers") {
		return nil
	}
	groups, err := selectGroups(&controllers.Settings{}, f.controllers)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if slices.Contains(upstreamReplaced, g.Name) {
			return &ExitError{Code: 2, Err: fmt.Errorf("--controllers %q: group %q does what the upstream controllers do under --upstream; "+
				"leave out %s (the default is %s)", f.controllers, g.Name, strings.Join(upstreamReplaced, ", "), upstream.Groups)}
		}
	}
	return nil
}

// startUpUpstream starts machine-api-operator's controllers and the upstream Cluster API core
// beside CAPA, and marks the seeded Cluster's control plane initialized as
// cluster-capi-operator would. Its failure names what failed and how to start without it.
func startUpUpstream(ctx context.Context, l *lab.Lab, front *ec2.Front, progress io.Writer) (*upstream.Controllers, error) {
	mapiNS, capiNS := manager.Env{}.Namespaces()
	fmt.Fprintf(progress, "machina up: starting machine-api-operator %s's controllers and the Cluster API core %s; "+
		"their first start builds them (about 10 minutes on 2 cores)\n", lab.MAOVersion, lab.ClusterctlVersion)
	c, err := upstream.Start(ctx, l, upstream.Options{
		AWS:                 upstream.LabAWS(front.URL()),
		MachineAPINamespace: mapiNS, Progress: progress,
	})
	if err != nil {
		return nil, fmt.Errorf("the upstream controllers could not be built or started (start without --upstream to run machina's own): %w", err)
	}
	cl, err := client.New(l.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		c.Stop()
		return nil, err
	}
	name := demo.DefaultAWSCluster(mapiNS, capiNS, nil).Name
	if err := upstream.InitializeCluster(ctx, cl, client.ObjectKey{Namespace: capiNS, Name: name}); err != nil {
		c.Stop()
		return nil, err
	}
	fmt.Fprintf(progress, "machina up: upstream controllers running: machine-api-operator (logs %s), Cluster API core (log %s)\n",
		strings.Join(slices.Sorted(maps.Values(c.MAO.LogPaths)), ", "), c.Core.LogPath)
	return c, nil
}
