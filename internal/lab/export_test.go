package lab

// WithCAPAExtraArgs returns opts with args appended to CAPA's flags.
func WithCAPAExtraArgs(opts CAPAOptions, args ...string) CAPAOptions {
	opts.extraArgs = append(append([]string{}, opts.extraArgs...), args...)
	return opts
}

// WithMAOExtraArgs returns opts with args appended to the flags of command name.
func WithMAOExtraArgs(opts MAOOptions, name string, args ...string) MAOOptions {
	extra := map[string][]string{}
	for k, v := range opts.extraArgs {
		extra[k] = append([]string{}, v...)
	}
	extra[name] = append(extra[name], args...)
	opts.extraArgs = extra
	return opts
}
