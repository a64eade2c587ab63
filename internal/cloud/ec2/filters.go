package ec2

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// filter is one Filter.N of a Describe call: the resource matches when one of its values
// for Name matches one of Values (* and ? are wildcards). Filters are ANDed.
type filter struct {
	name   string
	values []*regexp.Regexp
}

// parseFilters reads Filter.N.Name / Filter.N.Value.M; names must be among known (tag:K,
// tag-key and tag-value are always allowed).
func parseFilters(p *params, known ...string) ([]filter, error) {
	var out []filter
	for _, m := range p.members("Filter") {
		name, err := m.required("Name")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(known, name) && !strings.HasPrefix(name, "tag:") && name != "tag-key" && name != "tag-value" {
			return nil, badParam(m.key("Name"), "The filter '%s' is invalid (supported: %s, tag:<key>, tag-key, tag-value)", name, strings.Join(known, ", "))
		}
		vals := m.list("Value")
		if len(vals) == 0 {
			return nil, errorf(400, "MissingParameter", "The request must contain the parameter %s", m.key("Value.1"))
		}
		f := filter{name: name}
		for _, v := range vals {
			f.values = append(f.values, wildcard(v))
		}
		out = append(out, f)
	}
	return out, nil
}

// wildcard compiles an EC2 filter value: * any run of characters, ? one character.
func wildcard(v string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range v {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// matches reports whether a resource with the attribute function get and tags passes all
// filters.
func matches(fs []filter, tags map[string]string, get func(name string) []string) bool {
	for _, f := range fs {
		var have []string
		switch {
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				have = []string{v}
			}
		case f.name == "tag-key":
			have = slices.Collect(maps.Keys(tags))
		case f.name == "tag-value":
			have = slices.Collect(maps.Values(tags))
		default:
			have = get(f.name)
		}
		if !anyMatch(f.values, have) {
			return false
		}
	}
	return true
}

func anyMatch(res []*regexp.Regexp, have []string) bool {
	for _, h := range have {
		for _, re := range res {
			if re.MatchString(h) {
				return true
			}
		}
	}
	return false
}

// xTags renders tags sorted by key.
func xTags(tags map[string]string) []xTag {
	out := make([]xTag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, xTag{Key: k, Value: tags[k]})
	}
	return out
}
