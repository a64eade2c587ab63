package gcp

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	capgv1 "sigs.k8s.io/cluster-api-provider-gcp/api/v1beta1"

	"github.com/machina-dev/machina/internal/convert"
)

// Disks. The Machine API lists every disk, the boot disk first; CAPG describes the boot disk
// with rootDevice* fields and the image, and the others as additionalDisks. CAPG deletes
// every disk with the instance, labels the boot disk with the instance's labels and the
// others not at all, and creates the others blank.

const (
	// defaultDiskType is CAPG's disk type when none is named.
	defaultDiskType = capgv1.PdStandardDiskType
	// defaultDiskSize is CAPG's size (GB) of an additional disk without one.
	defaultDiskSize = 30
	// maxKMSKeyName is the longest key name CAPG's CRD admits.
	maxKMSKeyName = 160
)

// kmsKeyName matches a Cloud KMS key name as CAPG's CRD admits it, and splits it.
var kmsKeyName = regexp.MustCompile(`^projects/([-_:A-Za-z0-9]+)/locations/([-_A-Za-z0-9]+)/keyRings/([-_A-Za-z0-9]+)/cryptoKeys/([-_A-Za-z0-9]+)$`)

// kmsServiceAccount is the form CAPG's CRD admits for a key's service account.
var kmsServiceAccount = regexp.MustCompile(`^[-_.A-Za-z0-9]+@[-_.A-Za-z0-9]+\.iam\.gserviceaccount\.com$`)

func (p Platform) disksToCAPG(ps *mapiv1.GCPMachineProviderSpec, out *capgv1.GCPMachineSpec, path *field.Path, r *convert.Report) {
	boot := false
	for i, d := range ps.Disks {
		dp := path.Index(i)
		switch {
		case d == nil:
			r.Error(field.Required(dp, ""))
		case d.Boot && i != 0:
			r.Error(field.Invalid(dp.Child("boot"), true, "the boot disk must be the first disk"))
		case d.Boot:
			boot = true
			p.bootDiskToCAPG(ps, d, out, dp, r)
		default:
			if dd, ok := p.dataDiskToCAPG(ps, d, out.RootDiskEncryptionKey, dp, r); ok {
				out.AdditionalDisks = append(out.AdditionalDisks, dd)
			}
		}
	}
	if !boot && (len(ps.Disks) == 0 || ps.Disks[0] != nil) {
		r.Error(field.Required(path.Index(0).Child("boot"), "the first disk must be the boot disk, with an image"))
	}
}

func (p Platform) bootDiskToCAPG(ps *mapiv1.GCPMachineProviderSpec, d *mapiv1.GCPDisk, out *capgv1.GCPMachineSpec, path *field.Path, r *convert.Report) {
	switch project := p.vmProject(ps); {
	case d.Image == "":
		r.Error(field.Required(path.Child("image"), "the boot disk needs an image"))
	case strings.Contains(d.Image, "/"):
		out.Image = ptr.To(d.Image)
	case project == "":
		r.Error(field.Invalid(path.Child("image"), d.Image, "the Machine API reads a bare image name in the instance's project, which is not known here; name the image projects/<project>/global/images/"+d.Image))
	default:
		out.Image = ptr.To("projects/" + project + "/global/images/" + d.Image)
		r.Warn(path.Child("image"), "read as %s, which converting back writes", *out.Image)
	}
	if d.SizeGB < 0 {
		r.Error(field.Invalid(path.Child("sizeGb"), d.SizeGB, "must not be negative"))
	}
	out.RootDeviceSize = d.SizeGB
	if d.Type == "" {
		r.Error(field.Required(path.Child("type"), "the Machine API needs a disk type"))
	} else {
		out.RootDeviceType = ptr.To(capgv1.DiskType(d.Type))
	}
	if !d.AutoDelete {
		r.Error(field.Invalid(path.Child("autoDelete"), false, "CAPG always deletes the boot disk with the instance"))
	}
	if len(d.Labels) > 0 || len(ps.Labels) > 0 {
		if !maps.Equal(d.Labels, ps.Labels) {
			r.Error(field.Invalid(path.Child("labels"), d.Labels, "CAPG labels the boot disk with the instance's labels; the disk's labels must be the providerSpec's labels"))
		}
	}
	out.RootDiskEncryptionKey = keyToCAPG(d.EncryptionKey, p.vmProject(ps), path.Child("encryptionKey"), r)
}

