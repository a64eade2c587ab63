package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/machina-dev/machina/internal/cloud/ec2"
)

// capiScale scales a Cluster API MachineSet from 0 to n and waits until every Machine is
// Running with a nodeRef. The Cluster (with its SimCluster and the kubeconfig Secret that
// points at the lab itself) is provisioned first. With MACHINA_DEBUG_WRITES=1 the manager
// logs every write, and the row ends with the writes per Machine by resource.
func capiScale(n int) (result, error) {
	p, err := capiPlatformFor(platform)
	if err != nil {
		return result{}, err
	}
	e, err := startEnvWith(envOptions{groups: capiScaleGroups(p.groups), ec2: p.ec2})
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	report, extraWrites, stopExtra, err := extraControllers(e)
	defer stopExtra()
	if err != nil {
		return result{}, err
	}
	ctx := context.Background()
	ms, err := p.seed(ctx, e)
	if err != nil {
		return result{}, err
	}
	if err := e.client.Create(ctx, ms); err != nil {
		return result{}, err
	}
	ns, name := ms.Namespace, ms.Spec.ClusterName
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		cl := &clusterv1.Cluster{}
		if err := e.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
			return result{}, err
		}
		if ptr.Deref(cl.Status.Initialization.InfrastructureProvisioned, false) {
			break
		}
		if time.Now().After(deadline) {
			return result{}, fmt.Errorf("the Cluster's infrastructure was not provisioned within a minute")
		}
	}
	time.Sleep(2 * time.Second) // let the manager settle on the empty MachineSet
	w0, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	k0 := e.kubeletWrite.Load()
	logStart := logSize(e)
	q0, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}

	c0 := p.calls(e)
	ph := e.startPhase()
	x0 := extraWrites()
	start := time.Now()
	rate := sampleRate(func() int64 { return ec2.TotalCalls(p.calls(e)) })
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: int32(n)}}
	if err := e.client.SubResource("scale").Update(ctx, ms, client.WithSubResourceBody(scale)); err != nil {
		return result{}, err
	}
	err = waitFor(fmt.Sprintf("%d Machines Running", n), scaleLimit(n), func() (int, error) {
		var list clusterv1.MachineList
		if err := e.watched.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		done := 0
		for _, m := range list.Items {
			if m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef.IsDefined() {
				done++
			}
		}
		return n - done, nil
	})
	if err != nil {
		return result{}, err
	}
	elapsed, cpu, apiCPU := time.Since(start), ph.report(n), ph.cpuSeconds("kube-apiserver")
	mean, peak := rate()
	if peak > 0 {
		cpu = append(cpu, fmt.Sprintf("%s per second: mean %.1f, peak %d (busiest second)", strings.TrimSuffix(p.callsLabel, "/M"), mean, peak))
	}
	time.Sleep(2 * time.Second) // writes that follow the last Running (status settling) count too
	w1, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	q1, err := e.queueSnapshot()
	if err != nil {
		return result{}, err
	}
	return result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: w1 - w0, KubeletWrites: e.kubeletWrite.Load() - k0,
		OtherWrites: extraWrites() - x0, APIServerCPU: apiCPU,
		ManagerPeakRSSMiB: e.managerPeakRSS(), Lines: cpu,
		Extra: report(n) + callsPerMachine(p.callsLabel, c0, p.calls(e), n) + writeBreakdown(e, logStart, n) + queueReport(q0, q1)}, nil
}

func logSize(e *env) int64 {
	fi, err := os.Stat(filepath.Join(e.dir, "manager.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// writeBreakdown groups the manager's logged writes (MACHINA_DEBUG_WRITES=1) after offset by
// method and resource, per Machine.
func writeBreakdown(e *env, offset int64, n int) string {
	if os.Getenv("MACHINA_DEBUG_WRITES") == "" {
		return ""
	}
	f, err := os.Open(filepath.Join(e.dir, "manager.log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return ""
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 || fields[0] != "WRITE" {
			continue
		}
		counts[fields[1]+" "+resourceOf(fields[2])+" "+fields[3]]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.2f", k, float64(counts[k])/float64(n)))
	}
	return "\n    writes/Machine by request: " + strings.Join(parts, ", ")
}

// resourceOf reduces a request path to its resource and subresource
// (".../namespaces/default/simmachines/bench-x/status" → "simmachines/status").
func resourceOf(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range seg {
		if s == "namespaces" && i+2 < len(seg) {
			seg = seg[i+2:]
			break
		}
		if (s == "v1" || strings.HasPrefix(s, "v1") || strings.HasPrefix(s, "v2")) && i+1 < len(seg) && seg[i+1] != "namespaces" {
			seg = seg[i+1:]
			break
		}
	}
	if len(seg) == 0 {
		return path
	}
	out := seg[0]
	if len(seg) >= 3 {
		out += "/" + seg[2]
	}
	return out
}
