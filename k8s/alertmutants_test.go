package k8s

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// alertMutant is a change to the PrometheusRule that the alerts' unit
// tests must catch: the alert's test file fails under it.
type alertMutant struct {
	name     string
	testFile string // in alertTestsDir, without .test.yaml
	old, new string // the text replaced, once, in the manifest
}

// alertMutants break what each alert is sized for: its threshold, its
// windows and for:, its grouping, what it counts. Each old text occurs
// once in the manifest.
var alertMutants = []alertMutant{
	{"429: a pod's first 429 (a new series) not counted", "SMSProvider429",
		"              or\n              (\n                sms_messages_total{sms_outcome=\"throttled\"}\n                unless",
		"              and\n              (\n                sms_messages_total{sms_outcome=\"throttled\"}\n                unless"},
	{"429: waits for 5 minutes of 429s", "SMSProvider429",
		"            > 0\n          labels:\n            severity: critical\n          annotations:\n            summary: The SMS provider answered 429",
		"            > 0\n          for: 5m\n          labels:\n            severity: critical\n          annotations:\n            summary: The SMS provider answered 429"},
	{"429: not per account", "SMSProvider429",
		"            sum by (sms_account) (\n              (\n                increase(",
		"            sum (\n              (\n                increase("},
	{"account failure: not per account", "SMSProviderAccountFailure",
		"max by (sms_account) (sms_account_paused) > 0", "max(sms_account_paused) > 0"},
	{"account failure: waits 5 minutes", "SMSProviderAccountFailure",
		"(sms_account_paused) > 0\n", "(sms_account_paused) > 0\n          for: 5m\n"},
	{"account degraded: not per account", "SMSAccountDegraded",
		"max by (sms_account) (sms_account_health) > 0", "max(sms_account_health) > 0"},
	{"account degraded: fires on a healthy account too", "SMSAccountDegraded",
		"(sms_account_health) > 0\n          for: 1m", "(sms_account_health) >= 0\n          for: 1m"},
	{"account degraded: for 5m", "SMSAccountDegraded",
		"(sms_account_health) > 0\n          for: 1m", "(sms_account_health) > 0\n          for: 5m"},
	{"fallback: no for:", "SMSFallbackActive",
		"max(sms_fallback_active) > 0\n          for: 1m", "max(sms_fallback_active) > 0\n          for: 0s"},
	{"fallback: never fires", "SMSFallbackActive",
		"max(sms_fallback_active) > 0", "max(sms_fallback_active) > 1"},
	{"evicting policy: never fires", "SMSRedisEvictingPolicy",
		"max(sms_redis_evicting_policy) > 0", "max(sms_redis_evicting_policy) > 1"},
	{"evicting policy: fires on noeviction too", "SMSRedisEvictingPolicy",
		"max(sms_redis_evicting_policy) > 0", "max(sms_redis_evicting_policy) >= 0"},
	{"evicting policy: for 4m30s", "SMSRedisEvictingPolicy",
		"max(sms_redis_evicting_policy) > 0\n          for: 5m", "max(sms_redis_evicting_policy) > 0\n          for: 4m30s"},
	{"evicting policy: for 5m30s", "SMSRedisEvictingPolicy",
		"max(sms_redis_evicting_policy) > 0\n          for: 5m", "max(sms_redis_evicting_policy) > 0\n          for: 5m30s"},
	{"OTP latency: 10 ms instead of 1 s", "SMSOTPLatencyHigh",
		"(rate(sms_otp_latency_seconds_bucket[5m]))) > 1", "(rate(sms_otp_latency_seconds_bucket[5m]))) > 0.01"},
	{"OTP latency: 10 s instead of 1 s", "SMSOTPLatencyHigh",
		"(rate(sms_otp_latency_seconds_bucket[5m]))) > 1", "(rate(sms_otp_latency_seconds_bucket[5m]))) > 10"},
	{"OTP not sent: fires while OTP are sent", "SMSOTPNotSent",
		"            unless\n            sum(rate(sms_messages_total{sms_class=\"otp\",sms_outcome=\"sent\"}[2m])) > 0",
		"            unless\n            sum(rate(sms_messages_total{sms_class=\"otp\",sms_outcome=\"sent\"}[2m])) > 1000"},
	{"OTP not sent: a 5-minute window", "SMSOTPNotSent",
		"sum(rate(sms_messages_total{sms_class=\"otp\",sms_outcome=\"sent\"}[2m])) > 0", "sum(rate(sms_messages_total{sms_class=\"otp\",sms_outcome=\"sent\"}[5m])) > 0"},
	{"dead letters: for 1m", "SMSDeadLettersRising",
		"{sms_action=\"dead_letter\"}[5m])) > 0\n          for: 10m", "{sms_action=\"dead_letter\"}[5m])) > 0\n          for: 1m"},
	{"dead-letter publish: counts dead letters", "SMSDeadLetterPublishFailing",
		"sms_outcome=~\"invalid|rejected\",sms_action=\"nack\"", "sms_outcome=~\"invalid|rejected\""},
	{"dead-letter publish: for 15m", "SMSDeadLetterPublishFailing",
		"sms_action=\"nack\"}[2m])) > 0\n          for: 5m", "sms_action=\"nack\"}[2m])) > 0\n          for: 15m"},
	{"dead-letter publish: a 5-minute window (fires after a 90 s outage has ended)", "SMSDeadLetterPublishFailing",
		"sms_outcome=~\"invalid|rejected\",sms_action=\"nack\"}[2m]", "sms_outcome=~\"invalid|rejected\",sms_action=\"nack\"}[5m]"},
	{"learned rate: at the target counts as below", "SMSLearnedRateBelowTarget",
		"            < on (sms_account)", "            <= on (sms_account)"},
	{"learned rate: for 1h", "SMSLearnedRateBelowTarget",
		"          for: 30m", "          for: 1h"},
	{"near contract: at 95%", "SMSSendRateNearContract",
		"0.93 * max by (sms_account)", "0.95 * max by (sms_account)"},
	{"near contract: all accounts summed", "SMSSendRateNearContract",
		"sum by (sms_account) (rate(sms_messages_total{sms_outcome=\"sent\"}[1m]))\n            >\n            0.93 * max by (sms_account) (sms_configured_rate{sms_limit=\"contract\"})",
		"sum(rate(sms_messages_total{sms_outcome=\"sent\"}[1m]))\n            >\n            0.93 * max(sms_configured_rate{sms_limit=\"contract\"})"},
	{"5xx: a 5-minute ratio", "SMSProvider5xx",
		"sms_provider_status_class=~\"5xx|error\"}[2m]))\n            /\n            sum(rate(http_client_request_duration_seconds_count{sms_provider_status_class!=\"\"}[2m]))",
		"sms_provider_status_class=~\"5xx|error\"}[5m]))\n            /\n            sum(rate(http_client_request_duration_seconds_count{sms_provider_status_class!=\"\"}[5m]))"},
	{"5xx: for 10m", "SMSProvider5xx",
		"            > 0.10\n          for: 3m", "            > 0.10\n          for: 10m"},
	{"retry budget: at 0 only when negative", "SMSRetryBudgetSpent",
		"min(sms_retry_budget_tokens) <= 5", "min(sms_retry_budget_tokens) < 0"},
	{"retry budget: no for:", "SMSRetryBudgetSpent",
		"min(sms_retry_budget_tokens) <= 5\n          for: 2m", "min(sms_retry_budget_tokens) <= 5\n          for: 0s"},
	{"receipts missing: forged receipts count as receipts", "SMSReceiptsMissing",
		"increase(sms_receipts_total{outcome=~\"ok|duplicate\"}[10m])", "increase(sms_receipts_total[10m])"},
	{"receipts missing: a 5-minute window", "SMSReceiptsMissing",
		"increase(sms_receipts_total{outcome=~\"ok|duplicate\"}[10m])", "increase(sms_receipts_total{outcome=~\"ok|duplicate\"}[5m])"},
	{"receipts missing: fires where receipts are off", "SMSReceiptsMissing",
		"            and on (sms_account)\n            max by (sms_account) (sms_receipts_enabled) > 0\n", ""},
	{"delivery ratio: under 0.6", "SMSOTPDeliveryRatioLow",
		"            < 0.9\n", "            < 0.6\n"},
	{"delivery ratio: under 0.99 (fires on the healthy 0.98)", "SMSOTPDeliveryRatioLow",
		"            < 0.9\n", "            < 0.99\n"},
	{"delivery ratio: no minimum of finals", "SMSOTPDeliveryRatioLow",
		"[10m])) >= 20", "[10m])) >= 0"},
	{"delivery ratio: intermediate receipts count as finals", "SMSOTPDeliveryRatioLow",
		"increase(sms_receipts_total{sms_class=\"otp\",outcome=\"ok\",status=~\"delivered|undelivered|failed|expired|rejected\"}[10m])", "increase(sms_receipts_total{sms_class=\"otp\",outcome=\"ok\"}[10m])"},
	{"delivery ratio: over every class's finals", "SMSOTPDeliveryRatioLow",
		"            /\n            sum by (sms_account) (rate(sms_receipts_total{sms_class=\"otp\",outcome=\"ok\"", "            /\n            sum by (sms_account) (rate(sms_receipts_total{outcome=\"ok\""},
	// Each for: half a minute shorter or longer: the tests pin the
	// evaluation at which the alert first fires, and the one before it.
	{"account degraded: for 30s", "SMSAccountDegraded",
		"(sms_account_health) > 0\n          for: 1m", "(sms_account_health) > 0\n          for: 30s"},
	{"OTP not sent: for 30s", "SMSOTPNotSent",
		"sms_outcome=\"sent\"}[2m])) > 0\n          for: 1m", "sms_outcome=\"sent\"}[2m])) > 0\n          for: 30s"},
	{"OTP latency: for 5m30s", "SMSOTPLatencyHigh",
		"[5m]))) > 1\n          for: 5m", "[5m]))) > 1\n          for: 5m30s"},
	{"learned rate: for 30m30s", "SMSLearnedRateBelowTarget",
		"          for: 30m", "          for: 30m30s"},
	{"near contract: for 30s", "SMSSendRateNearContract",
		"(sms_configured_rate{sms_limit=\"contract\"})\n          for: 1m", "(sms_configured_rate{sms_limit=\"contract\"})\n          for: 30s"},
	{"retry budget: for 1m30s", "SMSRetryBudgetSpent",
		"min(sms_retry_budget_tokens) <= 5\n          for: 2m", "min(sms_retry_budget_tokens) <= 5\n          for: 1m30s"},
	{"receipts missing: for 4m30s", "SMSReceiptsMissing",
		"(sms_receipts_total{outcome=~\"ok|duplicate\"}[10m])) > 0\n          for: 5m", "(sms_receipts_total{outcome=~\"ok|duplicate\"}[10m])) > 0\n          for: 4m30s"},
	{"receipts missing: for 5m30s", "SMSReceiptsMissing",
		"(sms_receipts_total{outcome=~\"ok|duplicate\"}[10m])) > 0\n          for: 5m", "(sms_receipts_total{outcome=~\"ok|duplicate\"}[10m])) > 0\n          for: 5m30s"},
	{"delivery ratio: for 1m30s", "SMSOTPDeliveryRatioLow",
		"[10m])) >= 20\n          for: 2m", "[10m])) >= 20\n          for: 1m30s"},
	{"delivery ratio: for 2m30s", "SMSOTPDeliveryRatioLow",
		"[10m])) >= 20\n          for: 2m", "[10m])) >= 20\n          for: 2m30s"},
	{"recording rule: nacks over sends over 1m", "recording-rules",
		"sum(rate(sms_messages_total{sms_action=\"nack\"}[5m]))", "sum(rate(sms_messages_total{sms_action=\"nack\"}[1m]))"},
	{"recording rule: the sent rate per class summed", "recording-rules",
		"sum by (sms_class) (rate(sms_messages_total{sms_outcome=\"sent\"}[1m]))", "sum(rate(sms_messages_total{sms_outcome=\"sent\"}[1m]))"},
	{"recording rule: the delivered ratio per class is nothing when none is delivered", "recording-rules",
		"              or\n              0 * sum by (sms_class) (rate(sms_receipts_total{outcome=\"ok\",status=~\"delivered|undelivered|failed|expired|rejected\"}[10m]))\n", ""},
	{"recording rule: the delivered ratio per account and class is nothing when none is delivered", "recording-rules",
		"              or\n              0 * sum by (sms_account, sms_class) (rate(sms_receipts_total{outcome=\"ok\",status=~\"delivered|undelivered|failed|expired|rejected\"}[10m]))\n", ""},
	{"recording rule: the delivered ratio counts intermediate receipts", "recording-rules",
		"            /\n            sum by (sms_class) (rate(sms_receipts_total{outcome=\"ok\",status=~\"delivered|undelivered|failed|expired|rejected\"}[10m]))", "            /\n            sum by (sms_class) (rate(sms_receipts_total{outcome=\"ok\"}[10m]))"},
	{"deferred stuck: never fires", "SMSDeferredStuck",
		"max by (sms_class) (sms_deferred_overdue) > 0", "max by (sms_class) (sms_deferred_overdue) > 100000"},
	{"deferred stuck: every deferred message counts, due or not", "SMSDeferredStuck",
		"max by (sms_class) (sms_deferred_overdue) > 0", "max by (sms_class) (sms_deferred) > 0"},
	{"deferred stuck: not per class", "SMSDeferredStuck",
		"max by (sms_class) (sms_deferred_overdue) > 0", "max(sms_deferred_overdue) > 0"},
	{"deferred stuck: for 30s", "SMSDeferredStuck",
		"(sms_deferred_overdue) > 0\n          for: 1m", "(sms_deferred_overdue) > 0\n          for: 30s"},
	{"deferred stuck: for 1m30s", "SMSDeferredStuck",
		"(sms_deferred_overdue) > 0\n          for: 1m", "(sms_deferred_overdue) > 0\n          for: 1m30s"},
	// The pumping guard's country surge and conversion.
	{"pumping: the country's rate against the same hour's, not the day before's", "SMSPumpingSuspected",
		"(rate(sms_guard_sends_total[1h] offset 1d))", "(rate(sms_guard_sends_total[1h]))"},
	{"pumping: over the day before's, not 5 times it (fires on steady traffic)", "SMSPumpingSuspected",
		"              > 5 * sum by (sms_class, country)", "              > 0.5 * sum by (sms_class, country)"},
	{"pumping: over 10 times the day before's", "SMSPumpingSuspected",
		"              > 5 * sum by (sms_class, country)", "              > 10 * sum by (sms_class, country)"},
	{"pumping: no floor (fires on a country of a few sends)", "SMSPumpingSuspected",
		"            and\n            sum by (sms_class, country) (increase(sms_guard_sends_total[1h])) >= 100\n", ""},
	{"recording rule: conversion over every class's counted sends", "recording-rules",
		"            sum by (sms_class) (rate(sms_guard_sends_total[30m]))", "            sum(rate(sms_guard_sends_total[30m]))"},
	// The opt-outs' share of an account's sends.
	{"opt-outs: over 5% (never fires on a campaign at 3%)", "SMSOptOutSpike",
		"            > 0.02\n            and on (sms_account)\n", "            > 0.05\n            and on (sms_account)\n"},
	{"opt-outs: over 1% (fires on 1.3%)", "SMSOptOutSpike",
		"            > 0.02\n            and on (sms_account)\n", "            > 0.01\n            and on (sms_account)\n"},
	{"opt-outs: no minimum (a few STOPs fire it)", "SMSOptOutSpike",
		"source=~\"inbound|provider\"}[15m])) >= 20", "source=~\"inbound|provider\"}[15m])) >= 0"},
	{"opt-outs: not per account", "SMSOptOutSpike",
		"            sum by (sms_account) (increase(sms_suppression_changes_total{action=\"add\",source=~\"inbound|provider\"}[15m]))\n            /\n            sum by (sms_account) (increase(sms_messages_total{sms_outcome=\"sent\"}[15m]))",
		"            sum(increase(sms_suppression_changes_total{action=\"add\",source=~\"inbound|provider\"}[15m]))\n            /\n            sum(increase(sms_messages_total{sms_outcome=\"sent\"}[15m]))"},
}

