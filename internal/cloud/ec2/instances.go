package ec2

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/machina-dev/machina/internal/cloud/api"
)

const timeFormat = "2006-01-02T15:04:05.000Z"

var stateCodes = map[api.InstanceState]int{api.StatePending: 0, api.StateRunning: 16, api.StateShuttingDown: 32,
	api.StateTerminated: 48, api.StateStopping: 64, api.StateStopped: 80}

func xStateOf(s api.InstanceState) xState { return xState{Code: stateCodes[s], Name: string(s)} }

// ext returns an instance's EC2 attributes, or what EC2 would show for an instance of the
// region launched through the JSON API (no subnet, no interfaces).
func ext(i api.Instance) api.EC2Attributes {
	if i.EC2 != nil {
		return *i.EC2
	}
	return api.EC2Attributes{ReservationID: "r-" + strings.TrimPrefix(i.InstanceID, "i-"), ClientToken: i.ClientToken,
		Placement: api.EC2Placement{Tenancy: "default"}, PrivateDNS: api.EC2PrivateDNSOptions{HostnameType: "resource-name"},
		Metadata: api.EC2MetadataOptions{HTTPTokens: "optional", HTTPEndpoint: "enabled", HopLimit: 1,
			InstanceMetadataTags: "disabled", HTTPProtocolIPv6: "disabled"}}
}

func (f *Front) xInstanceOf(i api.Instance) xInstance {
	e := ext(i)
	launch := i.LaunchTime.UTC().Format(timeFormat)
	x := xInstance{InstanceID: i.InstanceID, ImageID: i.Image, State: xStateOf(i.State), InstanceType: i.InstanceType,
		KeyName: e.KeyName, AMILaunchIndex: e.LaunchIndex, LaunchTime: launch, Architecture: ec2Arch(i.Architecture),
		Placement: xPlacement{AvailabilityZone: i.Zone, Tenancy: e.Placement.Tenancy, GroupName: e.Placement.GroupName,
			PartitionNumber: e.Placement.PartitionNumber, HostID: e.Placement.HostID, Affinity: e.Placement.Affinity},
		Monitoring: "disabled", SubnetID: e.SubnetID, VPCID: e.VPCID, PrivateIPAddress: i.PrivateIP, SourceDestCheck: true,
		RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm", ClientToken: e.ClientToken,
		Tags: xTags(i.Tags), Hypervisor: "xen", EBSOptimized: e.EBSOptimized, ENASupport: true,
		CapacityReservation: xCapacityReservationSpec{Preference: e.CapacityReservation.Preference, TargetID: e.CapacityReservation.ID},
		MetadataOptions: xMetadataOptions{State: "applied", HTTPTokens: e.Metadata.HTTPTokens, HTTPPutResponseHopLimit: e.Metadata.HopLimit,
			HTTPEndpoint: e.Metadata.HTTPEndpoint, HTTPProtocolIPv6: e.Metadata.HTTPProtocolIPv6, InstanceMetadataTags: e.Metadata.InstanceMetadataTags},
		PrivateDNSNameOptions: xPrivateDNSNameOptions{HostnameType: e.PrivateDNS.HostnameType, EnableARecord: e.PrivateDNS.ARecord,
			EnableAAAARecod: e.PrivateDNS.AAAARecord},
		PlatformDetails: "Linux/UNIX", BootMode: "uefi", Groups: []xGroup{}}
	if i.State != api.StateTerminated {
		x.PrivateDNSName = i.Hostname
	}
	if e.Monitoring {
		x.Monitoring = "enabled"
	}
	if i.StateReason != "" {
		x.StateReason = &xReason{Code: i.StateReason, Message: i.StateReason}
		x.Reason = i.StateReason
	}
	if e.Spot != nil {
		x.InstanceLifecycle, x.SpotInstanceRequestID = "spot", e.Spot.RequestID
	}
	if e.IAMInstanceProfile != "" {
		x.IAMInstanceProfile = &xIAMProfile{ARN: e.IAMInstanceProfile, ID: "AIPA" + strings.ToUpper(strings.TrimPrefix(i.InstanceID, "i-"))}
	}
	t := f.net.types[i.InstanceType]
	x.CPUOptions = xCPUOptions{CoreCount: max(t.VCPU/2, 1), ThreadsPerCore: min(t.VCPU, 2)}
	if e.CPU != nil {
		x.CPUOptions = xCPUOptions{CoreCount: e.CPU.CoreCount, ThreadsPerCore: e.CPU.ThreadsPerCore}
	}
	for _, b := range e.BlockDevices {
		x.BlockDevices = append(x.BlockDevices, xBlockDevice{DeviceName: b.DeviceName, EBS: xEBSDevice{VolumeID: b.VolumeID,
			Status: attachStatus(i.State), AttachTime: launch, DeleteOnTermination: b.DeleteOnTermination}})
	}
	for k, n := range e.NetworkInterfaces {
		xe := f.xInstanceENIOf(i, n, launch)
		x.NetworkInterfaces = append(x.NetworkInterfaces, xe)
		if k == 0 {
			x.Groups, x.SourceDestCheck = xe.Groups, n.SourceDestCheck
			if n.PublicIP && i.State != api.StateTerminated {
				x.PublicIPAddress = publicIPOf(n.ID)
				x.DNSName = "ec2-" + strings.ReplaceAll(x.PublicIPAddress, ".", "-") + ".compute-1.amazonaws.com"
			}
		}
	}
	return x
}

