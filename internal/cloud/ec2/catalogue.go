package ec2

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/machina-dev/machina/internal/cloud/api"
)

type xImage struct {
	ImageID            string `xml:"imageId"`
	ImageLocation      string `xml:"imageLocation"`
	ImageState         string `xml:"imageState"`
	ImageOwnerID       string `xml:"imageOwnerId"`
	CreationDate       string `xml:"creationDate,omitempty"`
	IsPublic           bool   `xml:"isPublic"`
	Architecture       string `xml:"architecture"`
	ImageType          string `xml:"imageType"`
	Name               string `xml:"name"`
	Description        string `xml:"description"`
	RootDeviceType     string `xml:"rootDeviceType"`
	RootDeviceName     string `xml:"rootDeviceName"`
	VirtualizationType string `xml:"virtualizationType"`
	Hypervisor         string `xml:"hypervisor"`
	ENASupport         bool   `xml:"enaSupport"`
	PlatformDetails    string `xml:"platformDetails"`
	BootMode           string `xml:"bootMode"`
	// BlockDeviceMappings is the image's root volume: its device, snapshot and size, which
	// clients read to size and name the root volume of the instances they launch.
	BlockDeviceMappings []xImageBlockDevice `xml:"blockDeviceMapping>item"`
}

type xImageBlockDevice struct {
	DeviceName string `xml:"deviceName"`
	EBS        struct {
		SnapshotID          string `xml:"snapshotId"`
		VolumeSize          int32  `xml:"volumeSize"`
		DeleteOnTermination bool   `xml:"deleteOnTermination"`
		VolumeType          string `xml:"volumeType"`
		Encrypted           bool   `xml:"encrypted"`
	} `xml:"ebs"`
}

// imageRootDevice and imageRootGiB describe every catalogue image's root volume: the device
// the front's instances boot from and the size of an RHCOS image's root snapshot.
const (
	imageRootDevice = "/dev/xvda"
	imageRootGiB    = 16
)

type describeImagesResult struct {
	head
	Images []xImage `xml:"imagesSet>item"`
}

func (f *Front) describeImages(c *call) (any, error) {
	owners := c.p.list("Owner")
	c.p.list("ExecutableBy")
	if _, err := c.p.boolean("IncludeDeprecated", false); err != nil {
		return nil, err
	}
	req, err := f.describe(c, describeSpec{ids: "ImageId",
		filters: []string{"image-id", "name", "architecture", "owner-id", "state", "image-type", "is-public",
			"root-device-type", "virtualization-type", "platform-details"},
		check: func(ids []string) error {
			for _, id := range ids {
				if !strings.HasPrefix(id, "ami-") {
					return errorf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
				}
			}
			return notFound(ids, func(id string) bool { _, ok := f.net.images[id]; return ok }, "InvalidAMIID.NotFound", "image id")
		}})
	if err != nil {
		return nil, err
	}
	ids := req.ids
	out := &describeImagesResult{Images: []xImage{}}
	for _, id := range slices.Sorted(maps.Keys(f.net.images)) {
		im := f.net.images[id]
		if len(ids) > 0 && !slices.Contains(ids, id) || len(owners) > 0 && !ownerMatch(owners, im.Owner, f.net.account) {
			continue
		}
		x := xImageOf(im)
		get := func(name string) []string {
			return map[string][]string{"image-id": {id}, "name": {im.Name}, "architecture": {x.Architecture},
				"owner-id": {x.ImageOwnerID}, "state": {"available"}, "image-type": {"machine"}, "is-public": {"true"},
				"root-device-type": {"ebs"}, "virtualization-type": {"hvm"}, "platform-details": {"Linux/UNIX"}}[name]
		}
		if matches(req.filters, nil, get) {
			out.Images = append(out.Images, x)
		}
	}
	return out, nil
}

// ownerMatch matches Owner.N: an account ID, "self" (the front's account) or "amazon".
func ownerMatch(owners []string, owner, self string) bool {
	return slices.ContainsFunc(owners, func(o string) bool {
		return o == owner || o == "self" && owner == self || o == "amazon" && owner == "amazon"
	})
}

