package simmachinetemplate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/machina-dev/machina/internal/cloud/api"
)

func TestCapacity(t *testing.T) {
	cases := []struct {
		name string
		in   api.InstanceType
		want map[corev1.ResourceName]string
	}{
		{"defaults, no GPU", api.InstanceType{VCPU: 4, MemoryMiB: 16384},
			map[corev1.ResourceName]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}},
		{"GPU defaults to nvidia.com/gpu", api.InstanceType{VCPU: 8, MemoryMiB: 61440, GPU: 1},
			map[corev1.ResourceName]string{"cpu": "8", "memory": "60Gi", "pods": "110", "ephemeral-storage": "100Gi", "nvidia.com/gpu": "1"}},
		{"catalogue's GPU resource, pods and disk", api.InstanceType{VCPU: 2, MemoryMiB: 3072, GPU: 2, GPUResource: "amd.com/gpu", MaxPods: 50, EphemeralStorageGiB: 20},
			map[corev1.ResourceName]string{"cpu": "2", "memory": "3Gi", "pods": "50", "ephemeral-storage": "20Gi", "amd.com/gpu": "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Capacity(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				q, ok := got[k]
				if !ok || q.Cmp(resource.MustParse(v)) != 0 {
					t.Errorf("%s = %v, want %s", k, got[k], v)
				}
			}
			// The stored form is canonical, so a status written once compares equal after
			// a round trip through the API server.
			if m := got[corev1.ResourceMemory]; m.String() != tc.want["memory"] {
				t.Errorf("memory serialises as %s, want %s", m.String(), tc.want["memory"])
			}
		})
	}
	if !equalResources(Capacity(api.InstanceType{VCPU: 1, MemoryMiB: 1024}),
		corev1.ResourceList{"cpu": resource.MustParse("1000m"), "memory": resource.MustParse("1Gi"), "pods": resource.MustParse("110"), "ephemeral-storage": resource.MustParse("100Gi")}) {
		t.Error("equalResources compares by value")
	}
}
