package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/machina-dev/machina/internal/cloud/ec2"
	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/manager"
)

// capaFlagHelp is --capa's help, saying what the controller costs.
const capaFlagHelp = "with --platform aws, also run the upstream Cluster API Provider AWS controller " +
	"(CAPA " + lab.CAPAVersion + ") next to machina's; its first start builds it from source into ~/.cache/machina " +
	"(about 10 minutes on 2 cores, then seconds); --capa=false skips it"

// startCAPAFunc starts CAPA in a lab: (*lab.Lab).StartCAPA, or a test's stand-in.
type startCAPAFunc func(ctx context.Context, l *lab.Lab, opts lab.CAPAOptions) (*lab.CAPA, error)

// capaFor reports whether `up` runs CAPA for p, refusing --capa where it does not apply.
func (f *upFlags) capaFor(p upPlatform) (bool, error) {
	if !p.capa {
		if f.changed != nil && f.changed("capa") && f.capa {
			return false, &ExitError{Code: 2, Err: fmt.Errorf("--capa applies to --platform aws only: the %s lab has no AWS cluster for it", p.name)}
		}
		return false, nil
	}
	return f.capa, nil
}

// startUpCAPA starts the upstream CAPA controller against the lab and the EC2 front, limited
// to the Cluster API namespace, as OpenShift runs it. Its failure names CAPA and how to skip
// it; StartCAPA has then stopped whatever of CAPA it started.
func startUpCAPA(ctx context.Context, l *lab.Lab, f *upFlags, front *ec2.Front, progress io.Writer) (*lab.CAPA, error) {
	_, capiNS := manager.Env{}.Namespaces()
	fmt.Fprintf(progress, "machina up: starting the Cluster API Provider AWS controller (CAPA %s) for %s; "+
		"its first start builds it (about 10 minutes on 2 cores), --capa=false skips it\n", lab.CAPAVersion, capiNS)
	start := f.startCAPA
	if start == nil {
		start = func(ctx context.Context, l *lab.Lab, opts lab.CAPAOptions) (*lab.CAPA, error) {
			return l.StartCAPA(ctx, opts)
		}
	}
	c, err := start(ctx, l, lab.CAPAOptions{EC2URL: front.URL(), Region: front.Region(), Namespace: capiNS, Progress: progress})
	if err != nil {
		return nil, fmt.Errorf("the Cluster API Provider AWS controller (CAPA %s) could not be built or started "+
			"(run with --capa=false to start the AWS lab without it): %w", lab.CAPAVersion, err)
	}
	fmt.Fprintf(progress, "machina up: CAPA controller running: health %s, log %s\n", c.HealthURL, c.LogPath)
	return c, nil
}
