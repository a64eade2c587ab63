package ec2

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// owner finds the instance that owns a resource ID: the instance itself, one of its
// volumes or one of its network interfaces.
func owner(all []api.Instance, id string) (api.Instance, bool) {
	for _, i := range all {
		if i.InstanceID == id {
			return i, true
		}
		e := ext(i)
		if slices.ContainsFunc(e.BlockDevices, func(b api.EC2BlockDevice) bool { return b.VolumeID == id }) ||
			slices.ContainsFunc(e.NetworkInterfaces, func(n api.EC2NetworkInterface) bool { return n.ID == id }) {
			return i, true
		}
	}
	return api.Instance{}, false
}

// resolveResources maps resource IDs to their owning instances.
func (f *Front) resolveResources(ids []string) ([]string, error) {
	all := f.instances()
	var owners []string
	for k, id := range ids {
		param := fmt.Sprintf("ResourceId.%d", k+1)
		prefix, _, _ := strings.Cut(id, "-")
		switch prefix {
		case "i", "vol", "eni":
		case "vpc", "subnet", "sg", "ami":
			return nil, badParam(param, "%s is part of the simulated cloud's fixed network; its tags come from the catalogue (aws section)", id)
		default:
			return nil, errorf(http.StatusBadRequest, "InvalidID", "%s: The ID '%s' is not valid", param, id)
		}
		i, ok := owner(all, id)
		if !ok {
			code := map[string]string{"i": "InvalidInstanceID.NotFound", "vol": "InvalidVolume.NotFound", "eni": "InvalidNetworkInterfaceID.NotFound"}[prefix]
			return nil, errorf(http.StatusBadRequest, code, "%s: The ID '%s' does not exist", param, id)
		}
		if (prefix != "i") && i.EC2 == nil {
			return nil, errorf(http.StatusBadRequest, "InvalidID", "%s: The ID '%s' is not valid", param, id)
		}
		owners = append(owners, i.InstanceID)
	}
	return owners, nil
}

// tagsOf returns the tag map a resource ID of instance (tags, e) stands for.
func tagsOf(id string, tags map[string]string, e *api.EC2Attributes) map[string]string {
	if e == nil || strings.HasPrefix(id, "i-") {
		return tags
	}
	for k := range e.BlockDevices {
		if e.BlockDevices[k].VolumeID == id {
			if e.BlockDevices[k].Tags == nil {
				e.BlockDevices[k].Tags = map[string]string{}
			}
			return e.BlockDevices[k].Tags
		}
	}
	for k := range e.NetworkInterfaces {
		if e.NetworkInterfaces[k].ID == id {
			if e.NetworkInterfaces[k].Tags == nil {
				e.NetworkInterfaces[k].Tags = map[string]string{}
			}
			return e.NetworkInterfaces[k].Tags
		}
	}
	return tags
}

type returnResult struct {
	head
	Return bool `xml:"return"`
}