func attachStatus(s api.InstanceState) string {
	if s == api.StateTerminated || s == api.StateShuttingDown {
		return "detaching"
	}
	return "attached"
}

func (f *Front) xInstanceENIOf(i api.Instance, n api.EC2NetworkInterface, launch string) xInstanceENI {
	groups := []xGroup{}
	for _, g := range n.Groups {
		groups = append(groups, xGroup{GroupID: g.ID, GroupName: g.Name})
	}
	dns := api.EC2Hostname(f.net.region, i.InstanceID, n.PrivateIP, "ip-name")
	return xInstanceENI{NetworkInterfaceID: n.ID, SubnetID: n.SubnetID, VPCID: f.net.aws.VPC.ID, Description: n.Description,
		OwnerID: f.net.account, Status: "in-use", MACAddress: macOf(n.ID), PrivateIPAddress: n.PrivateIP, PrivateDNSName: dns,
		SourceDestCheck: n.SourceDestCheck, Groups: groups, InterfaceType: n.InterfaceType,
		Attachment: xAttachment{AttachmentID: "eni-attach-" + strings.TrimPrefix(n.ID, "eni-"), DeviceIndex: n.DeviceIndex,
			NetworkCardIndex: n.NetworkCardIndex, Status: attachStatus(i.State), AttachTime: launch, DeleteOnTermination: true},
		PrivateIPs: []xPrivateIP{{PrivateIPAddress: n.PrivateIP, PrivateDNSName: dns, Primary: true}}}
}

// publicIPOf derives a stable public address (in 54.0.0.0/8) from an interface ID.
func publicIPOf(id string) string {
	h := sha256.Sum256([]byte(id))
	return fmt.Sprintf("54.%d.%d.%d", h[0], h[1], max(h[2], 1))
}

// macOf derives a stable locally administered MAC address from an interface ID.
func macOf(id string) string {
	h := strings.TrimPrefix(id, "eni-") + "0000000000"
	return "02:" + h[0:2] + ":" + h[2:4] + ":" + h[4:6] + ":" + h[6:8] + ":" + h[8:10]
}

// reservation renders instances of one RunInstances.
func (f *Front) reservation(l []api.Instance) xReservation {
	r := xReservation{OwnerID: f.net.account, Groups: []xGroup{}}
	for _, i := range l {
		r.ReservationID = ext(i).ReservationID
		r.Instances = append(r.Instances, f.xInstanceOf(i))
	}
	return r
}

type describeInstancesResult struct {
	head
	Reservations []xReservation `xml:"reservationSet>item"`
	NextToken    string         `xml:"nextToken,omitempty"`
}

var instanceFilters = []string{"instance-id", "instance-state-name", "instance-state-code", "vpc-id", "subnet-id",
	"availability-zone", "instance-type", "image-id", "private-ip-address", "private-dns-name", "reservation-id",
	"client-token", "key-name", "architecture", "instance-lifecycle", "network-interface.network-interface-id",
	"instance.group-id", "instance.group-name", "iam-instance-profile.arn", "placement-group-name", "tenancy"}

