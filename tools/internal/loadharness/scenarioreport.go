package loadharness

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/provider/providertest"
)

// scenarioResult is one --scenario row.
type scenarioResult struct {
	Scenario          string
	Senders           int // K
	Duration          time.Duration
	Target, Marketing float64
	Burst             int
	OTPRate           float64
	ProviderJitter    time.Duration // senders: the limiter's ArrivalJitter
	MaxSegments       int           // senders: MAX_SEGMENTS, the longest body

	Requests      int     // every request the provider received
	Accepted      int     // messages accepted within the run
	AcceptedUnits int     // their segments
	MsgsPerS      float64 // Accepted per second
	UnitsPerS     float64 // AcceptedUnits per second
	// Utilization is UnitsPerS over the provider's limit (25 segments/s
	// for senders, 60 messages/s for adaptive).
	Utilization      float64
	Answered429      int // every 429 the provider answered, suspended ones included
	Throttled        int // Stats().Throttled: over the account's rate
	SenderThrottled  int // Stats().SenderThrottled: over a sender's rate
	Suspensions      int
	SuspendedAnswers int
	// Max429s10m is the most 429s in any 10 minutes, what the provider's
	// suspension (more than 300) counts.
	Max429s10m int

	// MaxAccount1s is the most units (segments for senders) accepted in any
	// sliding second; MaxSender1s the most any one sender had, MaxSenderFrom
	// which (providertest.MaxInWindow).
	MaxAccount1s  int
	MaxSender1s   int
	MaxSenderFrom string
	// PerSender is the segments accepted within the run by each sender of
	// the pool; NoPool counts accepted messages from no sender of it.
	PerSender map[string]int
	NoPool    int
	// ScriptsPerSent and CommandsPerSent are Redis's own count over the
	// run (INFO commandstats) per accepted message (senders only);
	// HasStats is false when they could not be read.
	ScriptsPerSent, CommandsPerSent float64
	MicrosPerSent                   float64 // Redis's time in script calls per accepted message
	HasStats                        bool

	OTPArrived, OTPServed int
	OTPWaitP99            float64 // ms
	OTPWaitP99AtLeast     bool
	Nacks, Denied         int64
	FallbackAdmits        int64
	RedisErrors           int64

	// adaptive
	Tail              time.Duration
	Tail429s          int
	TailMsgsPerS      float64
	TailShare         float64        // TailMsgsPerS / 60
	Last429           *time.Duration // since the run's start; nil: none
	Learned           *admission.Learned
	LearnedErr        string
	PodsLearned       []float64 // each sender's Limiter.State().LearnedRPS at the end
	Trajectory        []float64 // the rate in force every trajectoryEvery from the start
	Changes           []learnedSample
	LearnedReadErrors int
	Failures          []string // the adaptive criterion's failures; empty: passed
}

