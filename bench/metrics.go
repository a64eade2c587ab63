package main

import (
	"fmt"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	resp, err := http.Get(url)
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
