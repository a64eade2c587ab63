package api

// Defaults of the EC2 front's catalogue: what an installer-provisioned OpenShift cluster
// in us-east-1 looks like from EC2 (infrastructure name lab-x7k2p).
const (
	DefaultAWSRegion    = "us-east-1"
	DefaultAWSAccountID = "424242424242"
	DefaultAWSInfraID   = "lab-x7k2p"
	// RHCOSOwner is the account that publishes the RHCOS AMIs.
	RHCOSOwner = "531415883065"
)

// DefaultAWSCatalogue returns the catalogue entries the EC2 front adds: region us-east-1,
// common instance types, RHCOS AMIs and the network of cluster lab-x7k2p (a VPC, a public
// and a private subnet per zone, the node/controlplane/lb security groups, the API load
// balancers). The server merges it when the EC2 front is enabled, before --catalogue.
func DefaultAWSCatalogue() Catalogue {
	infra := DefaultAWSInfraID
	owned := func(name string, extra ...string) map[string]string {
		t := map[string]string{"Name": name, "kubernetes.io/cluster/" + infra: "owned",
			"sigs.k8s.io/cluster-api-provider-aws/cluster/" + infra: "owned"}
		for i := 0; i+1 < len(extra); i += 2 {
			t[extra[i]] = extra[i+1]
		}
		return t
	}
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	var subnets []AWSSubnet
	for i, z := range zones {
		subnets = append(subnets,
			AWSSubnet{ID: "subnet-0b1c2d3e4f50617" + string(rune('a'+i)) + "1", Zone: z, CIDR: []string{"10.0.128.0/20", "10.0.144.0/20", "10.0.160.0/20"}[i],
				Tags: owned(infra+"-subnet-private-"+z, "kubernetes.io/role/internal-elb", "1", "sigs.k8s.io/cluster-api-provider-aws/role", "private")},
			AWSSubnet{ID: "subnet-0b1c2d3e4f50617" + string(rune('a'+i)) + "2", Zone: z, CIDR: []string{"10.0.0.0/20", "10.0.16.0/20", "10.0.32.0/20"}[i], Public: true,
				Tags: owned(infra+"-subnet-public-"+z, "kubernetes.io/role/elb", "1", "sigs.k8s.io/cluster-api-provider-aws/role", "public")})
	}
	sg := func(id, role string) AWSSecurityGroup {
		return AWSSecurityGroup{ID: id, Name: infra + "-" + role, Description: "Kubernetes cluster " + infra + ": " + role,
			Tags: owned(infra+"-"+role, "sigs.k8s.io/cluster-api-provider-aws/role", role)}
	}
	return Catalogue{
		Regions: []Region{{Name: DefaultAWSRegion, Zones: zones}},
		InstanceTypes: []InstanceType{
			{Name: "m6i.large", VCPU: 2, MemoryMiB: 8192, Architecture: "amd64"},
			{Name: "m6i.xlarge", VCPU: 4, MemoryMiB: 16384, Architecture: "amd64"},
			{Name: "m6i.2xlarge", VCPU: 8, MemoryMiB: 32768, Architecture: "amd64"},
			{Name: "m6i.4xlarge", VCPU: 16, MemoryMiB: 65536, Architecture: "amd64"},
			{Name: "m5.large", VCPU: 2, MemoryMiB: 8192, Architecture: "amd64"}, // the Machine API's default (admission)
			{Name: "m5.xlarge", VCPU: 4, MemoryMiB: 16384, Architecture: "amd64"},
			{Name: "c5.2xlarge", VCPU: 8, MemoryMiB: 16384, Architecture: "amd64"},
			{Name: "r5.xlarge", VCPU: 4, MemoryMiB: 32768, Architecture: "amd64"},
			{Name: "m6g.xlarge", VCPU: 4, MemoryMiB: 16384, Architecture: "arm64"},
			{Name: "g4dn.xlarge", VCPU: 4, MemoryMiB: 16384, GPU: 1, Architecture: "amd64"},
			{Name: "p4d.24xlarge", VCPU: 96, MemoryMiB: 1179648, GPU: 8, Architecture: "amd64", EFA: true},
		},
		Images: []Image{
			{ImageID: "ami-0a8f3c6e2b1d94f57", Name: "rhcos-9.6.20250701-0-x86_64", Architecture: "amd64",
				OperatingSystem: "linux", Owner: RHCOSOwner, CreationDate: "2025-07-01T08:00:00.000Z"},
			{ImageID: "ami-07e1b4c9d2f3a6085", Name: "rhcos-9.6.20250701-0-aarch64", Architecture: "arm64",
				OperatingSystem: "linux", Owner: RHCOSOwner, CreationDate: "2025-07-01T08:00:00.000Z"},
			{ImageID: "ami-03c5d7e9f1a2b4c68", Name: "rhcos-9.4.20240901-0-x86_64", Architecture: "amd64",
				OperatingSystem: "linux", Owner: RHCOSOwner, CreationDate: "2024-09-01T08:00:00.000Z"},
		},
		AWS: &AWSNetwork{
			Region:    DefaultAWSRegion,
			AccountID: DefaultAWSAccountID,
			InfraID:   infra,
			VPC:       AWSVPC{ID: "vpc-0a1b2c3d4e5f60718", CIDR: "10.0.0.0/16", Tags: owned(infra + "-vpc")},
			Subnets:   subnets,
			SecurityGroups: []AWSSecurityGroup{
				sg("sg-01a2b3c4d5e6f7081", "node"),
				sg("sg-01a2b3c4d5e6f7082", "controlplane"),
				sg("sg-01a2b3c4d5e6f7083", "lb"),
				sg("sg-01a2b3c4d5e6f7084", "apiserver-lb"),
			},
			LoadBalancers: []AWSLoadBalancer{
				{Name: infra + "-int", Type: "network", Scheme: "internal"},
				{Name: infra + "-ext", Type: "network", Scheme: "internet-facing"},
				{Name: infra + "-apiserver", Type: "classic", Scheme: "internet-facing"},
			},
			TargetGroups: []AWSTargetGroup{
				{Name: infra + "-aint", LoadBalancer: infra + "-int", Port: 6443},
				{Name: infra + "-sint", LoadBalancer: infra + "-int", Port: 22623},
				{Name: infra + "-aext", LoadBalancer: infra + "-ext", Port: 6443},
			},
		},
	}
}
