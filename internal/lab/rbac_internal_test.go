package lab

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestForbiddenMessageFromJSONAndProtobuf(t *testing.T) {
	const msg = `leases.coordination.k8s.io is forbidden: User "` + ManagerUser + `" cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope`
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: msg, Reason: metav1.StatusReasonForbidden, Code: 403}
	pb, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Status"}, Raw: pb,
		ContentType: "application/vnd.kubernetes.protobuf"}
	wrapped, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"json":     []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":` + quote(msg) + `,"reason":"Forbidden","code":403}`),
		"protobuf": append([]byte("k8s\x00"), wrapped...),
	} {
		if got := forbiddenMessage(body); got != msg {
			t.Errorf("%s: %q", name, got)
		}
	}
	if got := forbiddenMessage([]byte(`{"kind":"Status","message":"denied by policy"}`)); got != "denied by policy" {
		t.Errorf("policy message %q", got)
	}
}

func quote(s string) string {
	out := []byte{'"'}
	for _, c := range []byte(s) {
		if c == '"' {
			out = append(out, '\\')
		}
		out = append(out, c)
	}
	return string(append(out, '"'))
}
