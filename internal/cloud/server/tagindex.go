package server

// tagIndex finds instances by tag without looking at every instance: tag key → value →
// instance IDs. The Machine controllers look up the one instance carrying their Machine's
// UID before each create; with a scan that was O(instances) per Machine, a tenth of the
// cloud's CPU at 5,000 Machines. It lives in memory only and is rebuilt from the state file
// on start, like the instance map it indexes.
type tagIndex map[string]map[string]map[string]struct{}

// add indexes instance id under each of its tags.
func (x tagIndex) add(id string, tags map[string]string) {
	for k, v := range tags {
		vals := x[k]
		if vals == nil {
			vals = map[string]map[string]struct{}{}
			x[k] = vals
		}
		ids := vals[v]
		if ids == nil {
			ids = map[string]struct{}{}
			vals[v] = ids
		}
		ids[id] = struct{}{}
	}
}

// remove forgets instance id under each of tags (the tags it was indexed with).
func (x tagIndex) remove(id string, tags map[string]string) {
	for k, v := range tags {
		ids := x[k][v]
		delete(ids, id)
		if len(ids) == 0 {
			delete(x[k], v)
			if len(x[k]) == 0 {
				delete(x, k)
			}
		}
	}
}

// candidates returns the IDs of the instances that carry the rarest of want's tags with an
// exact value, a superset of those matching want; ok is false when want has no such tag
// ("*" matches any value and is not indexed by value), and the caller must look at all.
func (x tagIndex) candidates(want map[string]string) (ids map[string]struct{}, ok bool) {
	for k, v := range want {
		if v == "*" {
			continue
		}
		if found := x[k][v]; !ok || len(found) < len(ids) {
			ids, ok = found, true
		}
	}
	return ids, ok
}

// setInstance takes i into memory in place of the record of its ID and keeps the tag index
// true. The caller holds s.mu for writing. A changed record is a new value (copy on
// write), so the old one still holds the tags it was indexed with.
func (s *Server) setInstance(i *instance) {
	if old, ok := s.inst[i.ID]; ok {
		s.byTag.remove(old.ID, old.Tags)
	}
	s.inst[i.ID] = i
	s.byTag.add(i.ID, i.Tags)
}

// dropInstance forgets instance id and its tags. The caller holds s.mu for writing.
func (s *Server) dropInstance(id string) {
	if old, ok := s.inst[id]; ok {
		s.byTag.remove(id, old.Tags)
		delete(s.inst, id)
	}
}
