package lab

import "time"

// Timings of the lab's control plane, in one place. They are far shorter than a production
// cluster's so that tests observe node failure within seconds. The simulated kubelet must
// renew Node Leases well within NodeMonitorGracePeriod.
const (
	// KubeletHeartbeatInterval is how often the simulated kubelet renews a Node's Lease.
	KubeletHeartbeatInterval = 2 * time.Second
	// NodeMonitorPeriod is how often kube-controller-manager checks Node health.
	NodeMonitorPeriod = 1 * time.Second
	// NodeMonitorGracePeriod is how long a Node may go without a heartbeat before
	// kube-controller-manager marks its Ready condition Unknown.
	NodeMonitorGracePeriod = 10 * time.Second
	// NodeStartupGracePeriod is the same allowance for a Node that never reported Ready.
	NodeStartupGracePeriod = 10 * time.Second
)

// serviceCIDR and serviceIP are the lab's Service network and the kubernetes Service address.
const (
	serviceCIDR = "10.0.0.0/24"
	serviceIP   = "10.0.0.1"
)
