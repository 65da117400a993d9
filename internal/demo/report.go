package demo

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// Report is what one demo run measured.
type Report struct {
	Instances              int
	Elapsed                time.Duration
	Sent                   map[admission.Class]int
	Expired, DeadLettered  int
	Nacked                 int
	NackedBy               map[string]int
	Throttled              int // 429 answers of the simulator
	Provider               string
	RateUnit               string
	CampaignSegments       int                         // segments of each campaign body; OTP bodies are one
	MaxIn1s                int                         // most provider acceptances in any 1 s window
	MaxSegmentsIn1s        int                         // most accepted segments in any 1 s window
	Rate                   map[admission.Class]float64 // sends per second of each class while it was sending
	OTPLatencyP50, P99     time.Duration
	OTPWaitP50, OTPWaitP99 time.Duration
	// Classes are the run's classes in priority order, Latency each
	// one's publish→provider; with more than the default two, the report
	// has a line per class.
	Classes                []admission.Class
	Latency                map[admission.Class]Latency
	ScriptCalls, RedisCmds int64 // counted by the instances' clients
	EmbeddedRedis          bool
	// Redis's own figures (INFO commandstats since CONFIG RESETSTAT before
	// the traffic): script calls and every command executed, the scripts'
	// own included, less redisstats.NotWork. RedisStatsErr says why there
	// are none (miniredis keeps no such figures).
	RedisScripts, RedisExecuted int64
	RedisStatsErr               string
	// Published is how many messages the demo published, Deliveries how
	// many times pstest delivered them in all.
	Published, Deliveries int
	// Delivery is what the final receipts said, by class; nil: receipts
	// off.
	Delivery map[string]Delivery
	// Quiet is --quiet-hours's window, nil without it; Deferred the
	// campaign's messages it deferred, Released those sent after their
	// release, from ReleasedFrom to ReleasedUntil after the start.
	Quiet                       *QuietHours
	Deferred, Released          int
	ReleasedFrom, ReleasedUntil time.Duration
	// OptOut is what the recipients who replied STOP mid-run were sent;
	// nil without Options.OptOuts.
	OptOut *OptOut
	// Guard is what --guard's guard did; nil without Options.Guard.
	Guard *GuardFigures
}

// Latency is a class's publish→provider quantiles.
type Latency struct{ P50, P99 time.Duration }

