package server

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/machina-dev/machina/internal/cloud/api"
)

// catalogue indexes what the cloud offers. It is immutable after New.
type catalogue struct {
	regions map[string]api.Region
	zones   map[string]string // zone → region
	types   map[string]api.InstanceType
	images  map[string]api.Image
	// aws is the EC2 front's network (nil without the front).
	aws *api.AWSNetwork
}

// loadCatalogue merges the built-in catalogue, with withAWS the EC2 front's defaults, the
// file and the in-code extension.
func loadCatalogue(file string, extra *api.Catalogue, withAWS bool) (*catalogue, error) {
	merged := api.DefaultCatalogue()
	if withAWS {
		merged = mergeCatalogue(merged, api.DefaultAWSCatalogue())
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("cloud: reading catalogue: %w", err)
		}
		var c api.Catalogue
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			return nil, fmt.Errorf("cloud: catalogue %s: %w", file, err)
		}
		merged = mergeCatalogue(merged, c)
	}
	if extra != nil {
		merged = mergeCatalogue(merged, *extra)
	}
	cat := &catalogue{
		regions: map[string]api.Region{},
		zones:   map[string]string{},
		types:   map[string]api.InstanceType{},
		images:  map[string]api.Image{},
	}
	for _, r := range merged.Regions {
		if r.Name == "" || len(r.Zones) == 0 {
			return nil, fmt.Errorf("cloud: catalogue region %q needs a name and at least one zone", r.Name)
		}
		for _, z := range r.Zones {
			if other, ok := cat.zones[z]; ok && other != r.Name {
				return nil, fmt.Errorf("cloud: catalogue zone %q is in regions %q and %q", z, other, r.Name)
			}
			cat.zones[z] = r.Name
		}
		cat.regions[r.Name] = r
	}
	for _, t := range merged.InstanceTypes {
		if t.Name == "" || t.VCPU <= 0 || t.MemoryMiB <= 0 || t.GPU < 0 {
			return nil, fmt.Errorf("cloud: catalogue instance type %q needs a name, vcpu > 0 and memoryMiB > 0", t.Name)
		}
		if t.Architecture == "" {
			t.Architecture = "amd64"
		}
		if t.MaxPods == 0 {
			t.MaxPods = 110
		}
		if t.EphemeralStorageGiB == 0 {
			t.EphemeralStorageGiB = 100
		}
		if t.GPU > 0 && t.GPUResource == "" {
			t.GPUResource = "nvidia.com/gpu"
		}
		cat.types[t.Name] = t
	}
	for _, im := range merged.Images {
		if im.ImageID == "" {
			return nil, fmt.Errorf("cloud: catalogue image needs an imageID")
		}
		if im.OperatingSystem == "" {
			im.OperatingSystem = "linux"
		}
		cat.images[im.ImageID] = im
	}
	if len(cat.regions) == 0 || len(cat.types) == 0 || len(cat.images) == 0 {
		return nil, fmt.Errorf("cloud: the catalogue needs at least one region, instance type and image")
	}
	if withAWS {
		if merged.AWS == nil {
			return nil, fmt.Errorf("cloud: the EC2 front needs the catalogue's aws section (replaceDefaults dropped it)")
		}
		if err := validateAWSNetwork(cat, merged.AWS); err != nil {
			return nil, fmt.Errorf("cloud: catalogue aws: %w", err)
		}
		cat.aws = merged.AWS
	}
	return cat, nil
}

// mergeCatalogue adds (or, by name, replaces) the entries of add to base.
func mergeCatalogue(base, add api.Catalogue) api.Catalogue {
	if add.ReplaceDefaults {
		add.ReplaceDefaults = false
		return add
	}
	if add.AWS != nil {
		base.AWS = add.AWS
	}
	for _, r := range add.Regions {
		i := slices.IndexFunc(base.Regions, func(x api.Region) bool { return x.Name == r.Name })
		if i >= 0 {
			base.Regions[i] = r
		} else {
			base.Regions = append(base.Regions, r)
		}
	}
	for _, t := range add.InstanceTypes {
		i := slices.IndexFunc(base.InstanceTypes, func(x api.InstanceType) bool { return x.Name == t.Name })
		if i >= 0 {
			base.InstanceTypes[i] = t
		} else {
			base.InstanceTypes = append(base.InstanceTypes, t)
		}
	}
	for _, im := range add.Images {
		i := slices.IndexFunc(base.Images, func(x api.Image) bool { return x.ImageID == im.ImageID })
		if i >= 0 {
			base.Images[i] = im
		} else {
			base.Images = append(base.Images, im)
		}
	}
	return base
}

