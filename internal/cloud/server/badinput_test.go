package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/machina-dev/machina/internal/cloud/api"
	"github.com/machina-dev/machina/internal/cloud/server"
)

// post sends a raw body and returns the status and decoded error body.
func post(t *testing.T, method, url, body string) (int, api.Error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var e api.Error
	if res.StatusCode >= 400 {
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("%s %s: error body is not JSON: %q", method, url, data)
		}
		if e.Code == "" || e.Message == "" {
			t.Errorf("%s %s: error body lacks code or message: %q", method, url, data)
		}
	}
	return res.StatusCode, e
}

func TestBadInput(t *testing.T) {
	s, _ := start(t, server.Options{MaxUserDataBytes: 1024})
	valid := func(mut func(m map[string]any)) string {
		m := map[string]any{"clientToken": "t-1", "region": "sim-east-1", "zone": "sim-east-1a",
			"instanceType": "s1.large", "image": "sim-rhcos-9"}
		mut(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 1025))
	run := s.URL() + "/v1/RunInstances"
	cases := []struct {
		name, method, url, body string
		status                  int
		code, field             string
	}{
		{"missing token", "POST", run, valid(func(m map[string]any) { delete(m, "clientToken") }), 400, api.CodeMissingParameter, "clientToken"},
		{"long token", "POST", run, valid(func(m map[string]any) { m["clientToken"] = strings.Repeat("t", 65) }), 400, api.CodeInvalidParameterValue, "clientToken"},
		{"missing region", "POST", run, valid(func(m map[string]any) { delete(m, "region") }), 400, api.CodeMissingParameter, "region"},
		{"unknown region", "POST", run, valid(func(m map[string]any) { m["region"] = "mars-1" }), 400, api.CodeInvalidRegion, "region"},
		{"unknown zone", "POST", run, valid(func(m map[string]any) { m["zone"] = "sim-east-1z" }), 400, api.CodeInvalidZone, "zone"},
		{"zone of other region", "POST", run, valid(func(m map[string]any) { m["zone"] = "sim-west-1a" }), 400, api.CodeInvalidZone, "zone"},
		{"unknown type", "POST", run, valid(func(m map[string]any) { m["instanceType"] = "huge" }), 400, api.CodeInvalidInstanceType, "instanceType"},
		{"unknown image", "POST", run, valid(func(m map[string]any) { m["image"] = "windows" }), 400, api.CodeInvalidImage, "image"},
		{"image arch mismatch", "POST", run, valid(func(m map[string]any) { m["image"] = "sim-ubuntu-24.04-arm64" }), 400, api.CodeInvalidImage, "image"},
		{"user data too large", "POST", run, valid(func(m map[string]any) { m["userData"] = big }), 400, api.CodeUserDataTooLarge, "userData"},
		{"user data not base64", "POST", run, valid(func(m map[string]any) { m["userData"] = "%%%" }), 400, api.CodeMalformedRequest, "userData"},
		{"empty tag key", "POST", run, valid(func(m map[string]any) { m["tags"] = map[string]string{"": "x"} }), 400, api.CodeInvalidParameterValue, "tags"},
		{"unknown network", "POST", run, valid(func(m map[string]any) { m["networkID"] = "net-x" }), 404, api.CodeNetworkNotFound, "networkID"},
		{"malformed JSON", "POST", run, `{"clientToken": `, 400, api.CodeMalformedRequest, ""},
		{"not JSON", "POST", run, `hello`, 400, api.CodeMalformedRequest, ""},
		{"trailing data", "POST", run, valid(func(map[string]any) {}) + `{}`, 400, api.CodeMalformedRequest, ""},
		{"wrong type", "POST", run, valid(func(m map[string]any) { m["zone"] = 7 }), 400, api.CodeMalformedRequest, "zone"},
		{"unknown field", "POST", run, valid(func(m map[string]any) { m["instanceTypo"] = "x" }), 400, api.CodeMalformedRequest, "instanceTypo"},
		{"array body", "POST", run, `[]`, 400, api.CodeMalformedRequest, ""},
		{"huge body", "POST", run, `{"clientToken":"` + strings.Repeat("a", 2<<20) + `"}`, 413, api.CodeRequestTooLarge, ""},
		{"bad state filter", "POST", s.URL() + "/v1/DescribeInstances", `{"states":["exploded"]}`, 400, api.CodeInvalidParameterValue, "states"},
		{"terminate nothing", "POST", s.URL() + "/v1/TerminateInstances", `{}`, 400, api.CodeMissingParameter, "instanceIDs"},
		{"GET operation", "GET", run, "", 405, api.CodeMethodNotAllowed, ""},
		{"unknown operation", "POST", s.URL() + "/v1/LaunchRockets", `{}`, 404, api.CodeUnknownOperation, ""},
		{"unknown path", "GET", s.URL() + "/nope", "", 404, api.CodeUnknownOperation, ""},
		{"network bad cidr", "POST", s.URL() + "/v1/CreateNetwork", `{"clientToken":"n","region":"sim-east-1","cidr":"10.0.0.0/30"}`, 400, api.CodeInvalidParameterValue, "cidr"},
		{"network no token", "POST", s.URL() + "/v1/CreateNetwork", `{"region":"sim-east-1"}`, 400, api.CodeMissingParameter, "clientToken"},
		{"group no zones", "POST", s.URL() + "/v1/CreateScalingGroup", `{"name":"g","region":"sim-east-1","launchTemplate":{"instanceType":"s1.large","image":"sim-rhcos-9"}}`, 400, api.CodeMissingParameter, "zones"},
		{"group bad type", "POST", s.URL() + "/v1/CreateScalingGroup", `{"name":"g","region":"sim-east-1","zones":["sim-east-1a"],"launchTemplate":{"instanceType":"x","image":"sim-rhcos-9"}}`, 400, api.CodeInvalidInstanceType, "launchTemplate.instanceType"},
		{"group negative", "POST", s.URL() + "/v1/CreateScalingGroup", `{"name":"g","region":"sim-east-1","zones":["sim-east-1a"],"desiredCapacity":-1,"launchTemplate":{"instanceType":"s1.large","image":"sim-rhcos-9"}}`, 400, api.CodeInvalidParameterValue, "desiredCapacity"},
		{"group unknown", "POST", s.URL() + "/v1/UpdateScalingGroup", `{"scalingGroupID":"sg-x"}`, 404, api.CodeScalingGroupNotFound, "scalingGroupID"},
		{"health value", "POST", s.URL() + "/v1/SetInstanceHealth", `{"instanceID":"i-x","health":"Meh"}`, 400, api.CodeInvalidParameterValue, "health"},
		{"delete faults nothing", "POST", s.URL() + "/v1/DeleteFaults", `{}`, 400, api.CodeMissingParameter, "faultIDs"},
	}
	for _, tc := range cases {
		status, e := post(t, tc.method, tc.url, tc.body)
		if status != tc.status || e.Code != tc.code || e.Field != tc.field {
			t.Errorf("%s: got %d %s field %q (%s), want %d %s field %q", tc.name, status, e.Code, e.Field, e.Message, tc.status, tc.code, tc.field)
		}
		if tc.field != "" && !strings.Contains(e.Message, strings.TrimPrefix(tc.field, "launchTemplate.")) {
			t.Errorf("%s: message %q does not name the field %s", tc.name, e.Message, tc.field)
		}
	}
	// No bad request created anything, and nothing was a 5xx.
	st := s.Stats()
	if st.InstancesCreated != 0 {
		t.Errorf("bad requests created %d instances", st.InstancesCreated)
	}
	if status, _ := post(t, "GET", s.URL()+"/v1/stats", ""); status != 200 {
		t.Errorf("GET /v1/stats = %d", status)
	}
	if status, _ := post(t, "GET", s.URL()+"/healthz", ""); status != 200 {
		t.Errorf("GET /healthz = %d", status)
	}
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestCorruptOrForeignStateFileRefused(t *testing.T) {
	t.Run("garbage", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "cloud.db")
		if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 2000), 0o600); err != nil {
			t.Fatal(err)
		}
		assertRefused(t, dir, path, "not a bbolt database")
	})
	t.Run("foreign bbolt", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "cloud.db")
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Update(func(tx *bolt.Tx) error {
			b, _ := tx.CreateBucket([]byte("someone-elses"))
			return b.Put([]byte("k"), []byte("v"))
		})
		_ = db.Close()
		assertRefused(t, dir, path, "no machina format marker")
	})
	t.Run("future version", func(t *testing.T) {
		dir := t.TempDir()
		s, _ := start(t, server.Options{StateDir: dir})
		s.Close()
		path := filepath.Join(dir, "cloud.db")
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("version"), []byte("99")) })
		_ = db.Close()
		assertRefused(t, dir, path, "version")
	})
	t.Run("truncated", func(t *testing.T) {
		dir := t.TempDir()
		s, c := start(t, server.Options{StateDir: dir})
		mustRun(t, c, runReq(nil))
		s.Close()
		path := filepath.Join(dir, "cloud.db")
		b, _ := os.ReadFile(path)
		// Keep the two meta pages, destroy every other page.
		for i := 2 * 4096; i < len(b); i++ {
			b[i] = 0xff
		}
		_ = os.WriteFile(path, b, 0o600)
		assertRefused(t, dir, path, "")
	})
}

