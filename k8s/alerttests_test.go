package k8s

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"smsdispatcher/tools/promseries"
)

// The rule unit tests that `promtool test rules` runs (.ci/run):
//
//	monitoring/testdata/rules.yaml      the manifest's groups as a Prometheus rule file
//	monitoring/testdata/cases/*.yaml    the tests as written: promtool's format, with
//	                                    each group's input_series named as a part of
//	                                    a recording (recording:) instead of listed
//	monitoring/testdata/recordings/     the fault runs' /metrics, every second
//	                                    (go -C tools run ./cmd/alertrecord --record-alerts DIR)
//	monitoring/testdata/*.test.yaml     the tests promtool runs: the cases with the
//	                                    recordings turned into input_series
//
// The tests below keep the generated files identical to what their sources
// give, and every rule of the manifest covered.
const (
	rulesFile      = alertTestsDir + "/rules.yaml"
	alertTestsDir  = monitoringDir + "/testdata"
	casesDir       = alertTestsDir + "/cases"
	recordingsDir  = alertTestsDir + "/recordings"
	regenerateHint = "cd k8s && go test -run 'TestRulesFile|TestAlertTestFiles' -update-alert-tests ."
)

var updateAlertTests = flag.Bool("update-alert-tests", false,
	"rewrite "+rulesFile+" from "+ruleFile+" and "+alertTestsDir+"/*.test.yaml from "+casesDir+" and "+recordingsDir)

// renderRulesFile returns the manifest's spec.groups as a Prometheus rule
// file, as the Prometheus Operator hands them to Prometheus.
func renderRulesFile(manifest []byte) ([]byte, error) {
	var pr struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(manifest, &pr); err != nil {
		return nil, err
	}
	body, err := sigsyaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		return nil, err
	}
	head := "# Generated from prometheusrule.yaml (its spec); do not edit. Regenerate with:\n#   " + regenerateHint + "\n"
	return append([]byte(head), body...), nil
}

// TestRulesFileIsTheManifests: the rule file the unit tests load is the
// PrometheusRule's groups, byte for byte as rendered.
func TestRulesFileIsTheManifests(t *testing.T) {
	manifest, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderRulesFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, rulesFile, want)
}

func checkGenerated(t *testing.T, file string, want []byte) {
	t.Helper()
	if *updateAlertTests {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (generate it: %s)", err, regenerateHint)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run (%s)", file, regenerateHint)
	}
}

// recordingRef is a test group's recording: key in a case file.
type recordingRef struct {
	File  string `yaml:"file"`  // in recordings/, without .txt
	From  string `yaml:"from"`  // recording time of test time 0 (default 0s)
	Until string `yaml:"until"` // last recording time replayed
	// RepeatFrom and RepeatUntil: the stretch from RepeatFrom to Until
	// replayed again and again until RepeatUntil (test time).
	RepeatFrom  string `yaml:"repeat_from"`
	RepeatUntil string `yaml:"repeat_until"`
	// Lead: the recorded part's first interval replayed for this long
	// before it (test time 0 is the lead's start): the day before, for a
	// rule that compares with it (promseries.Window.Lead).
	Lead string `yaml:"lead"`
	// LeadQuiet: the lead's counters count nothing (promseries.Window.LeadQuiet).
	LeadQuiet bool `yaml:"lead_quiet"`
}

