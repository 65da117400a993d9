package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/scriptop"
	"smsdispatcher/nack"
	"smsdispatcher/telemetry"
)

// The monitoring manifests checked here against what package telemetry
// exports, relative to this package.
const (
	ruleFile      = monitoringDir + "/prometheusrule.yaml"
	dashboardFile = monitoringDir + "/grafana-dashboard.json"
	configMapFile = monitoringDir + "/grafana-dashboard-configmap.yaml"
	runbookURL    = "https://github.com/example/sms-dispatcher/blob/main/docs/runbook.md#"
)

var updateConfigMap = flag.Bool("update-dashboard-configmap", false,
	"rewrite "+configMapFile+" from "+dashboardFile)

// enumLabels are the labels whose values the code enumerates: a rule or
// panel that matches one of them on a value the scrape never showed is a
// typo (the scrape below records every value of each).
var enumLabels = []string{
	"sms_class", "sms_outcome", "sms_action",
	"sms_admission_source", "sms_admission_decision", "sms_admission_reason",
	"sms_provider_status_class", "sms_redis_op", "sms_limit",
	"status", "outcome", "reason",
}

// targetLabels are added by Prometheus to every scraped series, so that
// rules and panels may match or group on them.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint"}

// family is one metric family of the scrape.
type family struct {
	typ    dto.MetricType
	labels map[string]map[string]bool // label name -> values seen
}

// exported is what a rule or panel may refer to: the scraped families and
// the recording rules.
type exported struct {
	families map[string]*family
	recorded map[string]bool
}

// transactional is the class configured between OTP and marketing in the
// scrape.
const transactional = admission.Class("transactional")

