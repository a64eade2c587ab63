package manager

import (
	"strings"
	"testing"
)

// Plain HTTP only on loopback and only when asked; profiling only where metrics are served.
func TestMetricsServerOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         Options
		secure    bool
		pprof     bool
		wantError string
	}{
		{"default is HTTPS with authentication", Options{}, true, false, ""},
		{"HTTPS with profiling", Options{MetricsAddr: ":8443", Pprof: true}, true, true, ""},
		{"plain HTTP on 127.0.0.1", Options{MetricsAddr: "127.0.0.1:8080", MetricsInsecure: true}, false, false, ""},
		{"plain HTTP on ::1 with profiling", Options{MetricsAddr: "[::1]:0", MetricsInsecure: true, Pprof: true}, false, true, ""},
		{"plain HTTP on localhost", Options{MetricsAddr: "localhost:9090", MetricsInsecure: true}, false, false, ""},
		{"plain HTTP on every address", Options{MetricsAddr: ":8080", MetricsInsecure: true}, false, false, "loopback"},
		{"plain HTTP on a routable address", Options{MetricsAddr: "10.0.0.1:8080", MetricsInsecure: true}, false, false, "loopback"},
		{"plain HTTP on the default address", Options{MetricsInsecure: true}, false, false, "loopback"},
		{"profiling without metrics", Options{MetricsAddr: "0", Pprof: true}, false, false, "disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.o.metricsServer()
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.SecureServing != tc.secure || (s.FilterProvider != nil) != tc.secure || (len(s.TLSOpts) > 0) != tc.secure {
				t.Errorf("secure %v, filter %v, TLS options %d; want secure %v", s.SecureServing, s.FilterProvider != nil, len(s.TLSOpts), tc.secure)
			}
			if _, ok := s.ExtraHandlers["/debug/pprof/"]; ok != tc.pprof {
				t.Errorf("profiling served %v, want %v", ok, tc.pprof)
			}
		})
	}
}
