package aws

import (
	"regexp"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	capav1 "sigs.k8s.io/cluster-api-provider-aws/v2/api/v1beta2"
)

// What the cluster says about every Machine on it, beyond its region: whether it is
// dual-stack (Infrastructure) and which load balancers front its control plane (AWSCluster).

// LoadBalancer is a control-plane load balancer in the Machine API's terms.
type LoadBalancer struct {
	Name string
	Type mapiv1.AWSLoadBalancerType
}

// String renders the load balancer as "name (type)".
func (lb LoadBalancer) String() string { return lb.Name + " (" + string(lb.Type) + ")" }

// LoadBalancers are the control-plane load balancers of an AWSCluster, in CAPA's order
// (spec.controlPlaneLoadBalancer, then spec.secondaryControlPlaneLoadBalancer). Problems
// lists those the Machine API cannot name (no name yet, or a type it has no word for).
type LoadBalancers struct {
	List     []LoadBalancer
	Problems []string
}

// String lists the load balancers, "none" when there are none.
func (l LoadBalancers) String() string {
	if len(l.List) == 0 {
		return "none"
	}
	names := make([]string, len(l.List))
	for i, lb := range l.List {
		names[i] = lb.String()
	}
	return strings.Join(names, ", ")
}

// ControlPlaneLoadBalancers returns the load balancers an AWSCluster registers its
// control-plane Machines with. A load balancer whose spec has no name is named from status.
func ControlPlaneLoadBalancers(c *capav1.AWSCluster) *LoadBalancers {
	if c == nil {
		return nil
	}
	out := &LoadBalancers{}
	primary := c.Spec.ControlPlaneLoadBalancer
	if primary == nil {
		primary = &capav1.AWSLoadBalancerSpec{} // CAPA's default: a classic ELB it names itself
	}
	out.add("spec.controlPlaneLoadBalancer", primary, capav1.LoadBalancerTypeClassic, c.Status.Network.APIServerELB.Name)
	if s := c.Spec.SecondaryControlPlaneLoadBalancer; s != nil {
		out.add("spec.secondaryControlPlaneLoadBalancer", s, capav1.LoadBalancerTypeNLB, c.Status.Network.SecondaryAPIServerELB.Name)
	}
	return out
}

func (l *LoadBalancers) add(path string, spec *capav1.AWSLoadBalancerSpec, defaultType capav1.LoadBalancerType, statusName string) {
	t := spec.LoadBalancerType
	if t == "" {
		t = defaultType
	}
	var mt mapiv1.AWSLoadBalancerType
	switch t {
	case capav1.LoadBalancerTypeDisabled:
		return
	case capav1.LoadBalancerTypeClassic, capav1.LoadBalancerTypeELB:
		mt = mapiv1.ClassicLoadBalancerType
	case capav1.LoadBalancerTypeNLB:
		mt = mapiv1.NetworkLoadBalancerType
	default:
		l.Problems = append(l.Problems, path+" is of type "+string(t)+", which the Machine API cannot register instances with")
		return
	}
	name := ptr.Deref(spec.Name, statusName)
	if name == "" {
		l.Problems = append(l.Problems, path+" has no name yet (neither in spec nor in status)")
		return
	}
	l.List = append(l.List, LoadBalancer{Name: name, Type: mt})
}

// sameSet reports whether the Machine's load balancers are the AWSCluster's, in any order.
func (l *LoadBalancers) sameSet(in []LoadBalancer) bool {
	if len(l.Problems) > 0 || len(in) != len(l.List) {
		return false
	}
	for _, lb := range in {
		if !slices.Contains(l.List, lb) {
			return false
		}
	}
	for _, lb := range l.List {
		if !slices.Contains(in, lb) {
			return false
		}
	}
	return true
}

// isDualStack reports whether an Infrastructure's ipFamily makes the cluster dual-stack.
func isDualStack(f configv1.IPFamilyType) bool {
	return f == configv1.DualStackIPv4Primary || f == configv1.DualStackIPv6Primary
}

// dualStackDNS is the private DNS name OpenShift's AWS actuator gives instances of a
// dual-stack cluster: the hostname is the instance's resource name, answered with A and AAAA
// records.
func dualStackDNS() *capav1.PrivateDNSName {
	return &capav1.PrivateDNSName{
		EnableResourceNameDNSAAAARecord: ptr.To(true),
		EnableResourceNameDNSARecord:    ptr.To(true),
		HostnameType:                    ptr.To("resource-name"),
	}
}

// zoneRegion matches the region at the start of an availability zone, Local Zone or
// Wavelength Zone name: us-east-1a, us-west-2-lax-1a, us-gov-west-1b, us-east-1-wl1-bos-wlz-1.
var zoneRegion = regexp.MustCompile(`^([a-z]{2}(?:-[a-z]+)+-[0-9]+)(?:[a-z]|-[a-z0-9-]+)$`)

// ZoneRegion returns the region an AWS zone name lies in, "" when the name does not look
// like one.
func ZoneRegion(zone string) string {
	m := zoneRegion.FindStringSubmatch(zone)
	if m == nil {
		return ""
	}
	return m[1]
}