// scrape builds the metrics, records at least one event of each kind and
// every value of the enumerated labels, and returns the families that
// /metrics shows.
func scrape(t *testing.T) map[string]*family {
	t.Helper()
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	m.SetState(func() telemetry.State {
		// Three classes, the first with a reserve: every sms_limit.
		return telemetry.State{PenaltyActive: true, BudgetTokens: 7.5, OTPWaiting: 3, ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70, Receipts: true,
			Waiting:     map[admission.Class]int{admission.OTP: 3, transactional: 1, admission.Marketing: 40},
			Classes:     []admission.ClassLimit{{Name: admission.OTP, Reserve: 20}, {Name: transactional, RPS: 30}, {Name: admission.Marketing, RPS: 70}},
			GuardBlocks: map[string]int{"prefix_rate": 1},
			// The deferral's gauges, of a class with send windows.
			Deferred: map[string]int{"marketing": 40}, Overdue: map[string]int{"marketing": 2}}
	})
	// Every status a receipt can leave a message in (provider's 11), every
	// outcome of its handling, and the resends' reasons (the failures).
	finals := []string{"delivered", "undelivered", "failed", "expired", "rejected"}
	for _, status := range append([]string{"queued", "accepted", "sending", "sent", "buffered", "unknown"}, finals...) {
		for _, outcome := range []string{"ok", "duplicate", "unknown", "error"} {
			m.Receipt("primary", "otp", status, outcome)
		}
	}
	for _, outcome := range []string{"forged", "malformed", "too_large"} {
		m.Receipt("primary", "", "", outcome)
	}
	m.Delivery("primary", "otp", 3*time.Second)
	// The guard's counted send, and a verification known in its class and
	// one unknown.
	m.GuardSent("otp", "+447700900123")
	m.Verification("otp")
	m.Verification("")
	for _, reason := range finals[1:] {
		m.Resend("primary", reason)
	}
	// The suppression list's changes, through an account (a STOP, a
	// START, a provider's 21610).
	m.SuppressionChange("inbound", "add", "primary")
	m.SuppressionChange("inbound", "remove", "primary")
	m.SuppressionChange("provider", "add", "primary")

	now := time.Now()
	decisions := []admission.Decision{
		{Allowed: true, Source: admission.SourceRedis},
		{Source: admission.SourceRedis, Reason: admission.ReasonGlobal},
		{Source: admission.SourceRedis, Reason: admission.ReasonCeiling},
		{Source: admission.SourceRedis, Reason: admission.ReasonReserve},
		{Allowed: true, Source: admission.SourceFallback},
		{Source: admission.SourcePenalty, Reason: admission.ReasonPenalty},
	}
	for _, class := range []admission.Class{admission.OTP, transactional, admission.Marketing} {
		for o := nack.Sent; !strings.HasPrefix(o.String(), "Outcome("); o++ {
			for _, d := range decisions {
				m.Observe(dispatch.Event{
					Class: class, Outcome: o, Action: nack.ActionFor(o),
					MessageID: "m1", ID: "login-1", DeliveryAttempt: 2,
					PublishTime: now.Add(-80 * time.Millisecond), Received: now.Add(-60 * time.Millisecond),
					Admitted: now.Add(-20 * time.Millisecond), Decision: d, Finished: now,
				})
			}
		}
	}
	ctx := context.Background()
	// Provider requests through the transport serve gives the provider
	// client (tracing off): status 0 is a request that got no answer.
	tracing, err := telemetry.SetupTracing(ctx, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, status := range []int{200, 429, 404, 503, 0} {
		answer := roundTripper(func(req *http.Request) (*http.Response, error) {
			if status == 0 {
				return nil, errors.New("no answer")
			}
			return &http.Response{StatusCode: status, Body: http.NoBody, Request: req}, nil
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://provider.invalid/send", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := tracing.Transport(answer, m).RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	process := m.RedisHook().ProcessHook(func(context.Context, redis.Cmder) error { return nil })
	for _, op := range []string{admission.OpAdmit, admission.OpPenalty, admission.OpOverride,
		admission.OpClaim, admission.OpFinish, admission.OpRelease} {
		if err := process(ctx, redis.NewCmd(ctx, "evalsha", scriptop.Hash(op), "1", "{sms:a}:key")); err != nil {
			t.Fatal(err)
		}
	}
	if err := process(ctx, redis.NewCmd(ctx, "ping")); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := make(map[string]*family, len(mfs))
	for name, mf := range mfs {
		f := &family{typ: mf.GetType(), labels: map[string]map[string]bool{}}
		for _, metric := range mf.GetMetric() {
			for _, lp := range metric.GetLabel() {
				if f.labels[lp.GetName()] == nil {
					f.labels[lp.GetName()] = map[string]bool{}
				}
				f.labels[lp.GetName()][lp.GetValue()] = true
			}
		}
		out[name] = f
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// resolve returns the family a series name belongs to (x_bucket, x_sum and
// x_count belong to histogram x) and whether the name is a histogram's
// bucket series.
func (e exported) resolve(name string) (*family, bool) {
	if f := e.families[name]; f != nil {
		return f, false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if f := e.families[base]; f != nil && (f.typ == dto.MetricType_HISTOGRAM || (f.typ == dto.MetricType_SUMMARY && suffix != "_bucket")) {
			return f, suffix == "_bucket"
		}
	}
	return nil, false
}

var promql = parser.NewParser(parser.Options{})

// checkExpr parses a PromQL expression and checks every selector in it
// against what the service exports. It returns the metric names used.
func (e exported) checkExpr(expr string) ([]string, error) {
	ast, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			errs = append(errs, fmt.Errorf("selector %s names no metric", vs))
			return nil
		}
		names = append(names, vs.Name)
		if e.recorded[vs.Name] {
			return nil
		}
		f, bucket := e.resolve(vs.Name)
		if f == nil {
			errs = append(errs, fmt.Errorf("metric %s is neither exported by the service nor a recording rule", vs.Name))
			return nil
		}
		for _, lm := range vs.LabelMatchers {
			if lm.Name == labels.MetricName || slices.Contains(targetLabels, lm.Name) || (bucket && lm.Name == model.BucketLabel) {
				continue
			}
			values, ok := f.labels[lm.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: metric %s has no label %s", vs, vs.Name, lm.Name))
				continue
			}
			if !slices.Contains(enumLabels, lm.Name) {
				continue
			}
			switch lm.Type {
			case labels.MatchEqual:
				if lm.Value != "" && !values[lm.Value] {
					errs = append(errs, fmt.Errorf("%s: label %s never has the value %q", vs, lm.Name, lm.Value))
				}
			case labels.MatchRegexp:
				// Each alternative of a plain a|b|c list must be a value.
				for alt := range strings.SplitSeq(lm.Value, "|") {
					if regexp.QuoteMeta(alt) == alt && alt != "" && !values[alt] {
						errs = append(errs, fmt.Errorf("%s: label %s never has the value %q", vs, lm.Name, alt))
					}
				}
			}
		}
		return nil
	})
	return names, errors.Join(errs...)
}

func loadRule(t *testing.T) *monv1.PrometheusRule {
	t.Helper()
	data, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr monv1.PrometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		t.Fatalf("%s: %v", ruleFile, err)
	}
	return &pr
}

func recordedNames(pr *monv1.PrometheusRule) map[string]bool {
	rec := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				rec[r.Record] = true
			}
		}
	}
	return rec
}