// measureScenario turns what a scenario run recorded into its row (the
// learned rate's figures excepted).
func measureScenario(sc scenario, k int, cfg *Config, start time.Time, sim *providertest.Simulator, st *counters, ld *load) *scenarioResult {
	end := start.Add(sc.duration)
	r := &scenarioResult{Scenario: sc.name, Senders: k, Duration: sc.duration, Target: sc.target, Marketing: sc.marketing,
		Burst: sc.burst, OTPRate: sc.otpRate}
	limit := float64(adaptiveLimit)
	if sc.name == scenSenders {
		limit = poolAccountLimit
		r.ProviderJitter, r.MaxSegments = cfg.providerJitter, sc.maxSegments
		r.PerSender = map[string]int{}
		for i := range cfg.pool {
			r.PerSender[poolFrom(i)] = 0
		}
	}
	arrivals := sim.Arrivals()
	r.Requests = len(arrivals)
	if sc.name == scenAdaptive {
		r.Tail = sc.tail()
	}
	tailFrom := end.Add(-r.Tail)
	var throttles []time.Time
	tailAccepted := 0
	for _, a := range arrivals {
		accepted := a.Outcome == "accepted"
		in := !a.At.Before(start) && a.At.Before(end)
		if accepted && in {
			r.Accepted++
			r.AcceptedUnits += max(a.Segments, 1)
			if r.PerSender != nil {
				if _, ok := r.PerSender[a.From]; ok {
					r.PerSender[a.From] += max(a.Segments, 1)
				} else {
					r.NoPool++
				}
			}
			if sc.name == scenAdaptive && !a.At.Before(tailFrom) {
				tailAccepted++
			}
		}
		if a.Status == http.StatusTooManyRequests {
			r.Answered429++
			throttles = append(throttles, a.At)
			if d := a.At.Sub(start); r.Last429 == nil || d > *r.Last429 {
				r.Last429 = &d
			}
			if sc.name == scenAdaptive && !a.At.Before(tailFrom) {
				r.Tail429s++ // in the tail, or after the run's end
			}
		}
	}
	secs := sc.duration.Seconds()
	r.MsgsPerS = float64(r.Accepted) / secs
	r.UnitsPerS = float64(r.AcceptedUnits) / secs
	r.Utilization = r.UnitsPerS / limit
	stats := sim.Stats()
	r.Throttled, r.SenderThrottled = stats.Throttled, stats.SenderThrottled
	r.Suspensions, r.SuspendedAnswers = stats.Suspensions, stats.SuspendedAnswers
	r.Max429s10m = providertest.MaxInAnyWindow(throttles, 10*time.Minute)
	segments := sc.name == scenSenders
	r.MaxAccount1s, _ = providertest.MaxInWindow(arrivals, providertest.Window{Length: time.Second, Segments: segments})
	if segments {
		r.MaxSender1s, r.MaxSenderFrom = providertest.MaxInWindow(arrivals, providertest.Window{Length: time.Second, Segments: true, BySender: true})
	}

	waits := st.otpWaitsAt(ld.arrivals(), end)
	r.OTPArrived, r.OTPServed = len(waits), served(waits)
	p99 := percentile(waits, 0.99)
	r.OTPWaitP99, r.OTPWaitP99AtLeast = float64(p99.Microseconds())/1000, p99.censored
	r.Nacks, r.Denied = st.nacks.Load(), st.denied.Load()
	r.FallbackAdmits, r.RedisErrors = st.fallback.Load(), st.redisErrors.Load()

	if sc.name == scenAdaptive {
		if r.Tail > 0 {
			r.TailMsgsPerS = float64(tailAccepted) / r.Tail.Seconds()
		}
		r.TailShare = r.TailMsgsPerS / adaptiveLimit
		if r.Answered429 > adaptiveMax429s {
			r.Failures = append(r.Failures, fmt.Sprintf("%d 429s in all, more than %d", r.Answered429, adaptiveMax429s))
		}
		if r.Tail429s > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d 429s in the last %v", r.Tail429s, r.Tail))
		}
		if r.TailShare < adaptiveMinShare {
			r.Failures = append(r.Failures, fmt.Sprintf("%.1f/s sent over the last %v, %.3f of %d/s, below %.2f", r.TailMsgsPerS, r.Tail, r.TailShare, adaptiveLimit, adaptiveMinShare))
		}
	}
	return r
}

// learnedSeries fills the trajectory (the rate in force every
// trajectoryEvery, the target while none is learned) and the changes
// (each sample whose rate or mode differs from the one before) from
// samples.
func (r *scenarioResult) learnedSeries(samples []learnedSample, sc scenario) {
	inForce := func(s learnedSample) float64 {
		if s.RPS == 0 {
			return sc.target
		}
		return s.RPS
	}
	i := 0
	for mark := time.Duration(0); mark <= sc.duration; mark += trajectoryEvery {
		for i+1 < len(samples) && samples[i+1].At <= mark {
			i++
		}
		if len(samples) > 0 {
			r.Trajectory = append(r.Trajectory, inForce(samples[i]))
		}
	}
	for j, s := range samples {
		if j == 0 || s.RPS != samples[j-1].RPS || s.Mode != samples[j-1].Mode {
			r.Changes = append(r.Changes, s)
		}
	}
}

