package lab

// WithCAPAExtraArgs returns opts with args appended to CAPA's flags.
func WithCAPAExtraArgs(opts CAPAOptions, args ...string) CAPAOptions {
	opts.extraArgs = append(append([]string{}, opts.extraArgs...), args...)
	return opts
}
