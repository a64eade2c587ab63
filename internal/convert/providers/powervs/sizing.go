package powervs

import (
	"math"
	"slices"
	"strconv"
	"strings"

	mapiv1 "github.com/openshift/api/machine/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	capibmv1 "sigs.k8s.io/cluster-api-provider-ibmcloud/api/powervs/v1beta3"

	"github.com/machina-dev/machina/internal/convert"
)

// What each side's defaulting webhook writes for an unset value. The converter writes the
// defaults of the side it reads from, so the instance keeps its size and the other side's
// webhook finds nothing to change.
const (
	defaultSystemType = "s922" // both APIs'
	// The Machine API's defaults (machine-api-operator's PowerVS webhook).
	mapiDefaultMemoryGiB           int32 = 32
	mapiDefaultProcessors                = "0.5" // Shared and Capped
	mapiDefaultDedicatedProcessors int32 = 1
	// CAPIBM's defaults (its IBMPowerVSMachine webhook), and the least it admits.
	capibmDefaultMemoryGiB  int32 = 2
	capibmDefaultProcessors       = "0.25"
	capibmMinMemoryGiB      int32 = 2
	capibmMinProcessors           = 0.25
)

// capibmSystemTypes are the systemType values CAPIBM's CRD admits (besides "").
var capibmSystemTypes = []string{"s922", "e980", "s1022", "e1050", "e1080"}

var processorTypes = []string{string(mapiv1.PowerVSProcessorTypeDedicated), string(mapiv1.PowerVSProcessorTypeShared), string(mapiv1.PowerVSProcessorTypeCapped)}

// sizeToCAPIBM converts the system type, processor type, processors and memory of a
// providerSpec, writing the Machine API's defaults for unset values.
func sizeToCAPIBM(ps *mapiv1.PowerVSMachineProviderConfig, out *capibmv1.IBMPowerVSMachineSpec, path *field.Path, r *convert.Report) {
	// The Machine API lower-cases the system and processor types it sends to PowerVS; CAPIBM's
	// CRD admits only its own spellings.
	sp := path.Child("systemType")
	switch st := strings.ToLower(ps.SystemType); {
	case ps.SystemType == "":
		r.Warn(sp, "unset; the Machine API's default %s is written", defaultSystemType)
		out.SystemType = defaultSystemType
	case !slices.Contains(capibmSystemTypes, st):
		r.Error(field.NotSupported(sp, ps.SystemType, capibmSystemTypes))
	default:
		if st != ps.SystemType {
			r.Warn(sp, "written as %s: the Machine API lower-cases it, CAPIBM's CRD admits only lower case", st)
		}
		out.SystemType = st
	}

	pt := path.Child("processorType")
	switch i := slices.IndexFunc(processorTypes, func(t string) bool { return strings.EqualFold(t, string(ps.ProcessorType)) }); {
	case ps.ProcessorType == "":
		r.Warn(pt, "unset; the Machine API's default %s is written", mapiv1.PowerVSProcessorTypeShared)
		out.ProcessorType = capibmv1.PowerVSProcessorTypeShared
	case i < 0:
		r.Error(field.NotSupported(pt, ps.ProcessorType, processorTypes))
	default:
		if processorTypes[i] != string(ps.ProcessorType) {
			r.Warn(pt, "written as %s: the Machine API ignores case here, CAPIBM's CRD does not", processorTypes[i])
		}
		out.ProcessorType = capibmv1.PowerVSProcessorType(processorTypes[i])
	}

	pp := path.Child("processors")
	out.Processors = ps.Processors
	if unsetProcessors(ps.Processors) {
		if strings.EqualFold(string(ps.ProcessorType), string(mapiv1.PowerVSProcessorTypeDedicated)) {
			out.Processors = intstr.FromInt32(mapiDefaultDedicatedProcessors)
		} else {
			out.Processors = intstr.FromString(mapiDefaultProcessors)
		}
		r.Warn(pp, "unset; the Machine API's default %s for this processor type is written (CAPIBM's would be %s)", out.Processors.String(), capibmDefaultProcessors)
	} else {
		checkProcessors(ps.Processors, pp, r)
	}

	mp := path.Child("memoryGiB")
	out.MemoryGiB = ps.MemoryGiB
	switch {
	case ps.MemoryGiB == 0:
		r.Warn(mp, "unset; the Machine API's default %d GiB is written (CAPIBM's would be %d GiB)", mapiDefaultMemoryGiB, capibmDefaultMemoryGiB)
		out.MemoryGiB = mapiDefaultMemoryGiB
	case ps.MemoryGiB < capibmMinMemoryGiB:
		r.Error(field.Invalid(mp, ps.MemoryGiB, "CAPIBM admits no less than 2 GiB"))
	}
}

