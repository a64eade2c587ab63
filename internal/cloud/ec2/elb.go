package ec2

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// Load balancers are the catalogue's (aws.loadBalancers, aws.targetGroups); registrations
// are stored with the instances (EC2 attributes LoadBalancers and TargetGroups), so they
// survive restarts and disappear with the instance.

func (f *Front) lbARN(kind, name string) string {
	sum := sha256.Sum256([]byte(kind + "/" + name))
	path := map[string]string{"loadbalancer": "loadbalancer/net/", "targetgroup": "targetgroup/"}[kind]
	return fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:%s%s/%s", f.net.region, f.net.account, path, name, hex.EncodeToString(sum[:8]))
}

func (f *Front) lbs(typ string) []api.AWSLoadBalancer {
	var out []api.AWSLoadBalancer
	for _, lb := range f.net.aws.LoadBalancers {
		if lb.Type == typ {
			out = append(out, lb)
		}
	}
	return out
}

func (f *Front) lbSubnets(public bool) []api.AWSSubnet {
	var out []api.AWSSubnet
	for _, s := range f.net.aws.Subnets {
		if s.Public == public {
			out = append(out, s)
		}
	}
	return out
}

type xClassicLB struct {
	Name              string   `xml:"LoadBalancerName"`
	DNSName           string   `xml:"DNSName"`
	Scheme            string   `xml:"Scheme"`
	VPCID             string   `xml:"VPCId"`
	Subnets           []string `xml:"Subnets>member"`
	AvailabilityZones []string `xml:"AvailabilityZones>member"`
	Instances         []xLBIns `xml:"Instances>member"`
	CreatedTime       string   `xml:"CreatedTime"`
}

type xLBIns struct {
	InstanceID string `xml:"InstanceId"`
}

type describeClassicLBsResult struct {
	LBs []xClassicLB `xml:"LoadBalancerDescriptions>member"`
}

// registered lists the visible instances registered with the classic LB or target group.
func (f *Front) registered(classic bool, name string) []api.Instance {
	var out []api.Instance
	for _, i := range f.instances() {
		if i.EC2 == nil {
			continue
		}
		l := i.EC2.TargetGroups
		if classic {
			l = i.EC2.LoadBalancers
		}
		if slices.Contains(l, name) {
			out = append(out, i)
		}
	}
	return out
}

func (f *Front) describeClassicLBs(c *call) (any, error) {
	names := c.p.list("LoadBalancerNames.member")
	page, err := c.p.onePage("Marker", "PageSize", 1, 400)
	if err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	lbs := f.lbs("classic")
	exists := func(n string) bool {
		return slices.ContainsFunc(lbs, func(lb api.AWSLoadBalancer) bool { return lb.Name == n })
	}
	if err := notFound(names, exists, "LoadBalancerNotFound", "load balancer"); err != nil {
		return nil, err
	}
	if err := c.fault(f, nil, nil); err != nil {
		return nil, err
	}
	out := &describeClassicLBsResult{LBs: []xClassicLB{}}
	for _, lb := range lbs {
		if len(names) > 0 && !slices.Contains(names, lb.Name) {
			continue
		}
		x := xClassicLB{Name: lb.Name, Scheme: lb.Scheme, VPCID: f.net.aws.VPC.ID, CreatedTime: "2026-01-01T00:00:00.000Z",
			DNSName: fmt.Sprintf("%s-%s.%s.elb.amazonaws.com", lb.Name, f.net.account, f.net.region), Instances: []xLBIns{}}
		for _, s := range f.lbSubnets(lb.Scheme != "internal") {
			x.Subnets, x.AvailabilityZones = append(x.Subnets, s.ID), append(x.AvailabilityZones, s.Zone)
		}
		for _, i := range f.registered(true, lb.Name) {
			x.Instances = append(x.Instances, xLBIns{InstanceID: i.InstanceID})
		}
		out.LBs = append(out.LBs, x)
	}
	return out, page.fits(len(out.LBs))
}

type registerClassicResult struct {
	Instances []xLBIns `xml:"Instances>member"`
}

