package machineset

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// status.versions counts every Machine of the set, those being deleted included, under its
// Node's kubelet version or else its spec.version, lowest version first; a Machine with
// neither is not counted, and a set without versions has none.
func TestUpdateStatusVersions(t *testing.T) {
	ms := &clusterv1.MachineSet{Spec: clusterv1.MachineSetSpec{Replicas: ptr.To[int32](3)}}
	withKubelet := machineAt("a", time.Hour, func(m *clusterv1.Machine) {
		m.Spec.Version = "v1.33.0"
		m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: "v1.32.5"}
	})
	newSpec := machineAt("b", time.Minute, func(m *clusterv1.Machine) { m.Spec.Version = "v1.33.0" })
	deleting := machineAt("c", time.Hour, func(m *clusterv1.Machine) {
		m.Spec.Version = "v1.32.5"
		m.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	})
	noVersion := machineAt("d", time.Hour, nil)
	r := &Reconciler{}
	r.updateStatus(ms, []*clusterv1.Machine{newSpec, withKubelet, deleting, noVersion}, nil)
	want := []clusterv1.StatusVersion{{Version: "v1.32.5", Replicas: 2}, {Version: "v1.33.0", Replicas: 1}}
	if fmt.Sprint(ms.Status.Versions) != fmt.Sprint(want) {
		t.Errorf("versions %v, want %v", ms.Status.Versions, want)
	}
	if *ms.Status.Replicas != 4 {
		t.Errorf("replicas %d, want 4", *ms.Status.Replicas)
	}

	r.updateStatus(ms, []*clusterv1.Machine{noVersion}, nil)
	if ms.Status.Versions != nil {
		t.Errorf("versions %v after the versioned Machines left, want none", ms.Status.Versions)
	}
}
