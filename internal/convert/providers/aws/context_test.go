package aws

import (
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNewContext(t *testing.T) {
	infra := &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	infra.Status.InfrastructureName = "ci-op-7x2kq-abcde"
	if _, err := NewContext(infra); err == nil || !strings.Contains(err.Error(), "no AWS platform status") {
		t.Errorf("non-AWS Infrastructure: %v", err)
	}
	infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.AWSPlatformType, AWS: &configv1.AWSPlatformStatus{Region: "eu-west-3"}}
	c, err := NewContext(infra)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClusterName != "ci-op-7x2kq-abcde" || c.Platform.(Platform).Region != "eu-west-3" || c.Namespaces.ClusterAPI != "openshift-cluster-api" {
		t.Errorf("context %+v", c)
	}
	if _, err := NewContext(nil); err == nil {
		t.Error("nil Infrastructure accepted")
	}
	if _, err := FromAWSCluster(nil); err == nil {
		t.Error("nil AWSCluster accepted")
	}
}

func TestInstanceID(t *testing.T) {
	for pid, want := range map[string]string{
		"aws:///us-east-1a/i-0123":          "i-0123",
		"aws://us-east-1/us-east-1a/i-0123": "i-0123",
		"aws:///us-east-1a/":                "",
		"gce://p/z/i-1":                     "",
		"aws://i-1":                         "",
		"":                                  "",
	} {
		if got := instanceID(pid); got != want {
			t.Errorf("instanceID(%q) = %q, want %q", pid, got, want)
		}
	}
}

func TestZoneRegion(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a":              "us-east-1",
		"us-gov-west-1b":          "us-gov-west-1",
		"ap-northeast-3c":         "ap-northeast-3",
		"us-east-1-nyc-1a":        "us-east-1",
		"us-west-2-lax-1b":        "us-west-2",
		"us-east-1-wl1-bos-wlz-1": "us-east-1",
		"":                        "",
		"sim-east-1a":             "",
		"us-east-1":               "",
	} {
		if got := ZoneRegion(zone); got != want {
			t.Errorf("ZoneRegion(%q) = %q, want %q", zone, got, want)
		}
	}
}