// sizeToMAPI converts the sizing of an IBMPowerVSMachine, writing CAPIBM's defaults for unset
// values.
func sizeToMAPI(s *capibmv1.IBMPowerVSMachineSpec, ps *mapiv1.PowerVSMachineProviderConfig, path *field.Path, r *convert.Report) {
	sp := path.Child("systemType")
	switch {
	case s.SystemType == "":
		r.Warn(sp, "unset; CAPIBM's default %s is written", defaultSystemType)
		ps.SystemType = defaultSystemType
	case !slices.Contains(capibmSystemTypes, s.SystemType):
		r.Error(field.NotSupported(sp, s.SystemType, capibmSystemTypes))
	default:
		ps.SystemType = s.SystemType
	}

	pt := path.Child("processorType")
	switch {
	case s.ProcessorType == "":
		r.Warn(pt, "unset; CAPIBM's default %s is written", capibmv1.PowerVSProcessorTypeShared)
		ps.ProcessorType = mapiv1.PowerVSProcessorTypeShared
	case !slices.Contains(processorTypes, string(s.ProcessorType)):
		r.Error(field.NotSupported(pt, s.ProcessorType, processorTypes))
	default:
		ps.ProcessorType = mapiv1.PowerVSProcessorType(s.ProcessorType)
	}

	pp := path.Child("processors")
	ps.Processors = s.Processors
	if unsetProcessors(s.Processors) {
		ps.Processors = intstr.FromString(capibmDefaultProcessors)
		r.Warn(pp, "unset; CAPIBM's default %s is written (the Machine API's would be %s, or 1 when Dedicated)", capibmDefaultProcessors, mapiDefaultProcessors)
	} else {
		checkProcessors(s.Processors, pp, r)
	}

	mp := path.Child("memoryGiB")
	ps.MemoryGiB = s.MemoryGiB
	switch {
	case s.MemoryGiB == 0:
		r.Warn(mp, "unset; CAPIBM's default %d GiB is written (the Machine API's would be %d GiB)", capibmDefaultMemoryGiB, mapiDefaultMemoryGiB)
		ps.MemoryGiB = capibmDefaultMemoryGiB
	case s.MemoryGiB < capibmMinMemoryGiB:
		r.Error(field.Invalid(mp, s.MemoryGiB, "CAPIBM admits no less than 2 GiB"))
	}
}

// unsetProcessors is how both webhooks tell that processors were not given.
func unsetProcessors(v intstr.IntOrString) bool { return v.IntVal == 0 && v.StrVal == "" }

// checkProcessors: both actuators read processors as a floating-point number; CAPIBM admits
// no fewer than 0.25.
func checkProcessors(v intstr.IntOrString, path *field.Path, r *convert.Report) {
	var n float64
	switch v.Type {
	case intstr.Int:
		n = float64(v.IntVal)
	case intstr.String:
		f, err := strconv.ParseFloat(v.StrVal, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			r.Error(field.Invalid(path, v.String(), "not a number of processors"))
			return
		}
		n = f
	default:
		r.Error(field.Invalid(path, v.String(), "not a number of processors"))
		return
	}
	if n < capibmMinProcessors {
		r.Error(field.Invalid(path, v.String(), "CAPIBM admits no fewer than 0.25 processors"))
	}
}
