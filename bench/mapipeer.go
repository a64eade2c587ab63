package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/machina-dev/machina/internal/lab"
	"github.com/machina-dev/machina/internal/upstream"
)

// machineAPI is mapi-scale's -machine-api flag: whose Machine API controllers scale the
// MachineSet, machina's ("machina") or machine-api-operator's ("upstream": its machineset,
// machine-healthcheck and nodelink-controller commands built unchanged from the pinned module,
// and its Machine controller library with machina's EC2 actuator behind it, as
// machine-api-provider-aws wires its own; -platform aws only).
var machineAPI = "machina"

// auditWrites is the -audit flag: the API server keeps an audit log of every write, and
// mapi-scale counts the writes of the Machine API controllers' identity from it (machina's
// manager, or machine-api-operator's ServiceAccount, whose nodelink-controller serves no
// metrics). On with -machine-api upstream and in compare, for both sides alike.
var auditWrites bool

// startMachineAPIPeer starts machine-api-operator's Machine API controllers against e's lab
// (the Infrastructure must exist: its MachineSet command reads it at start).
func startMachineAPIPeer(ctx context.Context, e *env) (stop func(), err error) {
	// Its Machine controller runs in this process and logs through klog: to a file, not
	// over the benchmark's report.
	logf, err := os.Create(filepath.Join(e.dir, "mao-machine-controller.log"))
	if err != nil {
		return nil, err
	}
	klog.LogToStderr(false)
	klog.SetOutput(logf)
	fmt.Fprintln(os.Stderr, "machine-api-operator's Machine controller log:", logf.Name())
	c, err := upstream.StartMachineAPI(ctx, e.lab, upstream.Options{AWS: upstream.LabAWS(e.cloud.EC2().URL()),
		MachineAPINamespace: lab.MAONamespace, Progress: os.Stderr})
	if err != nil {
		_ = logf.Close()
		return nil, err
	}
	return func() { c.Stop(); klog.Flush(); _ = logf.Close() }, nil
}

// machineAPIUser is the identity whose writes mapi-scale counts from the audit log.
func machineAPIUser() string {
	if machineAPI == "upstream" {
		return lab.MAOUser
	}
	return lab.ManagerUser
}

// auditWriteCount counts the writes user made from from to to, in all and by resource.
func auditWriteCount(e *env, user string, from, to time.Time) (int64, string, error) {
	events, err := lab.ReadAudit(e.lab.AuditLogPath())
	if err != nil {
		return 0, "", err
	}
	var n int64
	by := map[string]int64{}
	for _, ev := range events {
		if ev.User != user || ev.Received.Before(from) || ev.Received.After(to) {
			continue
		}
		switch ev.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			n++
			res := ev.Resource
			if ev.Subresource != "" {
				res += "/" + ev.Subresource
			}
			by[ev.Verb+" "+res]++
		}
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(by[b] - by[a]) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	return n, strings.Join(parts, ", "), nil
}