// dashboardExprs returns the PromQL of every target of every panel (rows'
// panels included), keyed by "panel title/refId", with Grafana's interval
// variables replaced by durations so that the parser takes them.
func dashboardExprs(t *testing.T, d map[string]any) map[string]string {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m",
		"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")
	out := map[string]string{}
	for _, p := range panels(d) {
		targets, _ := p["targets"].([]any)
		for _, tg := range targets {
			tm, _ := tg.(map[string]any)
			expr, _ := tm["expr"].(string)
			key := fmt.Sprintf("%v/%v", p["title"], tm["refId"])
			if expr == "" {
				t.Errorf("dashboard panel target %s has no expr", key)
				continue
			}
			expr = vars.Replace(expr)
			if strings.Contains(expr, "$") {
				t.Errorf("dashboard panel target %s uses an unknown variable: %s", key, expr)
			}
			out[key] = expr
		}
	}
	return out
}

// panels returns the dashboard's panels, those inside rows included.
func panels(d map[string]any) []map[string]any {
	var out []map[string]any
	var walk func([]any)
	walk = func(ps []any) {
		for _, p := range ps {
			pm, _ := p.(map[string]any)
			out = append(out, pm)
			inner, _ := pm["panels"].([]any)
			walk(inner)
		}
	}
	top, _ := d["panels"].([]any)
	walk(top)
	return out
}

func loadDashboard(t *testing.T) (raw []byte, d map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return raw, d
}

// TestMonitoringMatchesMetrics checks that every metric and label that an
// alert, a recording rule or a dashboard panel uses is one the service
// exports on /metrics (or a recording rule of the PrometheusRule), and that
// every family the service exports is used somewhere.
func TestMonitoringMatchesMetrics(t *testing.T) {
	fams := scrape(t)
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ls := make([]string, 0, len(fams[n].labels))
		for l := range fams[n].labels {
			ls = append(ls, l)
		}
		sort.Strings(ls)
		t.Logf("scraped %s %s %v", fams[n].typ, n, ls)
	}

	pr := loadRule(t)
	ex := exported{families: fams, recorded: recordedNames(pr)}
	used := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			what := "rule " + r.Alert + r.Record
			ns, err := ex.checkExpr(r.Expr.String())
			if err != nil {
				t.Errorf("%s: %v\n%s", what, err, r.Expr.String())
			}
			for _, n := range ns {
				used[n] = true
			}
		}
	}
	_, d := loadDashboard(t)
	exprs := dashboardExprs(t, d)
	if len(exprs) == 0 {
		t.Fatal("dashboard has no targets")
	}
	for key, expr := range exprs {
		ns, err := ex.checkExpr(expr)
		if err != nil {
			t.Errorf("dashboard %s: %v\n%s", key, err, expr)
		}
		for _, n := range ns {
			used[n] = true
		}
	}
	for rec := range ex.recorded {
		if !used[rec] {
			t.Errorf("recording rule %s is used by no alert or panel", rec)
		}
	}
	usedFams := map[*family]bool{}
	for n := range used {
		if f, _ := ex.resolve(n); f != nil {
			usedFams[f] = true
		}
	}
	for _, n := range names {
		if n != "target_info" && !usedFams[fams[n]] {
			t.Errorf("exported metric %s is on no panel and in no rule", n)
		}
	}
}

