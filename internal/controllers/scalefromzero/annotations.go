// Package scalefromzero is what the platforms' Machine API MachineSet controllers share: the
// scale-from-zero annotations the cluster autoscaler reads (what a Node of the MachineSet
// would offer) and the controller that keeps them in line with the cloud's description of the
// instance type. A platform brings only a Describer: how to recognise and decode its
// providerSpec and how to ask its cloud about an instance type.
package scalefromzero

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/convert"
)

// The annotations the cluster autoscaler's Machine API provider reads on a MachineSet to
// scale it from zero: what a Node created from the MachineSet would offer.
const (
	// CPUAnnotation is the number of vCPUs, an integer.
	CPUAnnotation = convert.MachineAPICPUAnnotation
	// MemoryAnnotation is the memory in MiB, an integer.
	MemoryAnnotation = convert.MachineAPIMemoryAnnotation
	// GPUAnnotation is the number of GPUs, an integer ("0" when there are none).
	GPUAnnotation = convert.MachineAPIGPUAnnotation
	// LabelsAnnotation lists Node labels as comma-separated key=value pairs. The controller
	// owns only its kubernetes.io/arch entry; other entries are the user's and are kept.
	LabelsAnnotation = convert.CapacityLabelsAnnotation
)

// ArchLabel is the Node label the controller adds to LabelsAnnotation.
const ArchLabel = corev1.LabelArchStable // kubernetes.io/arch

// ApplyCapacity sets the scale-from-zero annotations of instance type t in a (which may be
// nil) and returns the result. Entries of LabelsAnnotation other than kubernetes.io/arch are kept
// in their order.
func ApplyCapacity(a map[string]string, t api.InstanceType) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	a[CPUAnnotation] = strconv.Itoa(t.VCPU)
	a[MemoryAnnotation] = strconv.FormatInt(t.MemoryMiB, 10)
	a[GPUAnnotation] = strconv.Itoa(t.GPU)
	arch := t.Architecture
	if arch == "" {
		arch = "amd64"
	}
	a[LabelsAnnotation] = setLabel(a[LabelsAnnotation], ArchLabel, arch)
	return a
}

// RemoveCapacity deletes what ApplyCapacity sets: the three capacity annotations and the
// kubernetes.io/arch entry of LabelsAnnotation (the annotation goes when nothing is left).
func RemoveCapacity(a map[string]string) map[string]string {
	delete(a, CPUAnnotation)
	delete(a, MemoryAnnotation)
	delete(a, GPUAnnotation)
	if v, ok := a[LabelsAnnotation]; ok {
		if rest := removeLabel(v, ArchLabel); rest != "" {
			a[LabelsAnnotation] = rest
		} else {
			delete(a, LabelsAnnotation)
		}
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// entries splits a comma-separated key=value list, dropping empty items.
func entries(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func entryKey(e string) string {
	k, _, _ := strings.Cut(e, "=")
	return strings.TrimSpace(k)
}

// setLabel sets key=value in a comma-separated list: the first entry of that key is replaced
// in place (later duplicates dropped), or the entry is appended.
func setLabel(list, key, value string) string {
	want := key + "=" + value
	var out []string
	found := false
	for _, e := range entries(list) {
		if entryKey(e) != key {
			out = append(out, e)
			continue
		}
		if !found {
			out = append(out, want)
			found = true
		}
	}
	if !found {
		out = append(out, want)
	}
	return strings.Join(out, ",")
}

// removeLabel drops every entry of key from a comma-separated list.
func removeLabel(list, key string) string {
	var out []string
	for _, e := range entries(list) {
		if entryKey(e) != key {
			out = append(out, e)
		}
	}
	return strings.Join(out, ",")
}
