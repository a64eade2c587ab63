package api

import (
	"fmt"
	"strconv"
	"strings"
)

// FaultSpecHelp documents the compact fault syntax of ParseFaultSpec (machina cloud --fault).
const FaultSpecHelp = `A fault is KIND[,KEY=VALUE...]. Kinds and their keys:
  error           op=OPERATION rate=0..1 count=N code=500|503
  latency         op=OPERATION ms=MILLISECONDS rate=0..1 count=N
  throttle        op=OPERATION retry-after=SECONDS rate=0..1 count=N
  capacity        zone=ZONE instance-type=TYPE
  node-not-ready  (needs instance= or tag=)
  node-condition  condition=TYPE status=True|False|Unknown reason=R message=M
Every kind takes a scope: instance=ID and tag=KEY=VALUE (both repeatable).
Without op= a fault applies to every operation.`

// ParseFaultSpec parses the compact fault syntax described by FaultSpecHelp, e.g.
// "throttle,op=DescribeInstances,retry-after=2" or "node-not-ready,tag=pool=a". The server
// validates the result further.
func ParseFaultSpec(spec string) (Fault, error) {
	parts := strings.Split(spec, ",")
	f := Fault{Kind: FaultKind(strings.TrimSpace(parts[0]))}
	if f.Kind == "" {
		return Fault{}, fmt.Errorf("fault %q: the kind comes first (error, latency, throttle, capacity, node-not-ready, node-condition)", spec)
	}
	atoi := func(k, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("fault %q: %s must be an integer, got %q", spec, k, v)
		}
		return n, nil
	}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return Fault{}, fmt.Errorf("fault %q: %q is not KEY=VALUE", spec, kv)
		}
		var err error
		switch k {
		case "op":
			f.Operation = v
		case "rate":
			f.Rate, err = strconv.ParseFloat(v, 64)
			if err != nil {
				return Fault{}, fmt.Errorf("fault %q: rate must be a number between 0 and 1, got %q", spec, v)
			}
		case "count":
			f.Count, err = atoi(k, v)
		case "code":
			f.StatusCode, err = atoi(k, v)
		case "ms":
			f.LatencyMillis, err = atoi(k, v)
		case "retry-after":
			f.RetryAfterSeconds, err = atoi(k, v)
		case "zone":
			f.Zone = v
		case "instance-type":
			f.InstanceType = v
		case "instance":
			f.InstanceIDs = append(f.InstanceIDs, v)
		case "tag":
			tk, tv, ok := strings.Cut(v, "=")
			if !ok || tk == "" {
				return Fault{}, fmt.Errorf("fault %q: tag must be tag=KEY=VALUE, got %q", spec, v)
			}
			if f.Tags == nil {
				f.Tags = map[string]string{}
			}
			f.Tags[tk] = tv
		case "condition":
			f.ConditionType = v
		case "status":
			f.ConditionStatus = v
		case "reason":
			f.Reason = v
		case "message":
			f.Message = v
		default:
			return Fault{}, fmt.Errorf("fault %q: unknown key %q", spec, k)
		}
		if err != nil {
			return Fault{}, err
		}
	}
	return f, nil
}
