package main

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// managerWrites sums the manager's own mutating API requests from its client metrics.
func (e *env) managerWrites() (int64, error) { return writesAt("http://" + e.metricsAddr + "/metrics") }

// writesAt sums the mutating API requests of the controller manager whose metrics are at url
// (controller-runtime's rest_client_requests_total).
func writesAt(url string) (int64, error) {
	families, err := scrapeMetrics(url)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && slices.Contains([]string{"POST", "PUT", "PATCH", "DELETE"}, l.GetValue()) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return int64(total), nil
}

// scrapeMetrics reads a Prometheus text endpoint (the manager's or the upstream core's /metrics).
func scrapeMetrics(url string) (map[string]*dto.MetricFamily, error) {
	return scrapeMetricsWith(http.DefaultClient, url)
}

// scrapeMetricsWith reads a Prometheus text endpoint with c.
func scrapeMetricsWith(c *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// apiserverRequests reads the kube-apiserver's request counters (apiserver_request_total,
// every client's) by verb and resource.
func (e *env) apiserverRequests() (map[string]float64, error) {
	hc, err := rest.HTTPClientFor(e.lab.Config)
	if err != nil {
		return nil, err
	}
	families, err := scrapeMetricsWith(hc, e.lab.Config.Host+"/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		var verb, resource, sub string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				verb = l.GetValue()
			case "resource":
				resource = l.GetValue()
			case "subresource":
				sub = l.GetValue()
			}
		}
		if sub != "" {
			resource += "/" + sub
		}
		out[verb+" "+resource] += m.GetCounter().GetValue()
	}
	return out, nil
}

// requestReport lists the busiest kinds of apiserver requests between two readings, per
// Machine, and the total.
func requestReport(before, after map[string]float64, n int) string {
	type req struct {
		name  string
		count float64
	}
	var reqs []req
	var total float64
	for name, c := range after {
		if d := c - before[name]; d > 0 {
			reqs = append(reqs, req{name, d})
			total += d
		}
	}
	slices.SortFunc(reqs, func(a, b req) int { return cmp.Compare(b.count, a.count) })
	parts := make([]string, 0, 10)
	for _, r := range reqs[:min(len(reqs), 10)] {
		parts = append(parts, fmt.Sprintf("%s %.2f", r.name, r.count/float64(n)))
	}
	return fmt.Sprintf("apiserver requests per Machine, every client: %.1f (%s)", total/float64(n), strings.Join(parts, ", "))
}
