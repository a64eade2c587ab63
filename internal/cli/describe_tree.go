package cli

import (
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// printer draws describe's tree from the views describeClusters gives.
type printer struct {
	out   io.Writer
	color bool
}

func (p printer) paint(code, s string) string {
	if !p.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// health colours a value: green for good, yellow for in-between, red for bad.
func (p printer) health(s string, good, bad bool) string {
	switch {
	case good:
		return p.paint("32", s)
	case bad:
		return p.paint("31", s)
	}
	return p.paint("33", s)
}

func (p printer) cluster(cl clusterView) {
	infra := cl.Infrastructure.Kind + "/" + cl.Infrastructure.Name
	prov := cl.InfrastructureProvisioned
	paused := ""
	if cl.Paused {
		paused = p.paint("33", "paused")
	}
	fmt.Fprintf(p.out, "%s %s  infrastructure %s %s  %s\n", p.paint("1", "Cluster"), p.paint("1", cl.Name),
		infra, p.health(yesNo(prov, "provisioned", "not provisioned"), prov, false), paused)
	for _, md := range cl.MachineDeployments {
		p.deployment(md)
	}
	for i, ms := range cl.MachineSets {
		p.machineSet(ms, "", i == len(cl.MachineSets)-1 && len(cl.MachinePools) == 0)
	}
	for _, mp := range cl.MachinePools {
		fmt.Fprintf(p.out, "└─ MachinePool %s  replicas %d/%d ready (Cluster API only)\n", mp.Name, mp.ReadyReplicas, mp.Replicas)
		for _, m := range mp.Machines {
			p.machine(m, "   ")
		}
	}
	if len(cl.Machines) > 0 {
		fmt.Fprintln(p.out, "Machines without a MachineSet or MachinePool")
		for _, m := range cl.Machines {
			p.machine(m, "  ")
		}
	}
}

func (p printer) machineSet(ms machineSetView, prefix string, last bool) {
	branch, indent := prefix+"├─", prefix+"│  "
	if last {
		branch, indent = prefix+"└─", prefix+"   "
	}
	var parts []string
	if m := ms.MachineAPI; m != nil {
		parts = append(parts, p.authority(m.AuthoritativeAPI), p.synchronized(m.Synchronized),
			fmt.Sprintf("MAPI %d/%d ready", m.ReadyReplicas, m.Replicas))
		if c := m.AuthorityMigration; c != nil && c.Status != string(corev1.ConditionTrue) {
			parts = append(parts, p.paint("33", "migration: "+c.Message))
		}
	} else {
		parts = append(parts, "Cluster API only")
	}
	if c := ms.ClusterAPI; c != nil {
		parts = append(parts, fmt.Sprintf("CAPI %d/%d ready", c.ReadyReplicas, c.Replicas))
		if c.Revision != "" {
			parts = append(parts, "revision "+c.Revision)
		}
		if c.Paused {
			parts = append(parts, p.paint("2", "CAPI paused"))
		}
	}
	fmt.Fprintf(p.out, "%s MachineSet %s  %s\n", branch, p.paint("1", ms.Name), strings.Join(parts, "  "))
	for _, m := range ms.Machines {
		p.machine(m, indent)
	}
}

func (p printer) machine(m machineView, indent string) {
	var parts []string
	if mapi := m.MachineAPI; mapi != nil {
		parts = append(parts, p.authority(mapi.AuthoritativeAPI), p.synchronized(mapi.Synchronized), "MAPI "+p.phase(mapi.Phase))
		if mapi.ErrorMessage != "" {
			parts = append(parts, p.paint("31", mapi.ErrorMessage))
		}
	}
	if m.ClusterAPI != nil {
		parts = append(parts, "CAPI "+p.phase(m.ClusterAPI.Phase))
	}
	fmt.Fprintf(p.out, "%s├─ Machine %s  %s\n", indent, m.Name, strings.Join(parts, "  "))
	if n := m.Node; n != nil {
		fmt.Fprintf(p.out, "%s│  └─ Node %s  %s\n", indent, n.Name, p.health(yesNo(n.Ready, "Ready", "NotReady"), n.Ready, !n.Ready))
	}
}

// phase is a Machine's phase ("-" when it has none), green when Running and red when Failed.
func (p printer) phase(phase string) string {
	if phase == "" {
		phase = "-"
	}
	return p.health(phase, phase == "Running", phase == "Failed")
}

func (p printer) authority(a authorityView) string {
	s := "authority " + a.Status
	if a.Status == "" {
		s = "authority undecided"
	}
	if a.Spec != "" && a.Spec != a.Status {
		return p.paint("33", s+" → "+a.Spec)
	}
	return s
}

func (p printer) synchronized(c *conditionView) string {
	switch {
	case c == nil:
		return p.paint("33", "Synchronized ?")
	case c.Status == string(corev1.ConditionTrue):
		return p.paint("32", "Synchronized")
	default:
		return p.paint("31", "NOT Synchronized: "+c.Message)
	}
}

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
