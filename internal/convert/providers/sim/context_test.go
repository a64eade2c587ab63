package sim

import (
	"testing"

	simv1 "github.com/machina-dev/machina/api/infrastructure/v1alpha1"
)

func TestNewContext(t *testing.T) {
	if _, err := NewContext("", &simv1.SimCluster{}); err == nil {
		t.Error("empty cluster name accepted")
	}
	if _, err := NewContext("lab", &simv1.SimCluster{}); err == nil {
		t.Error("SimCluster without region accepted")
	}
	if _, err := NewContext("lab", nil); err == nil {
		t.Error("nil SimCluster accepted")
	}
	sc := &simv1.SimCluster{Spec: simv1.SimClusterSpec{Region: "sim-east-1"}}
	c, err := NewContext("lab", sc)
	if err != nil || c.ClusterName != "lab" || c.Platform.(Platform).Region != "sim-east-1" {
		t.Errorf("context %+v, %v", c, err)
	}
}
