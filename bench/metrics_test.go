package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetricsReading: writes count every mutating request the client made and nothing else,
// and the queue report ranks controllers by items added between two scrapes.
func TestMetricsReading(t *testing.T) {
	adds := 10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="h",method="GET"} 1000
rest_client_requests_total{code="201",host="h",method="POST"} 7
rest_client_requests_total{code="200",host="h",method="PATCH"} 5
rest_client_requests_total{code="409",host="h",method="PATCH"} 2
rest_client_requests_total{code="200",host="h",method="PUT"} 1
rest_client_requests_total{code="200",host="h",method="DELETE"} 3
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="a",name="a"} %d
workqueue_adds_total{controller="b",name="b"} 4
`, adds)
	}))
	defer srv.Close()
	if n, err := writesAt(srv.URL); err != nil || n != 18 {
		t.Errorf("writes %d (%v), want 18", n, err)
	}
	e := &env{metricsAddr: strings.TrimPrefix(srv.URL, "http://")}
	before, err := e.queueSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	adds = 20
	after, err := e.queueSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	before["b"] = queueStat{}
	got := queueReport(before, after)
	if !strings.Contains(got, "a adds=10") || strings.Index(got, "a adds") > strings.Index(got, "b adds=4") {
		t.Errorf("queue report %q: want a (10 added) before b (4)", got)
	}
}

// TestRequestReport: the apiserver's requests between two readings, per Machine, busiest first.
func TestRequestReport(t *testing.T) {
	before := map[string]float64{"PATCH machines/status": 100, "GET nodes": 50}
	after := map[string]float64{"PATCH machines/status": 300, "GET nodes": 60, "LIST machines": 40}
	got := requestReport(before, after, 100)
	want := "apiserver requests per Machine, every client: 2.5 (PATCH machines/status 2.00, LIST machines 0.40, GET nodes 0.10)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