func (p Platform) dataDiskToCAPG(ps *mapiv1.GCPMachineProviderSpec, d *mapiv1.GCPDisk, rootKey *capgv1.CustomerEncryptionKey, path *field.Path, r *convert.Report) (capgv1.AttachedDiskSpec, bool) {
	ok := true
	fail := func(e *field.Error) { r.Error(e); ok = false }
	if d.Image != "" {
		fail(field.Invalid(path.Child("image"), d.Image, "CAPG creates disks other than the boot disk blank"))
	}
	if !d.AutoDelete {
		fail(field.Invalid(path.Child("autoDelete"), false, "CAPG always deletes disks with the instance"))
	}
	if len(d.Labels) > 0 {
		fail(field.Invalid(path.Child("labels"), d.Labels, "CAPG labels no disk but the boot disk"))
	}
	switch d.Type {
	case "":
		fail(field.Required(path.Child("type"), "the Machine API needs a disk type"))
	case string(capgv1.LocalSsdDiskType):
		fail(field.Invalid(path.Child("type"), d.Type, "CAPG makes local SSDs 375 GB NVMe scratch disks, the Machine API a persistent disk of this type"))
	}
	if d.SizeGB < 1 {
		fail(field.Invalid(path.Child("sizeGb"), d.SizeGB, "must be at least 1 (CAPG makes disks without a size 30 GB)"))
	}
	out := capgv1.AttachedDiskSpec{DeviceType: ptr.To(capgv1.DiskType(d.Type)), Size: ptr.To(d.SizeGB)}
	if d.EncryptionKey != nil {
		key := keyToCAPG(d.EncryptionKey, p.vmProject(ps), path.Child("encryptionKey"), r)
		switch {
		case key == nil:
		case !reflect.DeepEqual(key, rootKey):
			fail(field.Invalid(path.Child("encryptionKey"), key.ManagedKey.KMSKeyName, "CAPG encrypts every disk that has a key with the boot disk's key; this disk's must be the same"))
		default:
			out.EncryptionKey = key
		}
	}
	return out, ok
}

// keyToCAPG converts a Cloud KMS key reference into the key's full name. Without a project
// the Machine API looks for the key in the instance's project.
func keyToCAPG(k *mapiv1.GCPEncryptionKeyReference, vmProject string, path *field.Path, r *convert.Report) *capgv1.CustomerEncryptionKey {
	if k == nil {
		return nil
	}
	if k.KMSKey == nil {
		if k.KMSKeyServiceAccount != "" {
			r.Warn(path.Child("kmsKeyServiceAccount"), "dropped: without a kmsKey the Machine API does not encrypt the disk with a customer key")
		}
		return nil
	}
	kp := path.Child("kmsKey")
	m := *k.KMSKey
	ok := true
	for _, f := range []struct{ name, v string }{{"name", m.Name}, {"keyRing", m.KeyRing}, {"location", m.Location}} {
		if f.v == "" {
			r.Error(field.Required(kp.Child(f.name), ""))
			ok = false
		}
	}
	if m.ProjectID == "" {
		if vmProject == "" {
			r.Error(field.Required(kp.Child("projectID"), "the Machine API looks for the key in the instance's project, which is not known here"))
			return nil
		}
		m.ProjectID = vmProject
		r.Warn(kp.Child("projectID"), "unset; read as the instance's project %s, which converting back writes", vmProject)
	}
	name := fmt.Sprintf("projects/%s/locations/%s/keyRings/%s/cryptoKeys/%s", m.ProjectID, m.Location, m.KeyRing, m.Name)
	if ok && (!kmsKeyName.MatchString(name) || len(name) > maxKMSKeyName) {
		r.Error(field.Invalid(kp, name, "CAPG takes key names of at most 160 characters made of letters, digits, '-', '_' (and ':' in the project)"))
		ok = false
	}
	out := &capgv1.CustomerEncryptionKey{KeyType: capgv1.CustomerManagedKey, ManagedKey: &capgv1.ManagedKey{KMSKeyName: name}}
	if sa := k.KMSKeyServiceAccount; sa != "" {
		if !kmsServiceAccount.MatchString(sa) {
			r.Error(field.Invalid(path.Child("kmsKeyServiceAccount"), sa, "CAPG takes a service account e-mail ending in .iam.gserviceaccount.com"))
			ok = false
		}
		out.KMSKeyServiceAccount = ptr.To(sa)
	}
	if !ok {
		return nil
	}
	return out
}