// TestExprCheckRejectsUnknownNames keeps the check above honest: a name,
// label or value that the service does not export fails it.
func TestExprCheckRejectsUnknownNames(t *testing.T) {
	ex := exported{families: scrape(t), recorded: map[string]bool{"sms_class:sms_messages_sent:rate1m": true}}
	for _, expr := range []string{
		`sum(rate(sms_messages_total{sms_outcome="sent"}[5m]))`,
		`histogram_quantile(0.99, sum by (le) (rate(sms_otp_latency_seconds_bucket[5m])))`,
		`sum(rate(http_client_request_duration_seconds_count{sms_provider_status_class=~"5xx|error"}[5m]))`,
		`sum(sms_class:sms_messages_sent:rate1m)`,
		`max by (pod) (sms_fallback_active{namespace="sms"})`,
		`sum(rate(sms_receipts_total{outcome="ok",status=~"delivered|undelivered|failed|expired|rejected"}[10m]))`,
	} {
		if _, err := ex.checkExpr(expr); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
	}
	for _, expr := range []string{
		`sum(rate(sms_messages_sent_total[5m]))`,
		`sum(rate(sms_messages_total{outcome="sent"}[5m]))`,
		`sum(rate(sms_messages_total{sms_outcome="send"}[5m]))`,
		`sum(rate(http_client_request_duration_seconds_count{sms_provider_status_class=~"5xx|err"}[5m]))`,
		`sms_otp_latency_seconds_total`,
		`{__name__=~"sms_.*"}`,
		`sum(rate(sms_messages_total[5m])`,
		`sms_class:sms_messages_sent:rate5m`,
		`sum(rate(sms_receipts_total{status=~"delivered|undeliverd"}[5m]))`,
		`sum(rate(sms_receipts_total{outcome="forgery"}[5m]))`,
	} {
		_, err := ex.checkExpr(expr)
		if err == nil {
			t.Errorf("%s: passed the check", expr)
			continue
		}
		t.Logf("%s: %v", expr, err)
	}
}

// TestPrometheusRule checks the PrometheusRule's shape and that every alert
// carries what Alertmanager and the person paged need.
func TestPrometheusRule(t *testing.T) {
	pr := loadRule(t)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("apiVersion/kind = %s/%s", pr.APIVersion, pr.Kind)
	}
	if pr.Name != "sms-dispatcher" || pr.Namespace != "" || pr.Labels["app.kubernetes.io/name"] != "sms-dispatcher" {
		t.Errorf("metadata = name %q namespace %q labels %v; want name sms-dispatcher, no namespace, app.kubernetes.io/name=sms-dispatcher",
			pr.Name, pr.Namespace, pr.Labels)
	}
	tmplData := struct {
		Labels, ExternalLabels map[string]string
		ExternalURL            string
		Value                  float64
	}{Labels: map[string]string{"sms_class": "otp"}, Value: 0.5}
	seen := map[string]bool{}
	var alerts []string
	for _, g := range pr.Spec.Groups {
		if g.Name == "" || seen["group "+g.Name] {
			t.Errorf("group name %q empty or repeated", g.Name)
		}
		seen["group "+g.Name] = true
		for _, r := range g.Rules {
			if (r.Alert == "") == (r.Record == "") {
				t.Errorf("rule %q/%q: exactly one of alert and record must be set", r.Alert, r.Record)
				continue
			}
			if r.For != nil {
				if _, err := model.ParseDuration(string(*r.For)); err != nil {
					t.Errorf("rule %s%s: for: %v", r.Alert, r.Record, err)
				}
			}
			if r.Record != "" {
				if !model.UTF8Validation.IsValidMetricName(r.Record) || !strings.Contains(r.Record, ":") {
					t.Errorf("recording rule %q: want a level:metric:operations name", r.Record)
				}
				if seen["record "+r.Record] {
					t.Errorf("recording rule %s defined twice", r.Record)
				}
				seen["record "+r.Record] = true
				if len(r.Annotations) > 0 {
					t.Errorf("recording rule %s has annotations", r.Record)
				}
				continue
			}
			alerts = append(alerts, r.Alert)
			if seen["alert "+r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			seen["alert "+r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, a)
				}
			}
			if want := runbookURL + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			// Annotations are Go templates, expanded the way Prometheus does.
			for k, v := range r.Annotations {
				text := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}" + v
				tmpl, err := template.New(k).Option("missingkey=zero").Funcs(template.FuncMap{
					"humanize": fmt.Sprint, "humanizePercentage": fmt.Sprint, "humanizeDuration": fmt.Sprint,
				}).Parse(text)
				if err == nil {
					err = tmpl.Execute(new(bytes.Buffer), tmplData)
				}
				if err != nil {
					t.Errorf("alert %s annotation %s: %v", r.Alert, k, err)
				}
			}
		}
	}
	for _, want := range []string{"SMSProvider429", "SMSProviderAccountFailure", "SMSFallbackActive", "SMSOTPLatencyHigh",
		"SMSOTPNotSent", "SMSDeadLettersRising", "SMSDeadLetterPublishFailing", "SMSLearnedRateBelowTarget",
		"SMSSendRateNearContract", "SMSProvider5xx", "SMSRetryBudgetSpent", "SMSRedisEvictingPolicy",
		"SMSOTPDeliveryRatioLow", "SMSReceiptsMissing"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s missing", want)
		}
	}
}