// validateLaunch checks region, zone, type, image and user data of a launch. prefix is
// prepended to field names ("launchTemplate." for scaling groups); zone may be skipped
// by passing checkZone false.
func (s *Server) validateLaunch(prefix, region, zone, itype, image string, userData []byte, checkZone bool) *api.Error {
	if region == "" {
		return api.Errorf(api.CodeMissingParameter, "region", "region is required")
	}
	if _, ok := s.cat.regions[region]; !ok {
		return api.Errorf(api.CodeInvalidRegion, "region", "unknown region %q (known: %v)", region, s.cat.regionNames())
	}
	if checkZone {
		if zone == "" {
			return api.Errorf(api.CodeMissingParameter, "zone", "zone is required")
		}
		if r, ok := s.cat.zones[zone]; !ok || r != region {
			return api.Errorf(api.CodeInvalidZone, "zone", "unknown zone %q in region %q (known: %v)", zone, region, s.cat.regions[region].Zones)
		}
	}
	if itype == "" {
		return api.Errorf(api.CodeMissingParameter, prefix+"instanceType", "instanceType is required")
	}
	t, ok := s.cat.types[itype]
	if !ok {
		return api.Errorf(api.CodeInvalidInstanceType, prefix+"instanceType", "unknown instance type %q", itype)
	}
	if image == "" {
		return api.Errorf(api.CodeMissingParameter, prefix+"image", "image is required")
	}
	im, ok := s.cat.images[image]
	if !ok {
		return api.Errorf(api.CodeInvalidImage, prefix+"image", "unknown image %q", image)
	}
	if im.Architecture != "" && im.Architecture != t.Architecture {
		return api.Errorf(api.CodeInvalidImage, prefix+"image", "image %q is %s but instance type %q is %s", image, im.Architecture, itype, t.Architecture)
	}
	if len(userData) > s.opts.MaxUserDataBytes {
		return api.Errorf(api.CodeUserDataTooLarge, prefix+"userData", "userData is %d bytes, the limit is %d", len(userData), s.opts.MaxUserDataBytes)
	}
	return nil
}

// validateTags bounds tag keys and values.
func validateTags(field string, tags map[string]string) *api.Error {
	if len(tags) > 50 {
		return api.Errorf(api.CodeInvalidParameterValue, field, "at most 50 tags, got %d", len(tags))
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 {
			return api.Errorf(api.CodeInvalidParameterValue, field, "tag keys must be 1 to 128 characters, got %q", k)
		}
		if len(v) > 256 {
			return api.Errorf(api.CodeInvalidParameterValue, field, "tag %q: values are at most 256 characters", k)
		}
	}
	return nil
}

func (c *catalogue) regionNames() []string {
	var out []string
	for n := range c.regions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// InstanceTypes returns the catalogue's instance types ordered by name.
func (s *Server) InstanceTypes() []api.InstanceType {
	out := make([]api.InstanceType, 0, len(s.cat.types))
	for _, t := range s.cat.types {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Server) describeRegions(_ context.Context, _ *api.DescribeRegionsRequest) (any, error) {
	out := &api.DescribeRegionsResponse{Regions: []api.Region{}}
	for _, n := range s.cat.regionNames() {
		out.Regions = append(out.Regions, s.cat.regions[n])
	}
	return out, nil
}

func (s *Server) describeInstanceTypes(_ context.Context, r *api.DescribeInstanceTypesRequest) (any, error) {
	if len(r.Names) == 0 {
		return &api.DescribeInstanceTypesResponse{InstanceTypes: s.InstanceTypes()}, nil
	}
	out := &api.DescribeInstanceTypesResponse{InstanceTypes: []api.InstanceType{}}
	for _, n := range r.Names {
		t, ok := s.cat.types[n]
		if !ok {
			return nil, api.Errorf(api.CodeInvalidInstanceType, "names", "unknown instance type %q", n)
		}
		out.InstanceTypes = append(out.InstanceTypes, t)
	}
	return out, nil
}

func (s *Server) describeImages(_ context.Context, r *api.DescribeImagesRequest) (any, error) {
	out := &api.DescribeImagesResponse{Images: []api.Image{}}
	if len(r.ImageIDs) == 0 {
		for _, im := range s.cat.images {
			out.Images = append(out.Images, im)
		}
		sort.Slice(out.Images, func(i, j int) bool { return out.Images[i].ImageID < out.Images[j].ImageID })
		return out, nil
	}
	for _, id := range r.ImageIDs {
		im, ok := s.cat.images[id]
		if !ok {
			return nil, api.Errorf(api.CodeInvalidImage, "imageIDs", "unknown image %q", id)
		}
		out.Images = append(out.Images, im)
	}
	return out, nil
}
