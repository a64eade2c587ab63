package ec2

import (
	"crypto/sha256"
	"encoding/hex"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// params are the form parameters of a call, flattened as the Query protocol sends them
// (InstanceId.1, Filter.1.Name, Filter.1.Value.1, Placement.AvailabilityZone, ...). A
// params value is a view under a prefix; every read marks the key used, so that keys no
// action read can be refused (UnknownParameter) before anything changes.
type params struct {
	v    url.Values
	used map[string]bool
	base string
}

func parseForm(r *http.Request, body []byte) (*params, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/x-www-form-urlencoded" {
			return nil, errorf(http.StatusBadRequest, "InvalidHttpRequest", "Content-Type %q is not application/x-www-form-urlencoded", ct)
		}
	}
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "InvalidHttpRequest", "the body is not a valid form: %v", err)
	}
	for k, vals := range v {
		if len(vals) > 1 {
			return nil, errorf(http.StatusBadRequest, "InvalidParameterValue", "%s: the parameter is given %d times", k, len(vals))
		}
	}
	return &params{v: v, used: map[string]bool{}}, nil
}

// sub is the view of name's members (name.Member).
func (p *params) sub(name string) *params {
	return &params{v: p.v, used: p.used, base: p.base + name + "."}
}

// key is the full parameter name of name in this view (for messages).
func (p *params) key(name string) string { return p.base + name }

func (p *params) has(name string) bool {
	_, ok := p.v[p.base+name]
	return ok
}

func (p *params) str(name string) string {
	k := p.base + name
	p.used[k] = true
	return p.v.Get(k)
}

// required is str that fails with MissingParameter when the parameter is absent or empty.
func (p *params) required(name string) (string, error) {
	s := p.str(name)
	if s == "" {
		return "", errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %s", p.key(name))
	}
	return s, nil
}

// integer reads an integer in [lo, hi]; def when absent.
func (p *params) integer(name string, def, lo, hi int) (int, error) {
	s := p.str(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badParam(p.key(name), "value (%s) must be an integer from %d to %d", s, lo, hi)
	}
	return n, nil
}

// boolean reads true/false; def when absent.
func (p *params) boolean(name string, def bool) (bool, error) {
	s := p.str(name)
	if s == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badParam(p.key(name), "value (%s) must be true or false", s)
	}
	return b, nil
}

// oneOf reads a value that must be one of allowed; def when absent.
func (p *params) oneOf(name, def string, allowed ...string) (string, error) {
	s := p.str(name)
	if s == "" {
		return def, nil
	}
	if !slices.Contains(allowed, s) {
		return "", badParam(p.key(name), "value (%s) must be one of %s", s, strings.Join(allowed, ", "))
	}
	return s, nil
}

// indexes are the member numbers N of name.N[.…], ascending.
func (p *params) indexes(name string) []int {
	prefix := p.base + name + "."
	seen := map[int]bool{}
	for k := range p.v {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(num); err == nil && n > 0 {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// list reads the flattened list name.1, name.2, ...
func (p *params) list(name string) []string {
	var out []string
	for _, n := range p.indexes(name) {
		out = append(out, p.str(name+"."+strconv.Itoa(n)))
	}
	return out
}

// members are the views of the structures name.1.…, name.2.…
func (p *params) members(name string) []*params {
	var out []*params
	for _, n := range p.indexes(name) {
		out = append(out, p.sub(name+"."+strconv.Itoa(n)))
	}
	return out
}

// unknown refuses the first parameter nothing read.
func (p *params) unknown() error {
	var left []string
	for k := range p.v {
		if !p.used[k] {
			left = append(left, k)
		}
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	return errorf(http.StatusBadRequest, "UnknownParameter", "The parameter %s is not recognized (or not supported by the simulated cloud)", left[0])
}

// hash fingerprints the parameters (but ClientToken, DryRun, Action, Version) for
// idempotency: the same request with its members in another order hashes the same.
func (p *params) hash() string {
	var keys []string
	for k := range p.v {
		switch k {
		case "ClientToken", "DryRun", "Action", "Version":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k + "=" + p.v.Get(k) + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// tags reads Tag.N.Key / Tag.N.Value members.
func (p *params) tags(name string) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range p.members(name) {
		k, err := m.required("Key")
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(k, "aws:") {
			return nil, badParam(m.key("Key"), "tag keys starting with aws: are reserved")
		}
		out[k] = m.str("Value")
	}
	return out, nil
}

// onePage reads the paging parameters of actions whose answers always fit in one page:
// a page token is refused (there is no next page); the page size is returned for fits.
func (p *params) onePage(tokenName, sizeName string, lo, hi int) (pageSize, error) {
	if t := p.str(tokenName); t != "" {
		return pageSize{}, badParam(tokenName, "there is no next page (%q): this action answers in one page", t)
	}
	n, err := p.integer(sizeName, 0, lo, hi)
	return pageSize{name: sizeName, n: n}, err
}

type pageSize struct {
	name string
	n    int
}

// fits refuses an answer of n results larger than the page size, rather than silently
// exceeding it.
func (s pageSize) fits(n int) error {
	if s.n > 0 && n > s.n {
		return badParam(s.name, "%d results do not fit in a page of %d, and the simulated cloud pages only DescribeInstances; ask for more or filter", n, s.n)
	}
	return nil
}
