package ec2

// describeSpec is what a Describe* action reads before it looks at the model.
type describeSpec struct {
	// ids is the list parameter naming the resources asked for ("VpcId"); empty for an
	// action without one.
	ids string
	// filters are the filter names the action knows (tag:K and tag-key always are).
	filters []string
	// maxPage, when set, makes the action read NextToken (refused: it answers in one page)
	// and MaxResults (5 to maxPage).
	maxPage int
	// check, when set, refuses what was asked for before any fault is injected: typically
	// an ID that does not exist (exist).
	check func(ids []string) error
}

// describeRequest is what the preamble of a Describe* action read.
type describeRequest struct {
	ids     []string
	filters []filter
	page    pageSize
}

// describe is the preamble every Describe* action shares: it reads the IDs, the filters and
// the page size, refuses parameters nobody read and answers a dry run (ready), checks what
// was asked for, and then injects the action's faults. An action reads any parameters of
// its own before calling it.
func (f *Front) describe(c *call, s describeSpec) (describeRequest, error) {
	var r describeRequest
	if s.ids != "" {
		r.ids = c.p.list(s.ids)
	}
	var err error
	if r.filters, err = parseFilters(c.p, s.filters...); err != nil {
		return r, err
	}
	if s.maxPage > 0 {
		if r.page, err = c.p.onePage("NextToken", "MaxResults", 5, s.maxPage); err != nil {
			return r, err
		}
	}
	if err := c.ready(); err != nil {
		return r, err
	}
	if s.check != nil {
		if err := s.check(r.ids); err != nil {
			return r, err
		}
	}
	return r, c.fault(f, nil, nil)
}

// exist is a describeSpec check refusing, with code, the first ID exists returns false for.
func exist(exists func(string) bool, code, what string) func([]string) error {
	return func(ids []string) error { return notFound(ids, exists, code, what) }
}
