package api

// Region is a region of the simulated cloud and its zones.
type Region struct {
	Name  string   `json:"name"`
	Zones []string `json:"zones"`
}

// InstanceType describes the machine an instance type provides. It is the single source
// of truth for Node capacity (the simulated kubelet) and autoscaler scale-from-zero.
type InstanceType struct {
	Name      string `json:"name"`
	VCPU      int    `json:"vcpu"`
	MemoryMiB int64  `json:"memoryMiB"`
	GPU       int    `json:"gpu,omitempty"`
	// GPUResource is the extended resource name of the GPUs; default nvidia.com/gpu.
	GPUResource string `json:"gpuResource,omitempty"`
	// Architecture is amd64 or arm64.
	Architecture string `json:"architecture"`
	// MaxPods is the Node's pod capacity; default 110.
	MaxPods int `json:"maxPods,omitempty"`
	// EphemeralStorageGiB is the Node's ephemeral-storage capacity; default 100.
	EphemeralStorageGiB int `json:"ephemeralStorageGiB,omitempty"`
	// EFA says whether the type supports Elastic Fabric Adapter interfaces (EC2 front).
	EFA bool `json:"efa,omitempty"`
}

// Image is a bootable image. An empty Architecture boots on every architecture.
type Image struct {
	ImageID         string `json:"imageID"`
	Name            string `json:"name,omitempty"`
	Architecture    string `json:"architecture,omitempty"`
	OperatingSystem string `json:"operatingSystem,omitempty"`
	// Owner is the owning account the EC2 front reports (DescribeImages Owner.N, owner-id).
	Owner string `json:"owner,omitempty"`
	// CreationDate is an RFC 3339 time the EC2 front reports; clients pick the newest.
	CreationDate string `json:"creationDate,omitempty"`
}

// Catalogue is what the cloud offers. The catalogue file (--catalogue) has this shape in
// JSON or YAML; its entries are added to the built-in ones (replacing same-named
// entries) unless ReplaceDefaults is true.
type Catalogue struct {
	ReplaceDefaults bool           `json:"replaceDefaults,omitempty"`
	Regions         []Region       `json:"regions,omitempty"`
	InstanceTypes   []InstanceType `json:"instanceTypes,omitempty"`
	Images          []Image        `json:"images,omitempty"`
	// AWS is the network model of the EC2 front; a file's aws section replaces the
	// default one as a whole.
	AWS *AWSNetwork `json:"aws,omitempty"`
}

// DescribeRegionsRequest is empty: every region is returned.
type DescribeRegionsRequest struct{}

// DescribeRegionsResponse lists the regions and their zones.
type DescribeRegionsResponse struct {
	Regions []Region `json:"regions"`
}

// DescribeInstanceTypesRequest selects instance types by name; empty returns all.
// Every named type must exist (else InvalidInstanceType).
type DescribeInstanceTypesRequest struct {
	Names []string `json:"names,omitempty"`
}

// DescribeInstanceTypesResponse lists instance types ordered by name.
type DescribeInstanceTypesResponse struct {
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// DescribeImagesRequest selects images by ID; empty returns all.
type DescribeImagesRequest struct {
	ImageIDs []string `json:"imageIDs,omitempty"`
}

// DescribeImagesResponse lists images ordered by ID.
type DescribeImagesResponse struct {
	Images []Image `json:"images"`
}

// DefaultCatalogue returns the built-in catalogue.
func DefaultCatalogue() Catalogue {
	return Catalogue{
		Regions: []Region{
			{Name: "sim-east-1", Zones: []string{"sim-east-1a", "sim-east-1b", "sim-east-1c"}},
			{Name: "sim-west-1", Zones: []string{"sim-west-1a", "sim-west-1b"}},
		},
		InstanceTypes: []InstanceType{
			{Name: "s1.small", VCPU: 1, MemoryMiB: 2048, Architecture: "amd64"},
			{Name: "s1.medium", VCPU: 2, MemoryMiB: 4096, Architecture: "amd64"},
			{Name: "s1.large", VCPU: 4, MemoryMiB: 16384, Architecture: "amd64"},
			{Name: "s1.xlarge", VCPU: 8, MemoryMiB: 32768, Architecture: "amd64"},
			{Name: "s1.2xlarge", VCPU: 16, MemoryMiB: 65536, Architecture: "amd64"},
			{Name: "a1.large", VCPU: 4, MemoryMiB: 8192, Architecture: "arm64"},
			{Name: "a1.xlarge", VCPU: 8, MemoryMiB: 16384, Architecture: "arm64"},
			{Name: "g1.xlarge", VCPU: 8, MemoryMiB: 61440, GPU: 1, Architecture: "amd64"},
			{Name: "g1.4xlarge", VCPU: 32, MemoryMiB: 249856, GPU: 4, Architecture: "amd64"},
		},
		Images: []Image{
			{ImageID: "sim-rhcos-9", Name: "Simulated RHCOS 9", OperatingSystem: "linux"},
			{ImageID: "sim-ubuntu-24.04", Name: "Simulated Ubuntu 24.04", OperatingSystem: "linux"},
			{ImageID: "sim-ubuntu-24.04-arm64", Name: "Simulated Ubuntu 24.04 (arm64)", Architecture: "arm64", OperatingSystem: "linux"},
		},
	}
}