// changeTags is CreateTags (set) and DeleteTags (!set; a Tag.N without Value deletes the
// key whatever its value).
func (f *Front) changeTags(c *call, set bool) (any, error) {
	ids := c.p.list("ResourceId")
	if len(ids) == 0 {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter ResourceId")
	}
	type tagArg struct {
		key, value string
		hasValue   bool
	}
	var args []tagArg
	for _, m := range c.p.members("Tag") {
		k, err := m.required("Key")
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(k, "aws:") {
			return nil, badParam(m.key("Key"), "tag keys starting with aws: are reserved")
		}
		args = append(args, tagArg{key: k, value: m.str("Value"), hasValue: m.has("Value")})
	}
	if set && len(args) == 0 {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter Tag")
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	owners, err := f.resolveResources(ids)
	if err != nil {
		return nil, err
	}
	if err := c.fault(f, owners, nil); err != nil {
		return nil, err
	}
	byOwner := map[string][]string{}
	for k, o := range owners {
		byOwner[o] = append(byOwner[o], ids[k])
	}
	err = f.m.UpdateInstances(c.ctx, slices.Sorted(maps.Keys(byOwner)), func(id string, tags map[string]string, e *api.EC2Attributes) error {
		for _, rid := range byOwner[id] {
			t := tagsOf(rid, tags, e)
			for _, a := range args {
				switch {
				case set:
					t[a.key] = a.value
				case !a.hasValue || t[a.key] == a.value:
					delete(t, a.key)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, ec2Error(err, map[string]string{"tags": "Tag", "instanceIDs": "ResourceId"})
	}
	return &returnResult{Return: true}, nil
}

type xVolume struct {
	VolumeID         string       `xml:"volumeId"`
	Size             int          `xml:"size"`
	AvailabilityZone string       `xml:"availabilityZone"`
	Status           string       `xml:"status"`
	CreateTime       string       `xml:"createTime"`
	VolumeType       string       `xml:"volumeType"`
	IOPS             int          `xml:"iops,omitempty"`
	Throughput       int          `xml:"throughput,omitempty"`
	Encrypted        bool         `xml:"encrypted"`
	KMSKeyID         string       `xml:"kmsKeyId,omitempty"`
	Attachments      []xVolumeAtt `xml:"attachmentSet>item"`
	Tags             []xTag       `xml:"tagSet>item"`
}

type xVolumeAtt struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type describeVolumesResult struct {
	head
	Volumes []xVolume `xml:"volumeSet>item"`
}

func (f *Front) describeVolumes(c *call) (any, error) {
	req, err := f.describe(c, describeSpec{ids: "VolumeId", maxPage: 500,
		filters: []string{"volume-id", "attachment.instance-id", "attachment.device", "availability-zone",
			"status", "volume-type", "encrypted", "size"}})
	if err != nil {
		return nil, err
	}
	ids := req.ids
	out := &describeVolumesResult{Volumes: []xVolume{}}
	seen := map[string]bool{}
	for _, i := range f.instances() {
		if i.EC2 == nil || i.State == api.StateTerminated {
			continue
		}
		launch := i.LaunchTime.UTC().Format(timeFormat)
		for _, b := range i.EC2.BlockDevices {
			if len(ids) > 0 && !slices.Contains(ids, b.VolumeID) {
				continue
			}
			get := func(name string) []string {
				return map[string][]string{"volume-id": {b.VolumeID}, "attachment.instance-id": {i.InstanceID},
					"attachment.device": {b.DeviceName}, "availability-zone": {i.Zone}, "status": {"in-use"},
					"volume-type": {b.VolumeType}, "encrypted": {fmt.Sprint(b.Encrypted)}, "size": {fmt.Sprint(b.SizeGiB)}}[name]
			}
			if !matches(req.filters, b.Tags, get) {
				continue
			}
			seen[b.VolumeID] = true
			out.Volumes = append(out.Volumes, xVolume{VolumeID: b.VolumeID, Size: b.SizeGiB, AvailabilityZone: i.Zone,
				Status: "in-use", CreateTime: launch, VolumeType: b.VolumeType, IOPS: b.IOPS, Throughput: b.Throughput,
				Encrypted: b.Encrypted, KMSKeyID: b.KMSKeyID, Tags: xTags(b.Tags),
				Attachments: []xVolumeAtt{{VolumeID: b.VolumeID, InstanceID: i.InstanceID, Device: b.DeviceName,
					Status: attachStatus(i.State), AttachTime: launch, DeleteOnTermination: b.DeleteOnTermination}}})
		}
	}
	if err := req.page.fits(len(out.Volumes)); err != nil {
		return nil, err
	}
	if err := notFound(ids, func(id string) bool { return seen[id] }, "InvalidVolume.NotFound", "volume"); err != nil {
		return nil, err
	}
	return out, nil
}

type xENI struct {
	xInstanceENI
	AvailabilityZone string `xml:"availabilityZone"`
	RequesterManaged bool   `xml:"requesterManaged"`
	Tags             []xTag `xml:"tagSet>item"`
}

type describeENIsResult struct {
	head
	Interfaces []xENI `xml:"networkInterfaceSet>item"`
}

func (f *Front) describeNetworkInterfaces(c *call) (any, error) {
	req, err := f.describe(c, describeSpec{ids: "NetworkInterfaceId", maxPage: 1000,
		filters: []string{"network-interface-id", "attachment.instance-id", "subnet-id", "vpc-id",
			"availability-zone", "private-ip-address", "interface-type", "group-id", "status"}})
	if err != nil {
		return nil, err
	}
	ids := req.ids
	out := &describeENIsResult{Interfaces: []xENI{}}
	seen := map[string]bool{}
	for _, i := range f.instances() {
		if i.EC2 == nil || i.State == api.StateTerminated {
			continue
		}
		launch := i.LaunchTime.UTC().Format(timeFormat)
		for _, n := range i.EC2.NetworkInterfaces {
			if len(ids) > 0 && !slices.Contains(ids, n.ID) {
				continue
			}
			x := f.xInstanceENIOf(i, n, launch)
			x.Attachment.InstanceID, x.Attachment.InstanceOwnerID = i.InstanceID, f.net.account
			get := func(name string) []string {
				return map[string][]string{"network-interface-id": {n.ID}, "attachment.instance-id": {i.InstanceID},
					"subnet-id": {n.SubnetID}, "vpc-id": {f.net.aws.VPC.ID}, "availability-zone": {i.Zone},
					"private-ip-address": {n.PrivateIP}, "interface-type": {n.InterfaceType}, "status": {"in-use"},
					"group-id": mapSlice(n.Groups, func(g api.EC2Group) string { return g.ID })}[name]
			}
			if !matches(req.filters, n.Tags, get) {
				continue
			}
			seen[n.ID] = true
			out.Interfaces = append(out.Interfaces, xENI{xInstanceENI: x, AvailabilityZone: i.Zone, Tags: xTags(n.Tags)})
		}
	}
	if err := req.page.fits(len(out.Interfaces)); err != nil {
		return nil, err
	}
	if err := notFound(ids, func(id string) bool { return seen[id] }, "InvalidNetworkInterfaceID.NotFound", "network interface"); err != nil {
		return nil, err
	}
	return out, nil
}

func (f *Front) modifyNetworkInterfaceAttribute(c *call) (any, error) {
	id, err := c.p.required("NetworkInterfaceId")
	if err != nil {
		return nil, err
	}
	groups, err := f.parseGroups(c.p, "SecurityGroupId", "")
	if err != nil {
		return nil, err
	}
	hasSDC := c.p.has("SourceDestCheck.Value")
	sdc, err := c.p.boolean("SourceDestCheck.Value", true)
	if err != nil {
		return nil, err
	}
	hasDesc := c.p.has("Description.Value")
	desc := c.p.str("Description.Value")
	if len(groups) == 0 && !hasSDC && !hasDesc {
		return nil, errorf(http.StatusBadRequest, "MissingParameter", "The request must contain one of SecurityGroupId, SourceDestCheck.Value, Description.Value")
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	owners, err := f.resolveResources([]string{id})
	if err != nil || !strings.HasPrefix(id, "eni-") {
		return nil, errorf(http.StatusBadRequest, "InvalidNetworkInterfaceID.NotFound", "NetworkInterfaceId: The networkInterface ID '%s' does not exist", id)
	}
	if err := c.fault(f, owners, nil); err != nil {
		return nil, err
	}
	err = f.m.UpdateInstances(c.ctx, owners, func(_ string, _ map[string]string, e *api.EC2Attributes) error {
		for k := range e.NetworkInterfaces {
			n := &e.NetworkInterfaces[k]
			if n.ID != id {
				continue
			}
			if len(groups) > 0 {
				n.Groups = groups
			}
			if hasSDC {
				n.SourceDestCheck = sdc
			}
			if hasDesc {
				n.Description = desc
			}
		}
		return nil
	})
	if err != nil {
		return nil, ec2Error(err, nil)
	}
	return &returnResult{Return: true}, nil
}