// disksToMAPI lists the boot disk, then the additional disks.
func disksToMAPI(s *capgv1.GCPMachineSpec, path *field.Path, r *convert.Report) []*mapiv1.GCPDisk {
	boot := &mapiv1.GCPDisk{AutoDelete: true, Boot: true, SizeGB: s.RootDeviceSize, Labels: copyLabels(s.AdditionalLabels)}
	switch {
	case s.Image != nil && !strings.Contains(*s.Image, "/"):
		r.Error(field.Invalid(path.Child("image"), *s.Image, "the Machine API reads an image name without a project in the instance's project; name it in full, projects/<project>/global/images/<name>"))
	case s.ImageFamily != nil && s.Image == nil && !strings.Contains(*s.ImageFamily, "/"):
		r.Error(field.Invalid(path.Child("imageFamily"), *s.ImageFamily, "the Machine API reads an image name without a project in the instance's project; name it in full, projects/<project>/global/images/family/<name>"))
	case s.Image != nil:
		boot.Image = *s.Image
		if s.ImageFamily != nil {
			r.Warn(path.Child("imageFamily"), "dropped: CAPG boots image, which takes precedence")
		}
	case s.ImageFamily != nil:
		boot.Image = *s.ImageFamily
		r.Warn(path.Child("imageFamily"), "the Machine API takes the family as the boot disk's image; converting back writes it in image")
	default:
		r.Error(field.Required(path.Child("image"), "without an image CAPG boots its own default image, which the Machine API cannot name"))
	}
	if s.RootDeviceSize < 0 {
		r.Error(field.Invalid(path.Child("rootDeviceSize"), s.RootDeviceSize, "must not be negative"))
	}
	boot.Type = diskTypeToMAPI(s.RootDeviceType, path.Child("rootDeviceType"), r)
	root := keyToMAPI(s.RootDiskEncryptionKey, path.Child("rootDiskEncryptionKey"), r)
	boot.EncryptionKey = root
	out := []*mapiv1.GCPDisk{boot}
	for i, d := range s.AdditionalDisks {
		dp := path.Child("additionalDisks").Index(i)
		md := &mapiv1.GCPDisk{AutoDelete: true, Type: diskTypeToMAPI(d.DeviceType, dp.Child("deviceType"), r)}
		switch {
		case d.Size == nil:
			md.SizeGB = defaultDiskSize
			r.Warn(dp.Child("size"), "unset; CAPG's default of %d GB, which converting back writes", defaultDiskSize)
		case *d.Size < 1:
			r.Error(field.Invalid(dp.Child("size"), *d.Size, "must be at least 1"))
		default:
			md.SizeGB = *d.Size
		}
		if d.DeviceType != nil && *d.DeviceType == capgv1.LocalSsdDiskType {
			r.Unsupported(dp.Child("deviceType"), *d.DeviceType, convert.MachineAPI+" (it cannot make scratch disks)")
		}
		if d.EncryptionKey != nil {
			md.EncryptionKey = dataDiskKeyToMAPI(d.EncryptionKey, s.RootDiskEncryptionKey, root, dp.Child("encryptionKey"), r)
		}
		out = append(out, md)
	}
	return out
}

// dataDiskKeyToMAPI gives an additional disk that has a key the boot disk's key, which is the
// one CAPG encrypts it with.
func dataDiskKeyToMAPI(own, rootKey *capgv1.CustomerEncryptionKey, root *mapiv1.GCPEncryptionKeyReference, path *field.Path, r *convert.Report) *mapiv1.GCPEncryptionKeyReference {
	switch {
	case root == nil:
		r.Error(field.Invalid(path, own.KeyType, "CAPG encrypts additional disks with rootDiskEncryptionKey, which is unset"))
		return nil
	case !reflect.DeepEqual(own, rootKey):
		r.Warn(path, "CAPG ignores it and encrypts the disk with rootDiskEncryptionKey, which converting back writes")
	}
	c := *root
	c.KMSKey = ptr.To(*root.KMSKey)
	return &c
}

func diskTypeToMAPI(t *capgv1.DiskType, path *field.Path, r *convert.Report) string {
	if t == nil || *t == "" {
		r.Warn(path, "unset; CAPG's default %s, which converting back writes", defaultDiskType)
		return string(defaultDiskType)
	}
	return string(*t)
}

// keyToMAPI splits a customer-managed key's name into the Machine API's reference.
func keyToMAPI(k *capgv1.CustomerEncryptionKey, path *field.Path, r *convert.Report) *mapiv1.GCPEncryptionKeyReference {
	if k == nil {
		return nil
	}
	switch {
	case k.KeyType == capgv1.CustomerSuppliedKey:
		r.Unsupported(path.Child("keyType"), k.KeyType, convert.MachineAPI+" (it takes Cloud KMS keys only)")
		return nil
	case k.KeyType != capgv1.CustomerManagedKey:
		r.Error(field.NotSupported(path.Child("keyType"), k.KeyType, []string{string(capgv1.CustomerManagedKey)}))
		return nil
	case k.SuppliedKey != nil:
		r.Unsupported(path.Child("suppliedKey"), "<set>", convert.MachineAPI)
		return nil
	case k.ManagedKey == nil:
		r.Error(field.Required(path.Child("managedKey"), "without it CAPG does not encrypt the disk with a customer key"))
		return nil
	}
	m := kmsKeyName.FindStringSubmatch(k.ManagedKey.KMSKeyName)
	if m == nil {
		r.Error(field.Invalid(path.Child("managedKey", "kmsKeyName"), k.ManagedKey.KMSKeyName, "projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/<key>"))
		return nil
	}
	return &mapiv1.GCPEncryptionKeyReference{
		KMSKey:               &mapiv1.GCPKMSKeyReference{ProjectID: m[1], Location: m[2], KeyRing: m[3], Name: m[4]},
		KMSKeyServiceAccount: ptr.Deref(k.KMSKeyServiceAccount, ""),
	}
}

func copyLabels(in capgv1.Labels) map[string]string {
	if len(in) == 0 {
		return nil
	}
	return maps.Clone(map[string]string(in))
}