func xImageOf(im api.Image) xImage {
	x := xImage{ImageID: im.ImageID, ImageLocation: im.Owner + "/" + im.Name, ImageState: "available",
		ImageOwnerID: im.Owner, CreationDate: im.CreationDate, IsPublic: true, Architecture: ec2Arch(im.Architecture),
		ImageType: "machine", Name: im.Name, Description: im.Name, RootDeviceType: "ebs", RootDeviceName: imageRootDevice,
		VirtualizationType: "hvm", Hypervisor: "xen", ENASupport: true, PlatformDetails: "Linux/UNIX", BootMode: "uefi-preferred"}
	root := xImageBlockDevice{DeviceName: imageRootDevice}
	// The snapshot's ID is derived from the image's, so it is stable across restarts.
	root.EBS.SnapshotID = "snap-" + strings.TrimPrefix(im.ImageID, "ami-")
	root.EBS.VolumeSize, root.EBS.DeleteOnTermination, root.EBS.VolumeType = imageRootGiB, true, "gp3"
	x.BlockDeviceMappings = []xImageBlockDevice{root}
	return x
}

type xInstanceTypeInfo struct {
	InstanceType      string   `xml:"instanceType"`
	CurrentGeneration bool     `xml:"currentGeneration"`
	Architectures     []string `xml:"processorInfo>supportedArchitectures>item"`
	DefaultVCPUs      int      `xml:"vCpuInfo>defaultVCpus"`
	DefaultCores      int      `xml:"vCpuInfo>defaultCores"`
	ThreadsPerCore    int      `xml:"vCpuInfo>defaultThreadsPerCore"`
	MemoryMiB         int64    `xml:"memoryInfo>sizeInMiB"`
	GPU               *xGPU    `xml:"gpuInfo,omitempty"`
	MaxENIs           int      `xml:"networkInfo>maximumNetworkInterfaces"`
	EFASupported      bool     `xml:"networkInfo>efaSupported"`
	ENASupport        string   `xml:"networkInfo>enaSupport"`
	RootDeviceTypes   []string `xml:"supportedRootDeviceTypes>item"`
	Hypervisor        string   `xml:"hypervisor"`
}

type xGPU struct {
	GPUs []xGPUDevice `xml:"gpus>item"`
}

type xGPUDevice struct {
	Count        int    `xml:"count"`
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
}

type describeInstanceTypesResult struct {
	head
	Types []xInstanceTypeInfo `xml:"instanceTypeSet>item"`
}