// passed reports whether an adaptive row met its criterion.
func (r *scenarioResult) passed() bool { return len(r.Failures) == 0 }

// rateText renders a rate: at most two decimals, no trailing zeros.
func rateText(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// trajectoryText renders the trajectory compactly: each rate once, with
// ×n when it held for n samples in a row.
func trajectoryText(ts []float64) string {
	if len(ts) == 0 {
		return "(no reads)"
	}
	var parts []string
	for i := 0; i < len(ts); {
		j := i
		for j < len(ts) && ts[j] == ts[i] {
			j++
		}
		p := rateText(ts[i])
		if j-i > 1 {
			p += fmt.Sprintf("×%d", j-i)
		}
		parts = append(parts, p)
		i = j
	}
	return strings.Join(parts, "→")
}

// changesText renders each change of the learned rate with its time.
func changesText(cs []learnedSample, target float64) string {
	var parts []string
	for _, c := range cs {
		v, mode := rateText(c.RPS), c.Mode
		if c.RPS == 0 {
			v, mode = rateText(target), "none learned"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", c.At.Round(100*time.Millisecond), v, mode))
	}
	return strings.Join(parts, ", ")
}

// startupReach is the dispatcher's start-up check on a pool row: the most
// segments a provider counting a sliding second can see,
// TARGET_RPS × (1 s + J) + BURST + MAX_SEGMENTS - 1.
func (r *scenarioResult) startupReach() float64 {
	return r.Target + r.Target*r.ProviderJitter.Seconds() + float64(r.Burst) + float64(r.MaxSegments) - 1
}

// writeScenarioTable writes the rows, each scenario's in a table of its
// own with a legend, and the adaptive rows' verdicts.
func writeScenarioTable(w io.Writer, cfg *Config, rows []*scenarioResult) error {
	for _, sc := range cfg.scenarios {
		var these []*scenarioResult
		for _, r := range rows {
			if r.Scenario == sc.name {
				these = append(these, r)
			}
		}
		if len(these) == 0 {
			continue
		}
		var err error
		switch sc.name {
		case scenSenders:
			err = writeSendersTable(w, cfg, sc, these)
		case scenAdaptive:
			err = writeAdaptiveTable(w, cfg, sc, these)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func writeSendersTable(w io.Writer, cfg *Config, sc scenario, rows []*scenarioResult) error {
	reach := rows[0].startupReach()
	verdict := "the dispatcher starts with it"
	if reach > poolAccountLimit {
		verdict = "above 25: the dispatcher refuses to start with it"
	}
	fmt.Fprintf(w, "scenario senders: %v per run, gcra; account %d segments per sliding 1 s, %d senders of %d segments per sliding 1 s each, bodies of 1-%d segments (MAX_SEGMENTS %d), RATE_UNIT=segment; "+
		"TARGET_RPS %g, MARKETING_RPS %g, BURST %d, PROVIDER_ARRIVAL_JITTER %v; OTP %g/s, %d+%d workers per sender\n",
		sc.duration, poolAccountLimit, cfg.pool, poolSenderLimit, sc.maxSegments, sc.maxSegments,
		sc.target, sc.marketing, sc.burst, cfg.providerJitter, sc.otpRate, cfg.mktWorkers, cfg.otpWorkers)
	fmt.Fprintf(w, "start-up rule: TARGET_RPS × (1s + J) + BURST + MAX_SEGMENTS - 1 = %g × (1s + %v) + %d + %d - 1 = %s segments (%s); utilization at most %s/%d = %.3f; "+
		"the pool's own rates: %d × %d / (1s + J) = %s segments/s\n",
		sc.target, cfg.providerJitter, sc.burst, sc.maxSegments, rateText(reach), verdict, rateText(sc.target), poolAccountLimit, sc.target/poolAccountLimit,
		cfg.pool, poolSenderLimit, rateText(float64(cfg.pool*poolSenderLimit)/(1+cfg.providerJitter.Seconds())))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "K\tsegments/s\tutil of 25\tmsgs/s\taccount 429s\tsender 429s\tmax account 1s\tmax sender 1s\tsenders used\tper sender min/max\tno sender\tOTPs admitted\tOTP p99\tnacks/sent\tscripts/sent\tcommands/sent\tredis µs/sent\t")
	for _, r := range rows {
		lo, hi, used := math.MaxInt, 0, 0
		for _, n := range r.PerSender {
			lo, hi = min(lo, n), max(hi, n)
			if n > 0 {
				used++
			}
		}
		if len(r.PerSender) == 0 {
			lo = 0
		}
		scripts, commands, micros := "-", "-", "-"
		if r.HasStats {
			scripts, commands, micros = fmt.Sprintf("%.2f", r.ScriptsPerSent), fmt.Sprintf("%.2f", r.CommandsPerSent), fmt.Sprintf("%.1f", r.MicrosPerSent)
		}
		fmt.Fprintf(tw, "%d\t%.2f\t%.3f\t%.2f\t%d\t%d\t%d\t%d (%s)\t%d/%d\t%d/%d seg\t%d\t%d/%d\t%s\t%.3f\t%s\t%s\t%s\t\n",
			r.Senders, r.UnitsPerS, r.Utilization, r.MsgsPerS, r.Throttled, r.SenderThrottled,
			r.MaxAccount1s, r.MaxSender1s, r.MaxSenderFrom, used, cfg.pool, lo, hi, r.NoPool,
			r.OTPServed, r.OTPArrived, msText(r.OTPWaitP99, r.OTPWaitP99AtLeast), ratio(r.Nacks, int64(r.Accepted)), scripts, commands, micros)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, `
segments/s, util of 25: segments the provider accepted within the run per second, and that over the account's 25.
account 429s, sender 429s: the simulator's over-rate answers for the account's window (Stats().Throttled) and for a
  sender's (Stats().SenderThrottled); suspension is off, as in the matrix.
max account 1s, max sender 1s: most accepted segments in any sliding second (providertest.MaxInWindow), the account's
  (limit 25) and the busiest sender's (limit %d; in brackets, which). senders used: senders of the pool that carried
  traffic; per sender min/max: segments each carried in the run; no sender: accepted messages from no sender of the pool.
OTP p99: queue arrival to first admission. nacks/sent: messages handed back (denied, 429) per accepted message.
scripts/sent, commands/sent, redis µs/sent: Redis's script calls, commands (a script's own included) and time in
  script calls over the run (INFO commandstats) per accepted message: flat in the pool's size.

`, poolSenderLimit)
	return err
}

func writeAdaptiveTable(w io.Writer, cfg *Config, sc scenario, rows []*scenarioResult) error {
	fmt.Fprintf(w, "scenario adaptive: %v per run, gcra; provider allows %d messages per sliding 1 s (Retry-After 1s, suspends after more than %d 429s in 10 min); "+
		"TARGET_RPS %g, MARKETING_RPS %g, BURST %d, learned rate on (MinRPS %d, Step %v, ProbeInterval %v); OTP %g/s, %d+%d workers per sender\n",
		sc.duration, adaptiveLimit, suspendAfter429s, sc.target, sc.marketing, sc.burst, adaptiveMinRPS, cfg.adaptiveStep, admission.DefaultProbeInterval,
		sc.otpRate, cfg.mktWorkers, cfg.otpWorkers)
	tail := sc.tail()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "K\t429s\tmost in 10 min\tsuspended\tlast 429 at\t429s last %v\tsent/s last %v\tof 60\tsent/s all\tlearned at end\tpods' view\tnacks/sent\tverdict\t\n", tail, tail)
	for _, r := range rows {
		last := "none"
		if r.Last429 != nil {
			last = r.Last429.Round(10 * time.Millisecond).String()
		}
		learned := "unread: " + r.LearnedErr
		if r.Learned != nil {
			learned = learnedText(*r.Learned, r.Target)
		}
		var pods []string
		for _, v := range r.PodsLearned {
			if v == 0 {
				pods = append(pods, "-")
			} else {
				pods = append(pods, rateText(v))
			}
		}
		verdict := "PASS"
		if !r.passed() {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d of %d\t%d\t%s\t%d\t%.2f\t%.3f\t%.2f\t%s\t%s\t%.3f\t%s\t\n",
			r.Senders, r.Answered429, r.Max429s10m, suspendAfter429s, r.Suspensions, last, r.Tail429s, r.TailMsgsPerS, r.TailShare,
			r.MsgsPerS, learned, strings.Join(pods, "/"), ratio(r.Nacks, int64(r.Accepted)), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(w, "K=%d learned rate every %v: %s\n", r.Senders, trajectoryEvery, trajectoryText(r.Trajectory))
		fmt.Fprintf(w, "K=%d learned rate changes (read every %v): %s\n", r.Senders, learnedEvery, changesText(r.Changes, r.Target))
		if r.LearnedReadErrors > 0 {
			fmt.Fprintf(w, "K=%d: %d reads of the learned rate failed\n", r.Senders, r.LearnedReadErrors)
		}
		criteria := []string{
			fmt.Sprintf("429s in all %d ≤ %d: %s", r.Answered429, adaptiveMax429s, okText(r.Answered429 <= adaptiveMax429s)),
			fmt.Sprintf("429s in the last %v %d = 0: %s", r.Tail, r.Tail429s, okText(r.Tail429s == 0)),
			fmt.Sprintf("sent/s over the last %v %.2f ≥ %.2f × %d = %.1f: %s", r.Tail, r.TailMsgsPerS, adaptiveMinShare, adaptiveLimit, adaptiveMinShare*adaptiveLimit, okText(r.TailShare >= adaptiveMinShare)),
		}
		verdict := "PASS"
		if !r.passed() {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "K=%d criterion: %s; %s\n", r.Senders, strings.Join(criteria, "; "), verdict)
	}
	_, err := fmt.Fprintf(w, `
429s: every 429 the provider answered (after the run's end too); most in 10 min: what its suspension counts (more than %d
  suspend); suspended: times it suspended the account. last 429 at: since the run's start.
sent/s last %v, of 60: messages the provider accepted per second over the run's last %v, and that over the %d it allows.
learned at end: Limiter.Learned (the rate in force, its mode, and the search's last good and last throttled rates);
  pods' view: each sender's Limiter.State().LearnedRPS, what its last Redis answer said ("-": none learned).
learned rate every %v: the rate in force from the run's start (the target while none is learned); ×n: n readings in a row.

`, suspendAfter429s, tail, tail, adaptiveLimit, trajectoryEvery)
	return err
}

// learnedText renders a Learned state.
func learnedText(l admission.Learned, target float64) string {
	if l.RPS == 0 {
		return fmt.Sprintf("none (target %s holds)", rateText(target))
	}
	return fmt.Sprintf("%s %s (good %s, throttled %s)", rateText(l.RPS), l.Mode, rateText(l.Low), rateText(l.High))
}

// scenarioVerdict returns an error wrapping errScenarioFailed when an
// adaptive row failed its criterion.
func scenarioVerdict(rows []*scenarioResult) error {
	var failed []string
	for _, r := range rows {
		if r.Scenario == scenAdaptive && !r.passed() {
			failed = append(failed, fmt.Sprintf("adaptive K=%d: %s", r.Senders, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
