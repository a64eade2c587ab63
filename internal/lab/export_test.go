package lab

import (
	"net"
	"strings"
)

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

// EtcdURL returns the lab's etcd client URL.
func (l *Lab) EtcdURL() string { return l.component("etcd").url }

// EtcdPost calls etcd's JSON gRPC gateway.
var EtcdPost = etcdPost

// HoldPortOnRestart makes the next restart find the component's port taken at its first
// attempt and free at its second; attempts reports how many it made and whether the port
// could be held.
func (l *Lab) HoldPortOnRestart() (attempts func() (int, error)) {
	var n int
	var ln net.Listener
	var err error
	l.beforeRespawn = func(old *process, attempt int) {
		n = attempt + 1
		switch attempt {
		case 0:
			ln, err = net.Listen("tcp", old.url[strings.Index(old.url, "//")+2:])
		case 1:
			if ln != nil {
				ln.Close()
			}
			l.beforeRespawn = nil
		}
	}
	return func() (int, error) { return n, err }
}