func (f *Front) describeInstanceTypes(c *call) (any, error) {
	req, err := f.describe(c, describeSpec{ids: "InstanceType", maxPage: 100,
		filters: []string{"instance-type", "processor-info.supported-architecture", "vcpu-info.default-vcpus",
			"memory-info.size-in-mib", "network-info.efa-supported", "current-generation"},
		check: func(names []string) error {
			for _, n := range names {
				if _, ok := f.net.types[n]; !ok {
					return errorf(http.StatusBadRequest, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", n)
				}
			}
			return nil
		}})
	if err != nil {
		return nil, err
	}
	names := req.ids
	out := &describeInstanceTypesResult{Types: []xInstanceTypeInfo{}}
	for _, n := range slices.Sorted(maps.Keys(f.net.types)) {
		t := f.net.types[n]
		if len(names) > 0 && !slices.Contains(names, n) {
			continue
		}
		x := xInstanceTypeOf(t)
		get := func(name string) []string {
			return map[string][]string{"instance-type": {n}, "processor-info.supported-architecture": x.Architectures,
				"vcpu-info.default-vcpus": {strconv.Itoa(t.VCPU)}, "memory-info.size-in-mib": {strconv.FormatInt(t.MemoryMiB, 10)},
				"network-info.efa-supported": {strconv.FormatBool(t.EFA)}, "current-generation": {"true"}}[name]
		}
		if matches(req.filters, nil, get) {
			out.Types = append(out.Types, x)
		}
	}
	return out, req.page.fits(len(out.Types))
}

func xInstanceTypeOf(t api.InstanceType) xInstanceTypeInfo {
	threads := 2
	if t.VCPU%2 != 0 || t.Architecture == "arm64" {
		threads = 1
	}
	x := xInstanceTypeInfo{InstanceType: t.Name, CurrentGeneration: true, Architectures: []string{ec2Arch(t.Architecture)},
		DefaultVCPUs: t.VCPU, DefaultCores: t.VCPU / threads, ThreadsPerCore: threads, MemoryMiB: t.MemoryMiB,
		MaxENIs: 4, EFASupported: t.EFA, ENASupport: "required", RootDeviceTypes: []string{"ebs"}, Hypervisor: "nitro"}
	if t.EFA {
		x.MaxENIs = 15
	}
	if t.GPU > 0 {
		x.GPU = &xGPU{GPUs: []xGPUDevice{{Count: t.GPU, Name: "Simulated GPU", Manufacturer: "NVIDIA"}}}
	}
	return x
}

type xHost struct {
	HostID           string `xml:"hostId"`
	AvailabilityZone string `xml:"availabilityZone"`
	State            string `xml:"state"`
	InstanceType     string `xml:"hostProperties>instanceType"`
	OwnerID          string `xml:"ownerId"`
}

type describeHostsResult struct {
	head
	Hosts []xHost `xml:"hostSet>item"`
}

func (f *Front) describeHosts(c *call) (any, error) {
	exists := func(id string) bool {
		return slices.ContainsFunc(f.net.aws.Hosts, func(h api.AWSDedicatedHost) bool { return h.ID == id })
	}
	req, err := f.describe(c, describeSpec{ids: "HostId", filters: []string{"availability-zone", "instance-type", "state"},
		check: exist(exists, "InvalidHostID.NotFound", "host ID")})
	if err != nil {
		return nil, err
	}
	ids := req.ids
	out := &describeHostsResult{Hosts: []xHost{}}
	for _, h := range f.net.aws.Hosts {
		if len(ids) > 0 && !slices.Contains(ids, h.ID) {
			continue
		}
		get := func(name string) []string {
			return map[string][]string{"availability-zone": {h.Zone}, "instance-type": {h.InstanceType}, "state": {"available"}}[name]
		}
		if matches(req.filters, nil, get) {
			out.Hosts = append(out.Hosts, xHost{HostID: h.ID, AvailabilityZone: h.Zone, State: "available",
				InstanceType: h.InstanceType, OwnerID: f.net.account})
		}
	}
	return out, nil
}

type describeLaunchTemplateVersionsResult struct {
	head
	Versions []struct{} `xml:"launchTemplateVersionSet>item"`
}

// describeLaunchTemplateVersions: the simulated cloud has no launch templates.
func (f *Front) describeLaunchTemplateVersions(c *call) (any, error) {
	id, name := c.p.str("LaunchTemplateId"), c.p.str("LaunchTemplateName")
	c.p.list("LaunchTemplateVersion")
	for _, k := range []string{"MinVersion", "MaxVersion", "ResolveAlias"} {
		c.p.str(k)
	}
	if _, err := c.p.onePage("NextToken", "MaxResults", 1, 200); err != nil {
		return nil, err
	}
	if _, err := parseFilters(c.p, "create-time", "ebs-optimized", "iam-instance-profile", "image-id", "instance-type",
		"is-default-version", "kernel-id", "ram-disk-id"); err != nil {
		return nil, err
	}
	if err := c.ready(); err != nil {
		return nil, err
	}
	switch {
	case id != "":
		return nil, errorf(http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case name != "":
		return nil, errorf(http.StatusBadRequest, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
	}
	if err := c.fault(f, nil, nil); err != nil {
		return nil, err
	}
	return &describeLaunchTemplateVersionsResult{}, nil
}
