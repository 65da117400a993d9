package demo

import (
	"bytes"
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