// TestAlertMutantsAreCaught runs promtool's rule tests on each mutant of
// the manifest and wants them to fail: the tests can tell an alert sized
// for its incident from one that is not. It needs promtool (PROMTOOL, the
// binary; .ci/run builds it at the module's Prometheus version and sets
// it) and is skipped without.
func TestAlertMutantsAreCaught(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		t.Skip("PROMTOOL is not set (.ci/run sets it to the promtool it builds)")
	}
	manifest, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, manifest []byte, testFile string) ([]byte, error) {
		dir := t.TempDir()
		rules, err := renderRulesFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		test, err := os.ReadFile(filepath.Join(alertTestsDir, testFile+".test.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"rules.yaml": rules, "t.test.yaml": test} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(promtool, "test", "rules", "t.test.yaml")
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	// The unmutated rules pass, or the mutants prove nothing. Each
	// promtool run is a process of its own and mostly one core's work:
	// they run in parallel, the mutants once every unmutated file passed.
	var files []string
	for _, m := range alertMutants {
		if !slices.Contains(files, m.testFile) {
			files = append(files, m.testFile)
		}
	}
	passed := t.Run("unmutated", func(t *testing.T) {
		for _, f := range files {
			t.Run(f, func(t *testing.T) {
				t.Parallel()
				if out, err := run(t, manifest, f); err != nil {
					t.Fatalf("%s.test.yaml fails on the manifest's own rules: %v\n%s", f, err, out)
				}
			})
		}
	})
	if !passed {
		t.FailNow()
	}
	for _, m := range alertMutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			if n := bytes.Count(manifest, []byte(m.old)); n != 1 {
				t.Fatalf("the text to mutate occurs %d times in %s, want 1:\n%s", n, ruleFile, m.old)
			}
			mutated := bytes.Replace(manifest, []byte(m.old), []byte(m.new), 1)
			out, err := run(t, mutated, m.testFile)
			if err == nil {
				t.Errorf("%s.test.yaml passes with the mutant: the tests cannot tell", m.testFile)
			} else if _, ok := err.(*exec.ExitError); !ok || !strings.Contains(string(out), "FAILED") {
				t.Errorf("promtool did not run the tests: %v\n%s", err, out)
			}
		})
	}
}
