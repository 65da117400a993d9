package alertrecord

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"smsdispatcher/provider/providertest"
	"smsdispatcher/tools/promseries"
)

// recordEvery is the scrape interval of a recording.
const recordEvery = time.Second

// recordFamilies are the metric families the rules read, and of a
// histogram the series they read (bucket, count).
var recordFamilies = map[string][]string{
	"sms_messages_total":                   nil,
	"sms_redis_calls_total":                nil,
	"sms_penalty_active":                   nil,
	"sms_account_paused":                   nil,
	"sms_account_health":                   nil,
	"sms_fallback_active":                  nil,
	"sms_learned_rate":                     nil,
	"sms_redis_evicting_policy":            nil,
	"sms_retry_budget_tokens":              nil,
	"sms_otp_waiting":                      nil,
	"sms_configured_rate":                  nil,
	"sms_receipts_total":                   nil,
	"sms_receipts_enabled":                 nil,
	"sms_guard_blocks":                     nil,
	"sms_blocked_total":                    nil,
	"sms_deferred":                         nil,
	"sms_deferred_overdue":                 nil,
	"sms_guard_sends_total":                nil,
	"sms_verifications_total":              nil,
	"sms_suppression_changes_total":        nil,
	"sms_inbound_total":                    nil,
	"sms_suppressed_total":                 nil,
	"sms_otp_latency_seconds":              {"bucket"},
	"http_client_request_duration_seconds": {"count"},
}

// recording is what a run scraped: each series' value at each scrape.
type recording struct {
	run      alertRun
	pods     int
	series   map[string]*recSeries // by the series' text
	n        int                   // scrapes
	simStats providertest.Stats
}

type recSeries struct {
	values []float64 // NaN: absent from that scrape
}

// target is one /metrics a recording scrapes: a pod's, or the receipt
// driver's.
type target struct {
	addr, pod string
	families  map[string][]string // what is recorded of it: recordFamilies, receiptFamilies
}

// podTargets are the dispatcher processes at addrs, pods "a", "b", ...
func podTargets(addrs []string) []target {
	var ts []target
	for p, addr := range addrs {
		ts = append(ts, target{addr: addr, pod: string(rune('a' + p)), families: recordFamilies})
	}
	return ts
}

// scrape reads every target's /metrics as the i-th scrape.
func (rec *recording) scrape(ctx context.Context, i int, targets []target) error {
	rec.n = i + 1
	for _, t := range targets {
		fams, err := fetchMetrics(ctx, "http://"+t.addr+"/metrics")
		if err != nil {
			return fmt.Errorf("scrape %d of pod %s: %w", i, t.pod, err)
		}
		for name, parts := range t.families {
			f, ok := fams[name]
			if !ok {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, s := range samples(name, f.GetType(), parts, m) {
					rec.set(seriesText(s.name, m.GetLabel(), t.pod, s.extra), i, s.value)
				}
			}
		}
	}
	return nil
}

func (rec *recording) set(key string, i int, v float64) {
	s, ok := rec.series[key]
	if !ok {
		s = &recSeries{}
		rec.series[key] = s
	}
	for len(s.values) < i {
		s.values = append(s.values, math.NaN())
	}
	s.values = append(s.values, v)
}

type sample struct {
	name  string
	extra [][2]string
	value float64
}

// samples are the series of one metric the rules read.
func samples(name string, typ dto.MetricType, parts []string, m *dto.Metric) []sample {
	switch typ {
	case dto.MetricType_COUNTER:
		return []sample{{name: name, value: m.GetCounter().GetValue()}}
	case dto.MetricType_GAUGE:
		return []sample{{name: name, value: m.GetGauge().GetValue()}}
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		var out []sample
		if slices.Contains(parts, "bucket") {
			bs := h.GetBucket()
			for _, b := range bs {
				out = append(out, sample{name: name + "_bucket", extra: [][2]string{{"le", formatLe(b.GetUpperBound())}}, value: float64(b.GetCumulativeCount())})
			}
			// The text format lists the +Inf bucket, and the parser keeps
			// it; a histogram without one gets it from the count.
			if len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
				out = append(out, sample{name: name + "_bucket", extra: [][2]string{{"le", "+Inf"}}, value: float64(h.GetSampleCount())})
			}
		}
		if slices.Contains(parts, "count") {
			out = append(out, sample{name: name + "_count", value: float64(h.GetSampleCount())})
		}
		return out
	}
	return nil
}