// Print writes r as the demo's report, against the rates of cfg, the
// settings it ran with.
func (r Report) Print(w io.Writer, cfg config.Settings) {
	sent := total(r.Sent)
	per := func(n int64) float64 { return float64(n) / float64(max(sent, 1)) }
	redis := "real Redis (REDIS_URL)"
	if r.EmbeddedRedis {
		redis = "embedded Redis (miniredis)"
	}
	unit := "messages"
	if r.Provider != "generic" || r.RateUnit == "segment" {
		unit = "segments"
	}
	fmt.Fprintf(w, "\nsms-dispatcher demo: %d instances, in-process Pub/Sub, %s, %s provider simulator (strict 1 s window of CONTRACT_RPS=%g %s), rates in %ss\n",
		r.Instances, redis, r.Provider, cfg.ContractRPS, unit, r.RateUnit)
	fmt.Fprintf(w, "  elapsed                          %v\n", r.Elapsed.Round(100*time.Millisecond))
	fmt.Fprintf(w, "  sent                             %d (otp %d, marketing %d)\n", sent, r.Sent[admission.OTP], r.Sent[admission.Marketing])
	fmt.Fprintf(w, "  expired / dead-lettered          %d / %d\n", r.Expired, r.DeadLettered)
	// In the unit the rates count: with RATE_UNIT=segment, a campaign
	// message is CampaignSegments units.
	units := 1.0
	if r.RateUnit == "segment" {
		units = float64(max(r.CampaignSegments, 1))
	}
	mkt := r.Rate[admission.Marketing] * units
	others := 0.0 // the classes before marketing, one unit a message
	for c, rate := range r.Rate {
		if c != admission.Marketing {
			others += rate
		}
	}
	fmt.Fprintf(w, "  marketing rate while busy        %.1f %ss/s = %.2f of MARKETING_RPS %g (its cap)\n", mkt, r.RateUnit, mkt/cfg.MarketingRPS, cfg.MarketingRPS)
	fmt.Fprintf(w, "  total rate while busy            %.1f %ss/s of TARGET_RPS %g (OTP came at %.1f/s)\n", mkt+others, r.RateUnit, cfg.TargetRPS, r.Rate[admission.OTP])
	if len(r.Classes) > 2 {
		for _, c := range r.Classes {
			l := r.Latency[c]
			fmt.Fprintf(w, "  class %-26s sent %d, %.1f/s while busy, publish→provider p50 / p99 %v / %v\n",
				c, r.Sent[c], r.Rate[c], l.P50.Round(100*time.Microsecond), l.P99.Round(100*time.Microsecond))
		}
	}
	fmt.Fprintf(w, "  most accepted in any 1 s         %d messages, %d segments (contract %g, TARGET_RPS+BURST %g)\n", r.MaxIn1s, r.MaxSegmentsIn1s, cfg.ContractRPS, cfg.TargetRPS+float64(cfg.Burst))
	fmt.Fprintf(w, "  429 answers                      %d\n", r.Throttled)
	fmt.Fprintf(w, "  OTP publish→provider p50 / p99   %v / %v\n", r.OTPLatencyP50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond))
	fmt.Fprintf(w, "  OTP wait for a slot p50 / p99     %v / %v\n", r.OTPWaitP50.Round(10*time.Microsecond), r.OTPWaitP99.Round(10*time.Microsecond))
	fmt.Fprintf(w, "  nacks per sent message           %.3f%s\n", per(int64(r.Nacked)), reasons(r.NackedBy))
	fmt.Fprintf(w, "  admission calls per sent message %.2f (as the clients counted them)\n", per(r.ScriptCalls))
	fmt.Fprintf(w, "  Redis commands per sent message  %.2f sent by the clients (admission + send-once claim and record; heartbeats; a receipt's fold)\n", per(r.RedisCmds))
	if r.RedisStatsErr != "" {
		fmt.Fprintf(w, "  script calls per sent message    n/a: %s\n", r.RedisStatsErr)
		fmt.Fprintf(w, "  Redis executed per sent message  n/a\n")
	} else {
		fmt.Fprintf(w, "  script calls per sent message    %.2f (Redis's INFO commandstats: EVALSHA, EVAL, FCALL)\n", per(r.RedisScripts))
		// Less redisstats.NotWork: connection setup, PING, COMMAND and
		// CLUSTER of the clients, and the measurement's CONFIG and INFO.
		fmt.Fprintf(w, "  Redis executed per sent message  %.2f commands (Redis's count, the scripts' own included, less connection setup, PING and the measurement)\n",
			per(r.RedisExecuted))
	}
	fmt.Fprintf(w, "  deliveries per published message %.3f (Pub/Sub, of %d published)\n",
		float64(r.Deliveries)/float64(max(r.Published, 1)), r.Published)
	printDelivery(w, r.classList(), r.Delivery)
	printOptOut(w, r.OptOut)
	printGuard(w, r.Guard, sent)
	if q := r.Quiet; q != nil {
		fmt.Fprintf(w, "  quiet hours                      %s numbers' window %s in %s, opened %s UTC\n", q.Prefix, q.Hours, q.Zone, q.Opens.UTC().Format("15:04:05"))
		fmt.Fprintf(w, "  deferred / released and sent     %d / %d, sent from %v to %v after the start\n",
			r.Deferred, r.Released, r.ReleasedFrom.Round(100*time.Millisecond), r.ReleasedUntil.Round(100*time.Millisecond))
	}
}

// reasons is " (reason n, reason n...)" of counts, its reasons sorted; ""
// when there are none.
func reasons(counts map[string]int) string {
	if len(counts) == 0 {
		return ""
	}
	return " (" + countsText(counts) + ")"
}

// countsText is "key n, key n..." of counts, its keys sorted; "" when
// there are none.
func countsText(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// classList is r.Classes, or the default two when it names none.
func (r Report) classList() []admission.Class {
	if len(r.Classes) == 0 {
		return []admission.Class{admission.OTP, admission.Marketing}
	}
	return r.Classes
}

// quantile returns the q-quantile of ds (nearest rank), 0 if empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func p99(ds []time.Duration) time.Duration { return quantile(ds, 0.99) }
