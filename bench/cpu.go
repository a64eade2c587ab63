package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on Linux everywhere
// Go runs).
const clockTicks = 100

// cpuSnapshot is the CPU time every process of this machine has used so far, by role, and
// when it was read.
type cpuSnapshot struct {
	at    time.Time
	procs map[int]procTicks
}

// procTicks is one process's role and CPU time.
type procTicks struct {
	role  string
	ticks int64
}

// used returns the CPU ticks each role used from from to s: each process's time since from
// (all of it for a process started since). A process gone by s no longer counts, so a
// process of an earlier lab still exiting at from never makes a role's figure negative.
func (s cpuSnapshot) used(from cpuSnapshot) map[string]int64 {
	out := map[string]int64{}
	for pid, p := range s.procs {
		before := from.procs[pid]
		if before.role != p.role {
			before.ticks = 0 // a new process under a recycled pid
		}
		out[p.role] += p.ticks - before.ticks
	}
	return out
}

// readCPU reads every process's user+system time and adds it up by role: the lab's
// processes by their command name, this benchmark (the cloud, its kubelets, the informers
// and, in the floor scenarios, the writer) and the manager child by pid, everything else
// as "other".
func (e *env) readCPU() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), procs: map[int]procTicks{}}
	mgr := -1
	if e.mgr != nil && e.mgr.Process != nil {
		mgr = e.mgr.Process.Pid
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15): comm may hold spaces, so split after ')'.
		i := strings.LastIndexByte(string(b), ')')
		open := strings.IndexByte(string(b), '(')
		if i < 0 || open < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		s.procs[pid] = procTicks{role: cpuRole(pid, mgr, string(b[open+1:i])), ticks: ut + st}
	}
	return s
}

func cpuRole(pid, mgr int, comm string) string {
	switch {
	case pid == os.Getpid():
		return "bench"
	case pid == mgr:
		return "manager"
	case comm == "kube-apiserver" || comm == "etcd" || comm == "kube-controller":
		return comm
	case strings.HasPrefix(comm, "machineset") || strings.HasPrefix(comm, "machine-health") || strings.HasPrefix(comm, "nodelink-contr"):
		return "machine-api-operator" // its commands (its Machine controller runs in this process: "bench")
	}
	return "other"
}

// cpuReport says how the CPU time between two snapshots was spent, in CPU-seconds and as a
// share of what the machine's cores offered in that time.
func cpuReport(from, to cpuSnapshot) string {
	wall := to.at.Sub(from.at).Seconds()
	type use struct {
		role string
		sec  float64
	}
	var uses []use
	var total float64
	for role, t := range to.used(from) {
		if d := float64(t) / clockTicks; d > 0.05 {
			uses = append(uses, use{role, d})
			total += d
		}
	}
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(b.sec, a.sec) })
	parts := make([]string, 0, len(uses))
	for _, u := range uses {
		parts = append(parts, fmt.Sprintf("%s %.1f", u.role, u.sec))
	}
	offered := wall * float64(runtime.NumCPU())
	return fmt.Sprintf("CPU-seconds in %.1f s: %s; %.0f%% of the %d cores busy", wall, strings.Join(parts, ", "),
		100*total/offered, runtime.NumCPU())
}

// phase is a measured interval's start: the CPU times and the apiserver's request counts.
type phase struct {
	e    *env
	cpu  cpuSnapshot
	reqs map[string]float64
}

func (e *env) startPhase() phase {
	reqs, _ := e.apiserverRequests()
	return phase{e: e, cpu: e.readCPU(), reqs: reqs}
}

// cpuSeconds is the CPU time role used since p.
func (p phase) cpuSeconds(role string) float64 {
	return float64(p.e.readCPU().used(p.cpu)[role]) / clockTicks
}

// report says what the interval since p cost: CPU-seconds by process, and the apiserver's
// requests per Machine by verb and resource.
func (p phase) report(n int) []string {
	lines := []string{cpuReport(p.cpu, p.e.readCPU())}
	if reqs, err := p.e.apiserverRequests(); err == nil && p.reqs != nil {
		lines = append(lines, requestReport(p.reqs, reqs, n))
	}
	return lines
}
