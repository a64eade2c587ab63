package ec2

// XML shapes of EC2 answers (namespace http://ec2.amazonaws.com/doc/2016-11-15/). Lists
// are <xxxSet><item>…</item></xxxSet>; empty optional elements are left out.

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
	GroupName        string `xml:"groupName,omitempty"`
	PartitionNumber  int    `xml:"partitionNumber,omitempty"`
	HostID           string `xml:"hostId,omitempty"`
	Affinity         string `xml:"affinity,omitempty"`
}

type xEBSDevice struct {
	VolumeID            string `xml:"volumeId"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xBlockDevice struct {
	DeviceName string     `xml:"deviceName"`
	EBS        xEBSDevice `xml:"ebs"`
}

type xAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xInstanceENI struct {
	NetworkInterfaceID string       `xml:"networkInterfaceId"`
	SubnetID           string       `xml:"subnetId"`
	VPCID              string       `xml:"vpcId"`
	Description        string       `xml:"description"`
	OwnerID            string       `xml:"ownerId"`
	Status             string       `xml:"status"`
	MACAddress         string       `xml:"macAddress"`
	PrivateIPAddress   string       `xml:"privateIpAddress"`
	PrivateDNSName     string       `xml:"privateDnsName"`
	SourceDestCheck    bool         `xml:"sourceDestCheck"`
	Groups             []xGroup     `xml:"groupSet>item"`
	Attachment         xAttachment  `xml:"attachment"`
	PrivateIPs         []xPrivateIP `xml:"privateIpAddressesSet>item"`
	InterfaceType      string       `xml:"interfaceType"`
}

type xIAMProfile struct {
	ARN string `xml:"arn"`
	ID  string `xml:"id"`
}

type xCPUOptions struct {
	CoreCount      int `xml:"coreCount"`
	ThreadsPerCore int `xml:"threadsPerCore"`
}

type xCapacityReservationSpec struct {
	Preference string `xml:"capacityReservationPreference,omitempty"`
	TargetID   string `xml:"capacityReservationTarget>capacityReservationId,omitempty"`
}

type xMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	HTTPProtocolIPv6        string `xml:"httpProtocolIpv6"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type xPrivateDNSNameOptions struct {
	HostnameType    string `xml:"hostnameType"`
	EnableARecord   bool   `xml:"enableResourceNameDnsARecord"`
	EnableAAAARecod bool   `xml:"enableResourceNameDnsAAAARecord"`
}

type xInstance struct {
	InstanceID            string                   `xml:"instanceId"`
	ImageID               string                   `xml:"imageId"`
	State                 xState                   `xml:"instanceState"`
	PrivateDNSName        string                   `xml:"privateDnsName"`
	DNSName               string                   `xml:"dnsName"`
	Reason                string                   `xml:"reason"`
	KeyName               string                   `xml:"keyName,omitempty"`
	AMILaunchIndex        int                      `xml:"amiLaunchIndex"`
	InstanceType          string                   `xml:"instanceType"`
	LaunchTime            string                   `xml:"launchTime"`
	Placement             xPlacement               `xml:"placement"`
	Monitoring            string                   `xml:"monitoring>state"`
	SubnetID              string                   `xml:"subnetId,omitempty"`
	VPCID                 string                   `xml:"vpcId,omitempty"`
	PrivateIPAddress      string                   `xml:"privateIpAddress"`
	PublicIPAddress       string                   `xml:"ipAddress,omitempty"`
	SourceDestCheck       bool                     `xml:"sourceDestCheck"`
	Groups                []xGroup                 `xml:"groupSet>item"`
	StateReason           *xReason                 `xml:"stateReason,omitempty"`
	Architecture          string                   `xml:"architecture"`
	RootDeviceType        string                   `xml:"rootDeviceType"`
	RootDeviceName        string                   `xml:"rootDeviceName"`
	BlockDevices          []xBlockDevice           `xml:"blockDeviceMapping>item"`
	VirtualizationType    string                   `xml:"virtualizationType"`
	InstanceLifecycle     string                   `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string                   `xml:"spotInstanceRequestId,omitempty"`
	ClientToken           string                   `xml:"clientToken"`
	Tags                  []xTag                   `xml:"tagSet>item"`
	Hypervisor            string                   `xml:"hypervisor"`
	NetworkInterfaces     []xInstanceENI           `xml:"networkInterfaceSet>item"`
	IAMInstanceProfile    *xIAMProfile             `xml:"iamInstanceProfile,omitempty"`
	EBSOptimized          bool                     `xml:"ebsOptimized"`
	ENASupport            bool                     `xml:"enaSupport"`
	CPUOptions            xCPUOptions              `xml:"cpuOptions"`
	CapacityReservation   xCapacityReservationSpec `xml:"capacityReservationSpecification"`
	MetadataOptions       xMetadataOptions         `xml:"metadataOptions"`
	PrivateDNSNameOptions xPrivateDNSNameOptions   `xml:"privateDnsNameOptions"`
	PlatformDetails       string                   `xml:"platformDetails"`
	BootMode              string                   `xml:"currentInstanceBootMode"`
}

type xReservation struct {
	ReservationID string      `xml:"reservationId"`
	OwnerID       string      `xml:"ownerId"`
	Groups        []xGroup    `xml:"groupSet>item"`
	Instances     []xInstance `xml:"instancesSet>item"`
}

type xStateChange struct {
	InstanceID    string `xml:"instanceId"`
	CurrentState  xState `xml:"currentState"`
	PreviousState xState `xml:"previousState"`
}