// TestGrafanaDashboard checks the dashboard's shape: the Prometheus data
// source is a variable, panel ids are unique and panels do not overlap.
func TestGrafanaDashboard(t *testing.T) {
	raw, d := loadDashboard(t)
	if !bytes.HasSuffix(raw, []byte("}\n")) || bytes.HasSuffix(raw, []byte("\n\n")) {
		t.Error("dashboard JSON must end with exactly one newline (the ConfigMap's block scalar keeps one)")
	}
	if d["uid"] != "sms-dispatcher" || d["title"] == "" {
		t.Errorf("uid %v title %v", d["uid"], d["title"])
	}
	if v, _ := d["schemaVersion"].(json.Number).Int64(); v < 36 {
		t.Errorf("schemaVersion %v", d["schemaVersion"])
	}
	var dsVar bool
	templating, _ := d["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		vm, _ := v.(map[string]any)
		if vm["name"] == "datasource" && vm["type"] == "datasource" && vm["query"] == "prometheus" {
			dsVar = true
		}
	}
	if !dsVar {
		t.Error(`no "datasource" template variable of type datasource for prometheus`)
	}
	wantDS := func(where string, ds any) {
		m, _ := ds.(map[string]any)
		if m["type"] != "prometheus" || m["uid"] != "${datasource}" {
			t.Errorf("%s: datasource %v, want {type: prometheus, uid: ${datasource}}", where, ds)
		}
	}
	ids := map[string]bool{}
	type rect struct{ x, y, w, h int64 }
	var rects []rect
	var titles []string
	for _, p := range panels(d) {
		title, _ := p["title"].(string)
		id := fmt.Sprint(p["id"])
		if title == "" || ids[id] {
			t.Errorf("panel %q: empty title or repeated id %s", title, id)
		}
		ids[id] = true
		gp, _ := p["gridPos"].(map[string]any)
		num := func(k string) int64 { n, _ := gp[k].(json.Number).Int64(); return n }
		r := rect{num("x"), num("y"), num("w"), num("h")}
		if r.w <= 0 || r.h <= 0 || r.x < 0 || r.x+r.w > 24 {
			t.Errorf("panel %q: gridPos %v", title, gp)
		}
		for i, o := range rects {
			if r.x < o.x+o.w && o.x < r.x+r.w && r.y < o.y+o.h && o.y < r.y+r.h {
				t.Errorf("panel %q overlaps panel %q", title, titles[i])
			}
		}
		rects, titles = append(rects, r), append(titles, title)
		if p["type"] == "row" {
			continue
		}
		wantDS("panel "+title, p["datasource"])
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no targets", title)
		}
		for _, tg := range targets {
			tm, _ := tg.(map[string]any)
			wantDS(fmt.Sprintf("panel %s target %v", title, tm["refId"]), tm["datasource"])
		}
	}
	dashboardExprs(t, d)
}

// renderConfigMap wraps the dashboard JSON in the ConfigMap that Grafana's
// dashboard sidecar picks up by its grafana_dashboard label.
func renderConfigMap(dashboard []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`# Generated from grafana-dashboard.json; do not edit. Regenerate with:
#   cd k8s && go test -run TestGrafanaDashboardConfigMap -update-dashboard-configmap .
apiVersion: v1
kind: ConfigMap
metadata:
  name: sms-dispatcher-dashboard
  labels:
    app.kubernetes.io/name: sms-dispatcher
    grafana_dashboard: "1"
data:
  sms-dispatcher.json: |
`)
	for line := range strings.Lines(string(dashboard)) {
		if strings.TrimSpace(line) != "" {
			b.WriteString("    ")
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// TestGrafanaDashboardConfigMap checks that the ConfigMap holds the
// dashboard JSON byte for byte.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	raw, _ := loadDashboard(t)
	want := renderConfigMap(raw)
	if *updateConfigMap {
		if err := os.WriteFile(configMapFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(configMapFile)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(got, &cm); err != nil {
		t.Fatalf("%s: %v", configMapFile, err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "" {
		t.Errorf("%s: %s/%s labels %v namespace %q", configMapFile, cm.APIVersion, cm.Kind, cm.Labels, cm.Namespace)
	}
	if cm.Data["sms-dispatcher.json"] != string(raw) {
		t.Errorf("%s: data differs from %s", configMapFile, dashboardFile)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run (cd k8s && go test -run TestGrafanaDashboardConfigMap -update-dashboard-configmap .)", configMapFile)
	}
}