func assertRefused(t *testing.T, dir, path, why string) {
	t.Helper()
	before := fileHash(t, path)
	s, err := server.New(server.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start(t.Context())
	if err == nil {
		s.Close()
		t.Fatalf("a bad state file was accepted")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), why) {
		t.Errorf("error %q should name the file and say %q", err, why)
	}
	if fileHash(t, path) != before {
		t.Errorf("the refused state file was modified")
	}
}

// TestNoServerErrorOnGarbage posts assorted garbage to every operation: each answer must
// be a 2xx or a 4xx with a code, never a 5xx.
func TestNoServerErrorOnGarbage(t *testing.T) {
	s, _ := start(t, server.Options{})
	ops := []string{api.OpRunInstances, api.OpDescribeInstances, api.OpTerminateInstances, api.OpKillInstances,
		api.OpDescribeRegions, api.OpDescribeInstanceTypes, api.OpDescribeImages, api.OpCreateNetwork,
		api.OpDeleteNetwork, api.OpDescribeNetworks, api.OpCreateScalingGroup, api.OpUpdateScalingGroup,
		api.OpDeleteScalingGroup, api.OpDescribeScalingGroups, api.OpTerminateInstanceInScalingGroup,
		api.OpSetInstanceHealth, api.OpCreateFault, api.OpDescribeFaults, api.OpDeleteFaults, api.OpGetStats}
	bodies := []string{``, `null`, `{}`, `[]`, `"x"`, `1e999`, `{"a":`, `{"clientToken":null}`,
		`{"instanceIDs":[""]}`, `{"instanceIDs":"i-1"}`, `{"tags":{"":""}}`, `{"tags":[1]}`,
		`{"desiredCapacity":99999999999999999999}`, `{"scalingGroupID":"","desiredCapacity":-5}`,
		`{"fault":{"kind":"latency","latencyMillis":-1}}`, `{"fault":{"kind":"capacity","zone":"x"}}`,
		`{"userData":"!!"}`, `{"cidr":"::1/64","clientToken":"c","region":"sim-east-1"}`,
		`{"launchTemplate":null,"name":"n","region":"sim-east-1","zones":["sim-east-1a"]}`,
		`{"instanceID":"i-nope","health":"Unhealthy"}`, "\x00\xff\xfe", `{"names":[null]}`}
	for _, op := range ops {
		for _, body := range bodies {
			status, e := post(t, "POST", s.URL()+"/v1/"+op, body)
			if status >= 500 {
				t.Errorf("%s %q: %d %s %s", op, body, status, e.Code, e.Message)
			}
		}
	}
}

func TestStateDirLocked(t *testing.T) {
	dir := t.TempDir()
	start(t, server.Options{StateDir: dir})
	s2, err := server.New(server.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	err = s2.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("second cloud on the same state directory: %v", err)
	}
}
