package lab

import (
	"os"
	"regexp"
	"testing"
)

// The CAPA controller the lab builds must be the release whose API types machina compiles
// against: machina's go.mod and the embedded CAPA module pin the same version.
func TestCAPAModulePinsMachinaVersion(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?sigs\.k8s\.io/cluster-api-provider-aws/v2 (v\S+)`)
	for name, mod := range map[string][]byte{"capamod/go.mod.txt": capaGoMod, "../../go.mod": nil} {
		if mod == nil {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			mod = b
		}
		m := re.FindSubmatch(mod)
		if m == nil {
			t.Fatalf("%s does not require %s", name, capaModule)
		}
		if string(m[1]) != CAPAVersion {
			t.Errorf("%s pins %s %s, the lab builds CAPAVersion %s", name, capaModule, m[1], CAPAVersion)
		}
	}
}

func TestCAPAServiceEndpoints(t *testing.T) {
	got := CAPAServiceEndpoints("http://127.0.0.1:9", "us-east-1")
	want := "us-east-1:ec2=http://127.0.0.1:9,sts=http://127.0.0.1:9/sts,elasticloadbalancing=http://127.0.0.1:9/elb," +
		"Elastic Load Balancing v2=http://127.0.0.1:9/elbv2,s3=http://127.0.0.1:9/unserved/s3," +
		"secretsmanager=http://127.0.0.1:9/unserved/secretsmanager,ssm=http://127.0.0.1:9/unserved/ssm," +
		"tagging=http://127.0.0.1:9/unserved/tagging,sqs=http://127.0.0.1:9/unserved/sqs," +
		"events=http://127.0.0.1:9/unserved/events,eks=http://127.0.0.1:9/unserved/eks"
	if got != want {
		t.Errorf("CAPAServiceEndpoints = %q, want %q", got, want)
	}
}
