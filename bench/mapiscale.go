package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

// mapiScale scales a Machine API MachineSet from 0 to n and waits until every Machine is
// Running with a nodeRef.
func mapiScale(n int) (result, error) {
	e, err := startEnv("machineapi")
	if err != nil {
		return result{}, err
	}
	defer e.stop()
	ctx := context.Background()
	ps, _ := json.Marshal(&infrav1.SimMachineProviderSpec{
		TypeMeta: metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "SimMachineProviderSpec"},
		Region:   "sim-east-1", Zone: "sim-east-1a", InstanceType: "s1.small", Image: "sim-rhcos-9"})
	labels := map[string]string{"bench": "mapi-scale"}
	ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default"},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](0), Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: ps}}}}}}
	if err := e.client.Create(ctx, ms); err != nil {
		return result{}, err
	}
	time.Sleep(2 * time.Second) // let the manager settle on the empty MachineSet
	w0, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	k0 := e.kubeletWrite.Load()

	start := time.Now()
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: int32(n)}}
	if err := e.client.SubResource("scale").Update(ctx, ms, client.WithSubResourceBody(scale)); err != nil {
		return result{}, err
	}
	lastReport := time.Now()
	for {
		var list machinev1beta1.MachineList
		if err := e.client.List(ctx, &list, client.InNamespace("default")); err != nil {
			return result{}, err
		}
		done := 0
		for _, m := range list.Items {
			if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil {
				done++
			}
		}
		if done >= n {
			break
		}
		if time.Since(lastReport) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "bench: %d/%d Machines Running after %s\n", done, n, time.Since(start).Round(time.Second))
			lastReport = time.Now()
		}
		if time.Since(start) > 15*time.Minute {
			return result{}, fmt.Errorf("only %d of %d Machines Running after 15 minutes", done, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // writes that follow the last Running (status resync) count too
	w1, err := e.managerWrites()
	if err != nil {
		return result{}, err
	}
	return result{N: n, Seconds: elapsed.Seconds(), ManagerWrites: w1 - w0, KubeletWrites: e.kubeletWrite.Load() - k0,
		ManagerPeakRSSMiB: e.managerPeakRSS()}, nil
}
