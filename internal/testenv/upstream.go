package testenv

import (
	"context"
	"time"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/lab/labtest"
	"github.com/machina-dev/machina/internal/manager"
	"github.com/machina-dev/machina/internal/upstream"
)

// StartUpstream starts machine-api-operator's Machine API controllers (its Machine controller
// with machina's EC2 actuator against the EC2 front, Options.EC2) and the upstream Cluster API
// core for the Cluster API namespace (package upstream); run machina's manager with
// upstream.Groups beside them and CAPA (StartCAPA) as the Cluster API's provider. The
// Infrastructure "cluster" must exist first. They are stopped at cleanup, and when the test
// failed their last errors are logged. StopManager does not stop them: a crash of machina's
// manager leaves them running, as a restart of machina's pod would.
func (e *Env) StartUpstream() *upstream.Controllers {
	e.T.Helper()
	if e.EC2URL == "" {
		e.T.Fatal("StartUpstream needs the EC2 front (testenv.Options.EC2)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	start := time.Now()
	mapiNS, _ := manager.Env{}.Namespaces()
	c, err := upstream.Start(ctx, e.Lab, upstream.Options{
		AWS:                 upstream.LabAWS(e.EC2URL),
		MachineAPINamespace: mapiNS, Progress: labtest.LogWriter(e.T),
	})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Logf("machine-api-operator %s and the Cluster API core %s up in %s", lab.MAOVersion, lab.ClusterctlVersion,
		time.Since(start).Round(100*time.Millisecond))
	e.T.Cleanup(func() {
		if e.T.Failed() {
			if err := c.Failed(); err != nil {
				e.T.Logf("an upstream controller stopped: %v", err)
			}
			for name, path := range c.MAO.LogPaths {
				e.T.Logf("machine-api-operator's %s log %s, last errors:\n%s", name, path, lastErrors(path, 10))
			}
			e.T.Logf("the Cluster API core's log %s, last errors:\n%s", c.Core.LogPath, lastErrors(c.Core.LogPath, 15))
		}
		c.Stop()
	})
	e.Upstream = c
	return c
}
