package awsclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCacheKeysByRegionAndCredential: one build per (region, credential), the shared
// configuration loaded once, the Secret's key pair signing instead of the default, and a
// load failure returned (and retried on the next Get) rather than cached.
func TestCacheKeysByRegionAndCredential(t *testing.T) {
	loads, fail := 0, true
	var built []aws.Config
	c := NewCache(Config{Credentials: aws.AnonymousCredentials{}}, func(cfg aws.Config) int {
		built = append(built, cfg)
		return len(built)
	})
	c.Load = func(context.Context) (aws.Config, error) {
		loads++
		if fail {
			return aws.Config{}, errors.New("no shared config")
		}
		return aws.Config{Region: "ignored"}, nil
	}
	ctx := context.Background()
	if _, err := c.Get(ctx, "us-east-1", nil); err == nil || !strings.Contains(err.Error(), "loading the AWS SDK configuration") {
		t.Fatalf("load failure: got %v", err)
	}
	fail = false
	key := &aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "s"}
	for _, step := range []struct {
		region string
		creds  *aws.Credentials
		want   int
	}{{"us-east-1", nil, 1}, {"us-east-1", nil, 1}, {"eu-west-1", nil, 2}, {"us-east-1", key, 3}, {"us-east-1", &aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "s"}, 3}} {
		got, err := c.Get(ctx, step.region, step.creds)
		if err != nil || got != step.want {
			t.Fatalf("Get(%s, %v) = %d, %v; want %d", step.region, step.creds, got, err, step.want)
		}
	}
	if loads != 2 {
		t.Errorf("shared configuration loaded %d times, want 2 (one failure, one success)", loads)
	}
	if built[0].Region != "us-east-1" || built[1].Region != "eu-west-1" {
		t.Errorf("regions: %q, %q", built[0].Region, built[1].Region)
	}
	if _, ok := built[0].Credentials.(aws.AnonymousCredentials); !ok {
		t.Errorf("default credentials not used: %T", built[0].Credentials)
	}
	v, err := built[2].Credentials.Retrieve(ctx)
	if err != nil || v.AccessKeyID != "AKID" {
		t.Errorf("Secret credentials not used: %+v, %v", v, err)
	}
	if r := built[0].Retryer(); r.MaxAttempts() != DefaultMaxAttempts {
		t.Errorf("MaxAttempts %d, want %d", r.MaxAttempts(), DefaultMaxAttempts)
	}
}

func TestFromSecret(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data: map[string][]byte{SecretAccessKeyID: []byte("AKID")}}
	if _, ok := FromSecret(s); ok {
		t.Fatal("a Secret without the secret key was accepted")
	}
	s.Data[SecretSecretAccessKey] = []byte("shh")
	c, ok := FromSecret(s)
	if !ok || c.AccessKeyID != "AKID" || c.SecretAccessKey != "shh" || c.Source != "Secret ns/creds" {
		t.Fatalf("FromSecret = %+v, %v", c, ok)
	}
}

func TestEndpoint(t *testing.T) {
	if Endpoint("") != nil || *Endpoint("http://x") != "http://x" {
		t.Fatal("Endpoint")
	}
}