func instanceAttr(i api.Instance, name string) []string {
	e := ext(i)
	switch name {
	case "instance-id":
		return []string{i.InstanceID}
	case "instance-state-name":
		return []string{string(i.State)}
	case "instance-state-code":
		return []string{strconv.Itoa(stateCodes[i.State])}
	case "vpc-id":
		return []string{e.VPCID}
	case "subnet-id":
		return []string{e.SubnetID}
	case "availability-zone":
		return []string{i.Zone}
	case "instance-type":
		return []string{i.InstanceType}
	case "image-id":
		return []string{i.Image}
	case "private-ip-address":
		return []string{i.PrivateIP}
	case "private-dns-name":
		return []string{i.Hostname}
	case "reservation-id":
		return []string{e.ReservationID}
	case "client-token":
		return []string{e.ClientToken}
	case "key-name":
		return []string{e.KeyName}
	case "architecture":
		return []string{ec2Arch(i.Architecture)}
	case "instance-lifecycle":
		if e.Spot != nil {
			return []string{"spot"}
		}
	case "network-interface.network-interface-id":
		return mapSlice(e.NetworkInterfaces, func(n api.EC2NetworkInterface) string { return n.ID })
	case "instance.group-id", "instance.group-name":
		var out []string
		for _, n := range e.NetworkInterfaces {
			for _, g := range n.Groups {
				out = append(out, map[bool]string{true: g.ID, false: g.Name}[name == "instance.group-id"])
			}
		}
		return out
	case "iam-instance-profile.arn":
		return []string{e.IAMInstanceProfile}
	case "placement-group-name":
		return []string{e.Placement.GroupName}
	case "tenancy":
		return []string{e.Placement.Tenancy}
	}
	return nil
}

func mapSlice[T any](l []T, fn func(T) string) []string {
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, fn(x))
	}
	return out
}

