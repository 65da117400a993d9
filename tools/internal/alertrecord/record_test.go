package alertrecord

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"smsdispatcher/tools/promseries"
)

// TestRecordingScrapesWhatTheRulesRead: a recording holds, per pod, the
// series of the families the rules read (histograms as their buckets and
// count), without the OTel scope labels, "_" where a scrape lacked a
// series, and reads back as what was scraped.
func TestRecordingScrapesWhatTheRulesRead(t *testing.T) {
	var scrape atomic.Int64
	pod := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			i := scrape.Load()
			fmt.Fprintln(w, "# TYPE sms_messages_total counter")
			fmt.Fprintf(w, "sms_messages_total{otel_scope_name=\"x\",sms_class=\"otp\",sms_outcome=\"sent\",pod_name=%q} %d\n", name, 10*i)
			if i >= 1 { // the first 429 appears at the second scrape
				fmt.Fprintf(w, "sms_messages_total{sms_class=\"otp\",sms_outcome=\"throttled\",pod_name=%q} %d\n", name, i)
			}
			fmt.Fprintln(w, "# TYPE sms_fallback_active gauge")
			fmt.Fprintf(w, "sms_fallback_active %d\n", i%2)
			fmt.Fprintln(w, "# TYPE go_goroutines gauge") // not read by a rule: not recorded
			fmt.Fprintln(w, "go_goroutines 7")
			fmt.Fprintln(w, "# TYPE sms_otp_latency_seconds histogram")
			fmt.Fprintf(w, "sms_otp_latency_seconds_bucket{le=\"0.5\"} %d\n", i)
			fmt.Fprintf(w, "sms_otp_latency_seconds_bucket{le=\"+Inf\"} %d\n", 2*i)
			fmt.Fprintf(w, "sms_otp_latency_seconds_sum %d\n", 3*i)
			fmt.Fprintf(w, "sms_otp_latency_seconds_count %d\n", 2*i)
		}))
	}
	a, b := pod("a"), pod("b")
	defer a.Close()
	defer b.Close()
	addrs := []string{strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")}

	rec := &recording{run: alertRun{name: "unit", about: "a test"}, pods: 2, series: map[string]*recSeries{}}
	for i := range 3 {
		scrape.Store(int64(i))
		if err := rec.scrape(context.Background(), i, podTargets(addrs)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := rec.write(&out); err != nil {
		t.Fatal(err)
	}
	parsed, err := promseries.Parse(&out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := map[string][]float64{}
	for _, s := range parsed.Series {
		got[s.Metric] = s.Values
	}
	nan := math.NaN()
	want := map[string][]float64{
		`sms_messages_total{pod="a",pod_name="a",sms_class="otp",sms_outcome="sent"}`:      {0, 10, 20},
		`sms_messages_total{pod="b",pod_name="b",sms_class="otp",sms_outcome="sent"}`:      {0, 10, 20},
		`sms_messages_total{pod="a",pod_name="a",sms_class="otp",sms_outcome="throttled"}`: {nan, 1, 2},
		`sms_messages_total{pod="b",pod_name="b",sms_class="otp",sms_outcome="throttled"}`: {nan, 1, 2},
		`sms_fallback_active{pod="a"}`:                      {0, 1, 0},
		`sms_fallback_active{pod="b"}`:                      {0, 1, 0},
		`sms_otp_latency_seconds_bucket{le="0.5",pod="a"}`:  {0, 1, 2},
		`sms_otp_latency_seconds_bucket{le="+Inf",pod="a"}`: {0, 2, 4},
		`sms_otp_latency_seconds_bucket{le="0.5",pod="b"}`:  {0, 1, 2},
		`sms_otp_latency_seconds_bucket{le="+Inf",pod="b"}`: {0, 2, 4},
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || len(g) != len(w) {
			t.Errorf("%s: got %v, want %v\n%s", k, g, w, out.String())
			continue
		}
		for i := range w {
			if g[i] != w[i] && !(math.IsNaN(g[i]) && math.IsNaN(w[i])) {
				t.Errorf("%s: got %v, want %v", k, g, w)
				break
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("recorded %d series, want %d (only what the rules read):\n%s", len(got), len(want), out.String())
	}
}