func (f *Front) registerClassic(c *call, register bool) (any, error) {
	name, err := c.p.required("LoadBalancerName")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range c.p.members("Instances.member") {
		id, err := m.required("InstanceId")
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter Instances.member.1.InstanceId")
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(f.lbs("classic"), func(lb api.AWSLoadBalancer) bool { return lb.Name == name }) {
		return nil, errorf(http.StatusBadRequest, "LoadBalancerNotFound", "LoadBalancerName: There is no ACTIVE Load Balancer named '%s'", name)
	}
	if err := f.setRegistration(c, ids, true, name, register, "InvalidInstance"); err != nil {
		return nil, err
	}
	out := &registerClassicResult{Instances: []xLBIns{}}
	for _, i := range f.registered(true, name) {
		out.Instances = append(out.Instances, xLBIns{InstanceID: i.InstanceID})
	}
	return out, nil
}

// setRegistration adds name to (or removes it from) the instances' registrations.
func (f *Front) setRegistration(c *call, ids []string, classic bool, name string, register bool, badCode string) error {
	if err := c.fault(f, ids, nil); err != nil {
		return err
	}
	all := f.instances(ids...)
	for _, id := range ids {
		i := slices.IndexFunc(all, func(x api.Instance) bool { return x.InstanceID == id })
		if i < 0 || all[i].EC2 == nil || register && !all[i].State.Alive() {
			return errorf(http.StatusBadRequest, badCode, "The instance %s is not in a state to be (de)registered, is not an EC2 instance of this region, or does not exist", id)
		}
	}
	err := f.m.UpdateInstances(c.ctx, ids, func(_ string, _ map[string]string, e *api.EC2Attributes) error {
		l := &e.TargetGroups
		if classic {
			l = &e.LoadBalancers
		}
		*l = slices.DeleteFunc(*l, func(s string) bool { return s == name })
		if register {
			*l = append(*l, name)
		}
		return nil
	})
	if err != nil {
		return ec2Error(err, nil)
	}
	return nil
}

type xNLB struct {
	ARN               string       `xml:"LoadBalancerArn"`
	DNSName           string       `xml:"DNSName"`
	Name              string       `xml:"LoadBalancerName"`
	Scheme            string       `xml:"Scheme"`
	VPCID             string       `xml:"VpcId"`
	State             string       `xml:"State>Code"`
	Type              string       `xml:"Type"`
	IPAddressType     string       `xml:"IpAddressType"`
	CreatedTime       string       `xml:"CreatedTime"`
	AvailabilityZones []xNLBZoneEl `xml:"AvailabilityZones>member"`
}

type xNLBZoneEl struct {
	ZoneName string `xml:"ZoneName"`
	SubnetID string `xml:"SubnetId"`
}

type describeNLBsResult struct {
	LBs []xNLB `xml:"LoadBalancers>member"`
}

func (f *Front) describeNLBs(c *call) (any, error) {
	arns, names := c.p.list("LoadBalancerArns.member"), c.p.list("Names.member")
	page, err := c.p.onePage("Marker", "PageSize", 1, 400)
	if err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	arnOf := func(lb api.AWSLoadBalancer) string { return f.lbARN("loadbalancer", lb.Name) }
	lbs, err := pickNamed(f.lbs("network"), arns, names, arnOf, func(lb api.AWSLoadBalancer) string { return lb.Name },
		"LoadBalancerNotFound", "load balancer")
	if err != nil {
		return nil, err
	}
	if err := c.fault(f, nil, nil); err != nil {
		return nil, err
	}
	out := &describeNLBsResult{LBs: []xNLB{}}
	for _, lb := range lbs {
		x := xNLB{ARN: arnOf(lb), Name: lb.Name, Scheme: lb.Scheme, VPCID: f.net.aws.VPC.ID, State: "active", Type: "network",
			IPAddressType: "ipv4", CreatedTime: "2026-01-01T00:00:00.000Z",
			DNSName: fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", lb.Name, f.net.account[:8], f.net.region)}
		for _, s := range f.lbSubnets(lb.Scheme != "internal") {
			x.AvailabilityZones = append(x.AvailabilityZones, xNLBZoneEl{ZoneName: s.Zone, SubnetID: s.ID})
		}
		out.LBs = append(out.LBs, x)
	}
	return out, page.fits(len(out.LBs))
}

type xTargetGroup struct {
	ARN       string   `xml:"TargetGroupArn"`
	Name      string   `xml:"TargetGroupName"`
	Protocol  string   `xml:"Protocol"`
	Port      int      `xml:"Port"`
	VPCID     string   `xml:"VpcId"`
	Type      string   `xml:"TargetType"`
	LBARNs    []string `xml:"LoadBalancerArns>member"`
	HCProto   string   `xml:"HealthCheckProtocol"`
	HCPort    string   `xml:"HealthCheckPort"`
	HCEnabled bool     `xml:"HealthCheckEnabled"`
}

type describeTargetGroupsResult struct {
	Groups []xTargetGroup `xml:"TargetGroups>member"`
}

func (f *Front) describeTargetGroups(c *call) (any, error) {
	arns, names := c.p.list("TargetGroupArns.member"), c.p.list("Names.member")
	lbARN := c.p.str("LoadBalancerArn")
	page, err := c.p.onePage("Marker", "PageSize", 1, 400)
	if err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	arnOf := func(tg api.AWSTargetGroup) string { return f.lbARN("targetgroup", tg.Name) }
	tgs, err := pickNamed(f.net.aws.TargetGroups, arns, names, arnOf, func(tg api.AWSTargetGroup) string { return tg.Name },
		"TargetGroupNotFound", "target group")
	if err != nil {
		return nil, err
	}
	if err := c.fault(f, nil, nil); err != nil {
		return nil, err
	}
	out := &describeTargetGroupsResult{Groups: []xTargetGroup{}}
	for _, tg := range tgs {
		lb := f.lbARN("loadbalancer", tg.LoadBalancer)
		if lbARN != "" && lbARN != lb {
			continue
		}
		out.Groups = append(out.Groups, xTargetGroup{ARN: arnOf(tg), Name: tg.Name, Protocol: "TCP", Port: tg.Port,
			VPCID: f.net.aws.VPC.ID, Type: "instance", LBARNs: []string{lb}, HCProto: "TCP", HCPort: "traffic-port", HCEnabled: true})
	}
	return out, page.fits(len(out.Groups))
}

// targetGroupOf resolves a TargetGroupArn parameter.
func (f *Front) targetGroupOf(c *call) (api.AWSTargetGroup, error) {
	arn, err := c.p.required("TargetGroupArn")
	if err != nil {
		return api.AWSTargetGroup{}, err
	}
	for _, tg := range f.net.aws.TargetGroups {
		if f.lbARN("targetgroup", tg.Name) == arn {
			return tg, nil
		}
	}
	return api.AWSTargetGroup{}, errorf(http.StatusBadRequest, "TargetGroupNotFound", "TargetGroupArn: One or more target groups not found (%s)", arn)
}

type xTargetHealth struct {
	ID          string `xml:"Target>Id"`
	Port        int    `xml:"Target>Port"`
	HCPort      string `xml:"HealthCheckPort"`
	State       string `xml:"TargetHealth>State"`
	Reason      string `xml:"TargetHealth>Reason,omitempty"`
	Description string `xml:"TargetHealth>Description,omitempty"`
}

type describeTargetHealthResult struct {
	Targets []xTargetHealth `xml:"TargetHealthDescriptions>member"`
}

func (f *Front) describeTargetHealth(c *call) (any, error) {
	tg, err := f.targetGroupOf(c)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range c.p.members("Targets.member") {
		id, err := m.required("Id")
		if err != nil {
			return nil, err
		}
		m.str("Port")
		m.str("AvailabilityZone")
		ids = append(ids, id)
	}
	c.p.list("Include.member")
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.fault(f, ids, nil); err != nil {
		return nil, err
	}
	out := &describeTargetHealthResult{Targets: []xTargetHealth{}}
	for _, i := range f.registered(false, tg.Name) {
		if len(ids) > 0 && !slices.Contains(ids, i.InstanceID) {
			continue
		}
		x := xTargetHealth{ID: i.InstanceID, Port: tg.Port, HCPort: fmt.Sprint(tg.Port), State: "healthy"}
		switch i.State {
		case api.StatePending:
			x.State, x.Reason, x.Description = "initial", "Elb.RegistrationInProgress", "Target registration is in progress"
		case api.StateRunning:
		case api.StateShuttingDown:
			x.State, x.Reason, x.Description = "draining", "Target.DeregistrationInProgress", "Target deregistration is in progress"
		default:
			x.State, x.Reason, x.Description = "unused", "Target.InvalidState", "Target is in the stopped or terminated state"
		}
		out.Targets = append(out.Targets, x)
	}
	return out, nil
}

type emptyResult struct{}

func (f *Front) registerTargets(c *call, register bool) (any, error) {
	tg, err := f.targetGroupOf(c)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range c.p.members("Targets.member") {
		id, err := m.required("Id")
		if err != nil {
			return nil, err
		}
		if _, err := m.integer("Port", tg.Port, 1, 65535); err != nil {
			return nil, err
		}
		m.str("AvailabilityZone")
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errorf(http.StatusBadRequest, "ValidationError", "Targets: at least one target is required")
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := f.setRegistration(c, ids, false, tg.Name, register, "InvalidTarget"); err != nil {
		return nil, err
	}
	return &emptyResult{}, nil
}

// pickNamed returns the items that arns and names select (every item when both are empty), or
// the not-found error (code, what) for the first ARN or name no item has.
func pickNamed[T any](items []T, arns, names []string, arnOf, nameOf func(T) string, code, what string) ([]T, error) {
	has := func(key func(T) string) func(string) bool {
		return func(v string) bool { return slices.ContainsFunc(items, func(it T) bool { return key(it) == v }) }
	}
	if err := notFound(arns, has(arnOf), code, what); err != nil {
		return nil, err
	}
	if err := notFound(names, has(nameOf), code, what); err != nil {
		return nil, err
	}
	var out []T
	for _, it := range items {
		if len(arns) > 0 && !slices.Contains(arns, arnOf(it)) || len(names) > 0 && !slices.Contains(names, nameOf(it)) {
			continue
		}
		out = append(out, it)
	}
	return out, nil
}