func (f *Front) describeInstances(c *call) (any, error) {
	ids := c.p.list("InstanceId")
	fs, err := parseFilters(c.p, instanceFilters...)
	if err != nil {
		return nil, err
	}
	maxResults, err := c.p.integer("MaxResults", 0, 5, 1000)
	if err != nil {
		return nil, err
	}
	if maxResults > 0 && len(ids) > 0 {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	next := c.p.str("NextToken")
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.fault(f, ids, nil); err != nil {
		return nil, err
	}
	all := f.instances(ids...)
	if err := notFound(ids, func(id string) bool {
		return slices.ContainsFunc(all, func(i api.Instance) bool { return i.InstanceID == id })
	}, "InvalidInstanceID.NotFound", "instance ID"); err != nil {
		return nil, err
	}
	var sel []api.Instance
	for _, i := range all {
		if (len(ids) == 0 || slices.Contains(ids, i.InstanceID)) && matches(fs, i.Tags, func(n string) []string { return instanceAttr(i, n) }) {
			sel = append(sel, i)
		}
	}
	page, token, err := paginate(sel, next, maxResults)
	if err != nil {
		return nil, err
	}
	out := &describeInstancesResult{Reservations: []xReservation{}, NextToken: token}
	byRes := map[string]int{}
	for _, i := range page {
		rid := ext(i).ReservationID
		k, ok := byRes[rid]
		if !ok {
			k = len(out.Reservations)
			byRes[rid] = k
			out.Reservations = append(out.Reservations, xReservation{ReservationID: rid, OwnerID: f.net.account, Groups: []xGroup{}})
		}
		out.Reservations[k].Instances = append(out.Reservations[k].Instances, f.xInstanceOf(i))
	}
	return out, nil
}

// paginate returns at most maxResults instances after the position in next (the launch
// time and ID of the previous page's last instance: the list is in that order) and the
// token of the following page.
func paginate(l []api.Instance, next string, maxResults int) ([]api.Instance, string, error) {
	if next != "" {
		b, err := base64.RawURLEncoding.DecodeString(next)
		parts := strings.SplitN(string(b), ":", 3)
		var nanos int64
		if err == nil && len(parts) == 3 && parts[0] == "v1" {
			nanos, err = strconv.ParseInt(parts[1], 10, 64)
		}
		if err != nil || len(parts) != 3 || parts[0] != "v1" {
			return nil, "", badParam("NextToken", "the token %q was not issued by this endpoint", next)
		}
		after := time.Unix(0, nanos)
		start := slices.IndexFunc(l, func(i api.Instance) bool {
			return i.LaunchTime.After(after) || i.LaunchTime.Equal(after) && i.InstanceID > parts[2]
		})
		if start < 0 {
			start = len(l)
		}
		l = l[start:]
	}
	if maxResults == 0 || len(l) <= maxResults {
		return l, "", nil
	}
	last := l[maxResults-1]
	tok := fmt.Sprintf("v1:%d:%s", last.LaunchTime.UnixNano(), last.InstanceID)
	return l[:maxResults], base64.RawURLEncoding.EncodeToString([]byte(tok)), nil
}

type stateChangesResult struct {
	head
	Changes []xStateChange `xml:"instancesSet>item"`
}

func xChanges(l []api.InstanceStateChange) *stateChangesResult {
	out := &stateChangesResult{Changes: []xStateChange{}}
	for _, ch := range l {
		out.Changes = append(out.Changes, xStateChange{InstanceID: ch.InstanceID, PreviousState: xStateOf(ch.PreviousState), CurrentState: xStateOf(ch.CurrentState)})
	}
	return out
}

var idFields = map[string]string{"instanceIDs": "InstanceId"}

// stateAction is Terminate/Stop/StartInstances.
func (f *Front) stateAction(c *call, do func([]string) ([]api.InstanceStateChange, error)) (any, error) {
	ids := c.p.list("InstanceId")
	c.p.str("Force")
	c.p.str("Hibernate")
	c.p.str("SkipOsShutdown")
	c.p.str("AdditionalInfo")
	if len(ids) == 0 {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.fault(f, ids, nil); err != nil {
		return nil, err
	}
	if err := f.checkIDs(ids); err != nil {
		return nil, err
	}
	l, err := do(ids)
	if err != nil {
		return nil, ec2Error(err, idFields)
	}
	return xChanges(l), nil
}

// checkIDs fails with InvalidInstanceID.Malformed / NotFound as EC2 does.
func (f *Front) checkIDs(ids []string) error {
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") || len(id) < 10 {
			return errorf(http.StatusBadRequest, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
	}
	all := f.instances(ids...)
	return notFound(ids, func(id string) bool {
		return slices.ContainsFunc(all, func(i api.Instance) bool { return i.InstanceID == id })
	}, "InvalidInstanceID.NotFound", "instance ID")
}

func (f *Front) terminateInstances(c *call) (any, error) {
	return f.stateAction(c, func(ids []string) ([]api.InstanceStateChange, error) { return f.m.TerminateInstances(c.ctx, ids) })
}

func (f *Front) stopInstances(c *call) (any, error) {
	return f.stateAction(c, func(ids []string) ([]api.InstanceStateChange, error) { return f.m.StopInstances(c.ctx, ids) })
}

func (f *Front) startInstances(c *call) (any, error) {
	return f.stateAction(c, func(ids []string) ([]api.InstanceStateChange, error) { return f.m.StartInstances(c.ctx, ids) })
}

type modifyMetadataResult struct {
	head
	InstanceID string           `xml:"instanceId"`
	Options    xMetadataOptions `xml:"instanceMetadataOptions"`
}

func (f *Front) modifyInstanceMetadataOptions(c *call) (any, error) {
	id, err := c.p.required("InstanceId")
	if err != nil {
		return nil, err
	}
	// Parse against a blank set first so that bad values fail before anything changes.
	if err := parseMetadata(c.p, &api.EC2MetadataOptions{}); err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := c.fault(f, []string{id}, nil); err != nil {
		return nil, err
	}
	if err := f.checkIDs([]string{id}); err != nil {
		return nil, err
	}
	var got api.EC2MetadataOptions
	err = f.m.UpdateInstances(c.ctx, []string{id}, func(_ string, _ map[string]string, e *api.EC2Attributes) error {
		if e == nil {
			return errorf(http.StatusBadRequest, "UnsupportedOperation", "instance %s was not launched through EC2 and has no metadata options", id)
		}
		if err := parseMetadata(c.p, &e.Metadata); err != nil {
			return err
		}
		got = e.Metadata
		return nil
	})
	if err != nil {
		return nil, ec2Error(err, idFields)
	}
	return &modifyMetadataResult{InstanceID: id, Options: xMetadataOptions{State: "pending", HTTPTokens: got.HTTPTokens,
		HTTPPutResponseHopLimit: got.HopLimit, HTTPEndpoint: got.HTTPEndpoint, HTTPProtocolIPv6: got.HTTPProtocolIPv6,
		InstanceMetadataTags: got.InstanceMetadataTags}}, nil
}
