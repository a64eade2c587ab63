package api

import (
	"reflect"
	"testing"
)

func TestProviderID(t *testing.T) {
	s := FormatProviderID("sim-east-1", "sim-east-1a", "i-0123456789abcdef0")
	if s != "sim://sim-east-1/sim-east-1a/i-0123456789abcdef0" {
		t.Fatalf("FormatProviderID = %q", s)
	}
	p, err := ParseProviderID(s)
	if err != nil || p != (ProviderID{Region: "sim-east-1", Zone: "sim-east-1a", InstanceID: "i-0123456789abcdef0"}) || p.String() != s {
		t.Fatalf("ParseProviderID(%q) = %+v, %v", s, p, err)
	}
	for _, bad := range []string{"", "sim://", "sim://a/b", "sim://a/b/c/d", "sim:///b/c", "sim://a//c", "aws:///us-east-1a/i-1", "sim:/a/b/c"} {
		if _, err := ParseProviderID(bad); err == nil {
			t.Errorf("ParseProviderID(%q) succeeded", bad)
		}
	}
}

func TestParseFaultSpec(t *testing.T) {
	cases := map[string]Fault{
		"error,op=RunInstances,rate=0.25,count=3,code=503": {Kind: FaultError, Operation: "RunInstances", Rate: 0.25, Count: 3, StatusCode: 503},
		"latency,ms=200": {Kind: FaultLatency, LatencyMillis: 200},
		"throttle,op=DescribeInstances,retry-after=2":      {Kind: FaultThrottle, Operation: "DescribeInstances", RetryAfterSeconds: 2},
		"capacity,zone=sim-east-1a,instance-type=s1.large": {Kind: FaultCapacity, Zone: "sim-east-1a", InstanceType: "s1.large"},
		"node-not-ready,tag=pool=a,tag=env=x,instance=i-1": {Kind: FaultNodeNotReady, Tags: map[string]string{"pool": "a", "env": "x"}, InstanceIDs: []string{"i-1"}},
		"node-condition,instance=i-2,condition=DiskFull,status=True,reason=R,message=M": {Kind: FaultNodeCondition, InstanceIDs: []string{"i-2"},
			ConditionType: "DiskFull", ConditionStatus: "True", Reason: "R", Message: "M"},
	}
	for spec, want := range cases {
		got, err := ParseFaultSpec(spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseFaultSpec(%q) = %+v, %v; want %+v", spec, got, err, want)
		}
	}
	for _, bad := range []string{"", ",op=x", "error,op", "error,rate=lots", "error,count=x", "error,bogus=1", "node-not-ready,tag=novalue"} {
		if _, err := ParseFaultSpec(bad); err == nil {
			t.Errorf("ParseFaultSpec(%q) succeeded", bad)
		}
	}
}

func TestStatusFor(t *testing.T) {
	want := map[string]int{
		CodeMissingParameter: 400, CodeInvalidZone: 400, CodeInstanceNotFound: 404, CodeIdempotentMismatch: 409,
		CodeThrottling: 429, CodeInsufficientCapacity: 503, CodeInternalError: 500, CodeRequestTooLarge: 413,
	}
	for code, status := range want {
		if got := StatusFor(code); got != status {
			t.Errorf("StatusFor(%s) = %d, want %d", code, got, status)
		}
	}
}