// renderTestFile turns a case file into the promtool test file: each
// group's recording: becomes its input_series, sampled every interval.
func renderTestFile(name string, src []byte, recordings string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	tests := mapValue(root, "tests")
	if tests == nil || tests.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s: no tests", name)
	}
	for i, group := range tests.Content {
		k := slices.IndexFunc(group.Content, func(n *yaml.Node) bool { return n.Value == "recording" })
		if k < 0 || k%2 != 0 {
			return nil, fmt.Errorf("%s: test %d has no recording:", name, i+1)
		}
		var ref recordingRef
		if err := group.Content[k+1].Decode(&ref); err != nil {
			return nil, fmt.Errorf("%s: test %d: recording: %w", name, i+1, err)
		}
		iv := mapValue(group, "interval")
		if iv == nil {
			return nil, fmt.Errorf("%s: test %d: no interval", name, i+1)
		}
		series, err := inputSeries(recordings, iv.Value, ref)
		if err != nil {
			return nil, fmt.Errorf("%s: test %d: %w", name, i+1, err)
		}
		var list yaml.Node
		if err := list.Encode(series); err != nil {
			return nil, err
		}
		key := group.Content[k]
		key.Value = "input_series"
		key.HeadComment = strings.TrimSpace(key.HeadComment + "\n" + fmt.Sprintf("# from recordings/%s.txt: %s", ref.File, describe(ref, iv.Value)))
		group.Content[k+1] = &list
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Generated from cases/%s and the recordings; do not edit. Regenerate with:\n#   %s\n", name, regenerateHint)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

func describe(ref recordingRef, interval string) string {
	from := ref.From
	if from == "" {
		from = "0s"
	}
	s := fmt.Sprintf("%s to %s, every %s", from, ref.Until, interval)
	switch {
	case ref.Lead != "" && ref.LeadQuiet:
		s = fmt.Sprintf("its first values, counting nothing, for %s, then %s", ref.Lead, s)
	case ref.Lead != "":
		s = fmt.Sprintf("its first interval for %s, then %s", ref.Lead, s)
	}
	if ref.RepeatFrom != "" {
		s += fmt.Sprintf("; then %s to %s again and again until %s of test time", ref.RepeatFrom, ref.Until, ref.RepeatUntil)
	}
	return s
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func inputSeries(dir, interval string, ref recordingRef) ([]promseries.InputSeries, error) {
	f, err := os.Open(filepath.Join(dir, ref.File+".txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rec, err := promseries.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.File, err)
	}
	var errs []error
	dur := func(s string) time.Duration {
		if s == "" {
			return 0
		}
		d, err := time.ParseDuration(s)
		errs = append(errs, err)
		return d
	}
	w := promseries.Window{Interval: dur(interval), From: dur(ref.From), Until: dur(ref.Until), Lead: dur(ref.Lead), LeadQuiet: ref.LeadQuiet}
	if ref.RepeatFrom != "" || ref.RepeatUntil != "" {
		w.Repeat = &promseries.Repeat{From: dur(ref.RepeatFrom), Until: dur(ref.RepeatUntil)}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rec.InputSeries(w)
}

// TestAlertTestFiles: every test file promtool runs is its case file with
// the recordings' series, as generated now.
func TestAlertTestFiles(t *testing.T) {
	cases, err := filepath.Glob(casesDir + "/*.yaml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no case files in %s (%v)", casesDir, err)
	}
	want := map[string]bool{}
	for _, c := range cases {
		name := filepath.Base(c)
		want[name] = true
		src, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		out, err := renderTestFile(name, src, recordingsDir)
		if err != nil {
			t.Fatal(err)
		}
		checkGenerated(t, filepath.Join(alertTestsDir, testFileName(name)), out)
	}
	generated, _ := filepath.Glob(alertTestsDir + "/*.test.yaml")
	for _, g := range generated {
		if !want[strings.TrimSuffix(filepath.Base(g), ".test.yaml")+".yaml"] {
			t.Errorf("%s has no case file in %s: remove it, or add its case", g, casesDir)
		}
	}
}

// testFileName is the name of the test file generated from case file name.
func testFileName(name string) string { return strings.TrimSuffix(name, ".yaml") + ".test.yaml" }

// healthyRecording is the recording of a run with nothing wrong (a
// campaign at the marketing cap, OTP flowing): every alert must stay
// silent on it.
const healthyRecording = "healthy"

// caseTests is what a case file says, as far as coverage goes.
type caseTests struct {
	Tests []struct {
		Name      string       `yaml:"name"`
		Recording recordingRef `yaml:"recording"`
		Alert     []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		Promql []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// untested lists what the case files leave out: an alert with no test in
// which it fires (labels and annotations checked, runbook_url among them),
// or none in which it stays silent on the healthy run (a silence before an
// incident begins does not count); a recording rule no promql_expr_test
// evaluates.
func untested(alerts, records []string, files map[string][]byte) ([]string, error) {
	fires, silent, evaluated := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for name, data := range files {
		var ct caseTests
		if err := yaml.Unmarshal(data, &ct); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, tg := range ct.Tests {
			for _, a := range tg.Alert {
				if len(a.ExpAlerts) == 0 && tg.Recording.File == healthyRecording {
					silent[a.Alertname] = true
				}
				for _, e := range a.ExpAlerts {
					if e.ExpLabels["severity"] != "" && e.ExpAnnotations["runbook_url"] != "" && e.ExpAnnotations["summary"] != "" {
						fires[a.Alertname] = true
					}
				}
			}
			for _, p := range tg.Promql {
				for _, r := range records {
					if regexp.MustCompile(`(^|[^a-zA-Z0-9_:])` + regexp.QuoteMeta(r) + `($|[^a-zA-Z0-9_:])`).MatchString(p.Expr) {
						evaluated[r] = true
					}
				}
			}
		}
	}
	var missing []string
	for _, a := range alerts {
		if !fires[a] {
			missing = append(missing, a+": no test in which it fires with its severity, summary and runbook_url checked")
		}
		if !silent[a] {
			missing = append(missing, a+": no test in which it stays silent on the "+healthyRecording+" recording")
		}
	}
	for _, r := range records {
		if !evaluated[r] {
			missing = append(missing, r+": no promql_expr_test evaluates it")
		}
	}
	return missing, nil
}

// TestEveryRuleHasAUnitTest fails for an alert of the manifest without a
// test that makes it fire and one under which it stays silent on the
// healthy run, and for a recording rule that no test evaluates: a rule
// added later comes with its tests. It reads the case files, which
// TestAlertTestFiles keeps identical to what promtool runs.
func TestEveryRuleHasAUnitTest(t *testing.T) {
	pr := loadRule(t)
	var alerts, records []string
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
			if r.Record != "" {
				records = append(records, r.Record)
			}
		}
	}
	files := map[string][]byte{}
	cases, _ := filepath.Glob(casesDir + "/*.yaml")
	for _, c := range cases {
		data, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		files[c] = data
	}
	missing, err := untested(alerts, records, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		t.Errorf("%s (%s)", m, casesDir)
	}
}

// TestRunbookSaysHowFastEachAlertFires: every alert of the manifest has
// its section in docs/runbook.md (its runbook_url's anchor), and the
// section says how fast it fires and why (a "**Fires:**" paragraph, with
// the figures of its unit tests).
func TestRunbookSaysHowFastEachAlertFires(t *testing.T) {
	runbook, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, part := range strings.Split("\n"+string(runbook), "\n## ")[1:] {
		title, body, _ := strings.Cut(part, "\n")
		sections[strings.TrimSpace(title)] = body
	}
	for _, g := range loadRule(t).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			body, ok := sections[r.Alert]
			switch {
			case !ok:
				t.Errorf("docs/runbook.md has no section ## %s", r.Alert)
			case !strings.Contains(body, "**Fires:**"):
				t.Errorf("docs/runbook.md, ## %s: no **Fires:** paragraph (how fast it fires and why)", r.Alert)
			}
		}
	}
}

// TestUntestedFindsWhatIsMissing: the coverage check itself.
func TestUntestedFindsWhatIsMissing(t *testing.T) {
	file := []byte(`tests:
  - recording: {file: an-incident, until: 150s}
    alert_rule_test:
      - {alertname: Fires, exp_alerts: [{exp_labels: {severity: warning}, exp_annotations: {summary: s, runbook_url: u}}]}
      - {alertname: NoRunbook, exp_alerts: [{exp_labels: {severity: warning}, exp_annotations: {summary: s}}]}
      - {alertname: NeverSilent, exp_alerts: [{exp_labels: {severity: warning}, exp_annotations: {summary: s, runbook_url: u}}]}
      - {alertname: SilentOnlyBeforeItsIncident, exp_alerts: []}
      - {alertname: SilentOnlyBeforeItsIncident, exp_alerts: [{exp_labels: {severity: warning}, exp_annotations: {summary: s, runbook_url: u}}]}
  - recording: {file: healthy, until: 150s}
    alert_rule_test:
      - {alertname: Fires, exp_alerts: []}
      - {alertname: NoRunbook, exp_alerts: []}
    promql_expr_test:
      - expr: sms:seen:rate5m > 0
      - expr: not_sms:unseen:rate5m
`)
	got, err := untested([]string{"Fires", "NoRunbook", "NeverSilent", "SilentOnlyBeforeItsIncident", "Untested"}, []string{"sms:seen:rate5m", "sms:unseen:rate5m"},
		map[string][]byte{"t.yaml": file})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NoRunbook: no test in which it fires with its severity, summary and runbook_url checked",
		"NeverSilent: no test in which it stays silent on the healthy recording",
		"SilentOnlyBeforeItsIncident: no test in which it stays silent on the healthy recording",
		"Untested: no test in which it fires with its severity, summary and runbook_url checked",
		"Untested: no test in which it stays silent on the healthy recording",
		"sms:unseen:rate5m: no promql_expr_test evaluates it",
	}
	if !slices.Equal(got, want) {
		t.Errorf("untested:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
