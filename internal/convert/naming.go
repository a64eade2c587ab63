package convert

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"strings"
)

// templateHashLength is the number of characters of the template name's hash suffix.
const templateHashLength = 10

// maxTemplateNameLength keeps template names valid DNS labels, which is what the Cluster API
// requires of names used in labels and what the InfraMachines cloned from them inherit.
const maxTemplateNameLength = 63

var hashEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// TemplateName returns the name of the InfraMachineTemplate for a MachineSet whose machines
// have the given InfraMachine spec: "<machineSet>-<hash>", where the hash covers the
// MachineSet name and the canonical JSON form of spec. Equal specs give equal names, so
// reverting a MachineSet change points it back at the template it used before. The MachineSet
// name is truncated (never the hash) to keep the result within 63 characters.
func TemplateName(machineSet string, spec InfraSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(machineSet))
	h.Write([]byte{0})
	h.Write(b)
	sum := hashEncoding.EncodeToString(h.Sum(nil))[:templateHashLength]
	prefix := machineSet
	if max := maxTemplateNameLength - 1 - templateHashLength; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-.")
	}
	if prefix == "" {
		return sum, nil
	}
	return prefix + "-" + sum, nil
}