func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// seriesText is name{labels} with the labels sorted, pod added and the
// OTel exporter's scope labels left out.
func seriesText(name string, lps []*dto.LabelPair, pod string, extra [][2]string) string {
	var ls [][2]string
	for _, lp := range lps {
		if !strings.HasPrefix(lp.GetName(), "otel_scope_") {
			ls = append(ls, [2]string{lp.GetName(), lp.GetValue()})
		}
	}
	ls = append(ls, [2]string{"pod", pod})
	ls = append(ls, extra...)
	slices.SortFunc(ls, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l[0], l[1])
	}
	b.WriteByte('}')
	return b.String()
}

func fetchMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(body))
}

// write writes the recording in the format of recordAlerts.
func (rec *recording) write(w io.Writer) error {
	r := rec.run
	fmt.Fprintf(w, "# %s: %s\n", r.name, r.about)
	fmt.Fprintf(w, "# recorded by `go -C tools run ./cmd/alertrecord --record-alerts DIR --record-runs %s`: %d dispatcher processes (pod a, b), /metrics scraped every %v, %d scrapes from 0s\n",
		r.name, rec.pods, recordEvery, rec.n)
	fmt.Fprintf(w, "# load: marketing published at %g/s (MARKETING_RPS %s), OTP at %g/s", cmp.Or(r.mktRate, recordMktRate), cmp.Or(r.env["MARKETING_RPS"], "70"), cmp.Or(r.otpRate, recordOTPRate))
	if r.badRate > 0 {
		fmt.Fprintf(w, ", malformed messages at %g/s from %v", r.badRate, r.badFrom)
	}
	fmt.Fprintln(w)
	if len(r.redisFlags) > 0 {
		fmt.Fprintf(w, "# redis: a redis-server of the run's own, started with %s\n", strings.Join(r.redisFlags, " "))
	}
	if p := r.receipts; p != nil {
		fmt.Fprintf(w, "# receipts: counted by the recorder as the pods' receipts server would (pod=\"receipts\"): for each send the provider accepted, a sent receipt after %v and the final one %v to %v after the acceptance", receiptSentAfter, receiptFinalAfter, receiptFinalAfter+2*time.Second)
		if p.failEvery > 0 {
			fmt.Fprintf(w, ", 1 in %d of each class undelivered", p.failEvery)
		}
		if p.failMarketing {
			fmt.Fprint(w, ", every marketing message undelivered")
		}
		fmt.Fprintln(w)
	}
	for _, sp := range r.optOuts {
		fmt.Fprintf(w, "# from %v to %v: recipients reply STOP at %g/s through the inbound webhook (each a number of its own)\n", sp.from, sp.until, sp.rate)
	}
	for _, ev := range r.events {
		fmt.Fprintf(w, "# at %v: %s\n", ev.at, ev.what)
	}
	st := rec.simStats
	fmt.Fprintf(w, "# the provider: %d accepted, %d answered 429 for the rate, %d while suspended, %d failed (forced status), %d refused for the credential\n",
		st.Accepted, st.Throttled, st.SuspendedAnswers, st.Failed, st.Unauthorized)
	keys := make([]string, 0, len(rec.series))
	for k := range rec.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vals := rec.series[k].values
		for len(vals) < rec.n {
			vals = append(vals, math.NaN())
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", k, promseries.Format(vals)); err != nil {
			return err
		}
	}
	return nil
}
