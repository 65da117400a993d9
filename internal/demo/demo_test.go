package demo

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/provider"
)

// TestCampaignBodyTakesItsSegments: the body of n segments is GSM-7 and
// takes n segments, as --campaign-segments promises.
func TestCampaignBodyTakesItsSegments(t *testing.T) {
	for n := 1; n <= 10; n++ {
		if got, enc := provider.Segments(campaignBody(n)); got != n || enc != provider.GSM7 {
			t.Errorf("campaignBody(%d): %d segments in %v, want %d in GSM-7", n, got, enc, n)
		}
	}
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0.5, 6}, {0.99, 10}, {0, 1}}
	for _, tt := range tests {
		if got := quantile(ds, tt.q); got != tt.want {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of none = %v, want 0", got)
	}
}

// TestReportSaysWhyRedisHasNoFigures: without Redis's own figures the
// report says why on both of their lines.
func TestReportSaysWhyRedisHasNoFigures(t *testing.T) {
	var out bytes.Buffer
	r := Report{Instances: 2, Sent: map[admission.Class]int{admission.OTP: 1, admission.Marketing: 3}, Provider: "generic", RateUnit: "message", RedisStatsErr: "miniredis keeps no INFO commandstats", EmbeddedRedis: true}
	r.Print(&out, config.Settings{})
	for _, want := range []string{"2 instances, in-process Pub/Sub, embedded Redis (miniredis)", "sent                             4 (otp 1, marketing 3)",
		"script calls per sent message    n/a: miniredis keeps no INFO commandstats", "Redis executed per sent message  n/a"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestReportSaysTheNackReasons: the nacks' line names each reason and its
// count, in the reasons' order, and nothing after the ratio when there
// were none.
func TestReportSaysTheNackReasons(t *testing.T) {
	r := Report{Instances: 1, Sent: map[admission.Class]int{admission.OTP: 10, admission.Marketing: 30}, Provider: "generic", RateUnit: "message"}
	for _, tt := range []struct {
		nacked   int
		nackedBy map[string]int
		want     string
	}{
		{0, nil, "  nacks per sent message           0.000\n"},
		{0, map[string]int{}, "  nacks per sent message           0.000\n"},
		{3, map[string]int{"throttled": 2, "provider_retry": 1}, "  nacks per sent message           0.075 (provider_retry 1, throttled 2)\n"},
	} {
		r.Nacked, r.NackedBy = tt.nacked, tt.nackedBy
		var out bytes.Buffer
		r.Print(&out, config.Settings{})
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("nacks %v: report lacks %q:\n%s", tt.nackedBy, tt.want, out.String())
		}
	}
}

// TestReportHasALinePerClassOfThree: with three classes the report has a
// line per class, in priority order, and the delivery lines name the
// three; with the default two it has none of them.
func TestReportHasALinePerClassOfThree(t *testing.T) {
	three := []admission.Class{admission.OTP, Transactional, admission.Marketing}
	r := Report{Instances: 3, Provider: "generic", RateUnit: "message", Classes: three,
		Sent: map[admission.Class]int{admission.OTP: 10, Transactional: 20, admission.Marketing: 70},
		Rate: map[admission.Class]float64{admission.OTP: 5, Transactional: 10, admission.Marketing: 60},
		Latency: map[admission.Class]Latency{
			admission.OTP: {P50: 2 * time.Millisecond, P99: 9 * time.Millisecond}, Transactional: {P50: 3 * time.Millisecond, P99: 40 * time.Millisecond},
			admission.Marketing: {P50: 4 * time.Second, P99: 9 * time.Second}},
		Delivery: map[string]Delivery{"otp": {}, "transactional": {}, "marketing": {}},
	}
	var out bytes.Buffer
	r.Print(&out, config.Settings{})
	want := []string{
		"  total rate while busy            75.0 messages/s",
		"  class otp                        sent 10, 5.0/s while busy, publish→provider p50 / p99 2ms / 9ms\n" +
			"  class transactional              sent 20, 10.0/s while busy, publish→provider p50 / p99 3ms / 40ms\n" +
			"  class marketing                  sent 70, 60.0/s while busy, publish→provider p50 / p99 4s / 9s\n",
		"  otp           delivered / final receipts none\n  transactional delivered / final receipts none\n  marketing     delivered / final receipts none\n",
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report lacks %q:\n%s", w, out.String())
		}
	}

	out.Reset()
	r.Classes, r.Delivery = []admission.Class{admission.OTP, admission.Marketing}, map[string]Delivery{"otp": {}, "marketing": {}}
	r.Print(&out, config.Settings{})
	if strings.Contains(out.String(), "  class ") || !strings.Contains(out.String(), "  otp       delivered / final receipts none\n  marketing delivered") {
		t.Errorf("a report of two classes:\n%s", out.String())
	}
}

// TestThreeClassesAreValid: the settings of --classes 3 on the default
// rates (TARGET_RPS 90, MARKETING_RPS 70) and on MARKETING_RPS below a
// third of TARGET_RPS give the limiter classes it takes, transactional
// between otp and marketing.
func TestThreeClassesAreValid(t *testing.T) {
	for _, mkt := range []float64{70, 20} {
		var cfg config.Settings
		cfg.OTPTopic, cfg.OTPSubscription, cfg.MarketingTopic, cfg.MarketingSubscription = "sms-otp", "sms-otp-dispatcher", "sms-marketing", "sms-marketing-dispatcher"
		cfg.Name, cfg.TargetRPS, cfg.MarketingRPS, cfg.Burst, cfg.MaxSenders = "demo", 90, mkt, 5, 3
		cfg = threeClasses(cfg)
		lc := cfg.Limiter(cfg.Account)
		if err := lc.Validate(); err != nil {
			t.Errorf("MARKETING_RPS %g: %v", mkt, err)
		}
		var names []admission.Class
		for _, c := range cfg.ClassList() {
			names = append(names, c.Name)
		}
		if want := []admission.Class{admission.OTP, Transactional, admission.Marketing}; !slices.Equal(names, want) || !slices.Equal(cfg.Account.Classes, want) ||
			len(lc.Classes) != 3 || lc.Classes[1].RPS != min(30, mkt) || lc.Classes[0].Reserve != 90-mkt {
			t.Errorf("MARKETING_RPS %g: classes %v, account's %v, limiter's %+v", mkt, names, cfg.Account.Classes, lc.Classes)
		}
	}
}
