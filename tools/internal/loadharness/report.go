package loadharness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/provider/providertest"
)

// binWidth is the width of the arrival histograms and the chart's bars.
const binWidth = 100 * time.Millisecond

// result is one row of the report: one strategy x mode x K run.
type result struct {
	Strategy string   `json:"strategy"`
	Mode     string   `json:"mode"`
	Senders  int      `json:"senders"`
	Seconds  float64  `json:"seconds"`
	Burst    int      `json:"burst,omitempty"` // gcra only
	Faults   []string `json:"faults,omitempty"`

	Requests  int `json:"requests"`   // every request the provider received
	Accepted  int `json:"accepted"`   // 2xx within the run
	Answered  int `json:"429s"`       // 429s the provider answered, what counts toward suspension
	First429s int `json:"first_429s"` // of those, answers to a message's first try
	// Late429s are the 429s answered after the run's first second, which
	// holds the campaign's start: fixed windows let two windows' worth
	// through in it (the one the start fell in, and the next one).
	Late429s  int `json:"429s_after_first_s"`
	Failed5xx int `json:"5xx"` // 5xx the provider answered
	// SuspendAfterS extrapolates the 429 rate: more than 300 429s in 10
	// minutes suspend the account. Nil means never (at most 300 per 10 min).
	SuspendAfterS *float64 `json:"suspend_after_s"`

	AcceptedRPS float64 `json:"accepted_rps"`
	Utilization float64 `json:"utilization"` // AcceptedRPS / TARGET_RPS (90)
	// CeilingRPS is what the load can use at most: TARGET_RPS, or for gcra
	// MARKETING_RPS plus the OTP rate if that is less.
	CeilingRPS float64 `json:"ceiling_rps"`

	MaxAccepted1s    int `json:"max_accepted_1s"`    // most accepted in any 1 s window
	MaxAccepted100ms int `json:"max_accepted_100ms"` // most accepted in any 100 ms window
	MaxAll1s         int `json:"max_all_1s"`         // most requests of any answer in any 1 s
	MaxAll100ms      int `json:"max_all_100ms"`

	OTPArrived int     `json:"otp_arrived"`
	OTPServed  int     `json:"otp_admitted"`
	OTPWaitP50 float64 `json:"otp_wait_p50_ms"`
	OTPWaitP99 float64 `json:"otp_wait_p99_ms"`
	// OTPWaitP50AtLeast and OTPWaitP99AtLeast say the quantile fell on an
	// OTP never admitted, whose wait is only known to last to the run's end.
	OTPWaitP50AtLeast bool `json:"otp_wait_p50_at_least,omitempty"`
	OTPWaitP99AtLeast bool `json:"otp_wait_p99_at_least,omitempty"`

	Admitted         int64   `json:"admitted"` // let through by the strategy
	RedisCalls       int64   `json:"redis_calls"`
	RedisCallsPerMsg float64 `json:"redis_calls_per_sent"`
	// Redis's own figures (INFO commandstats since a CONFIG RESETSTAT at
	// the run's start; none for v1): script calls (EVALSHA, EVAL, FCALL),
	// and every command executed, the scripts' own included, less
	// connection setup, PING and the measurement (redisstats.NotWork).
	// RedisStatsError says why there are none.
	RedisScripts        int64   `json:"redis_scripts"`
	RedisScriptsPerMsg  float64 `json:"redis_scripts_per_sent"`
	RedisExecuted       int64   `json:"redis_executed"`
	RedisExecutedPerMsg float64 `json:"redis_executed_per_sent"`
	RedisMicrosPerMsg   float64 `json:"redis_script_us_per_sent"` // Redis's time in script calls
	RedisStatsError     string  `json:"redis_stats_error,omitempty"`
	// gcra: the time from the limiter's admission returning to net/http
	// having written the request, over AdmitToWireCount sends.
	AdmitToWireP50   float64 `json:"admit_to_wire_p50_ms"`
	AdmitToWireP99   float64 `json:"admit_to_wire_p99_ms"`
	AdmitToWireCount int     `json:"admit_to_wire_count"`
	RedisErrors      int64   `json:"redis_errors"`
	Nacks            int64   `json:"nacks"`
	Denied           int64   `json:"denied"`
	NacksPerSent     float64 `json:"nacks_per_sent"`
	FallbackAdmits   int64   `json:"fallback_admits"`
	DeadLettered     int64   `json:"dead_lettered"`
	Spins            int64   `json:"spins"`
	SpinsPerSent     float64 `json:"spins_per_sent"`
	Retries          int64   `json:"retries_on_429"`
	Lost             int64   `json:"lost"` // old: acked after the last try failed

	// AcceptedPer100ms and RejectedPer100ms count arrivals per 100 ms from
	// the run's start (rejected: any answer but 2xx); the last bin holds
	// sends that finished after the run's end.
	AcceptedPer100ms []int `json:"accepted_per_100ms"`
	RejectedPer100ms []int `json:"rejected_per_100ms"`
}

// measure turns what a run recorded into its row.
func measure(cfg *Config, strat string, m mode, k int, start time.Time, sim *providertest.Simulator, st *counters, ld *load, redisCalls int64, own *redisStats) *result {
	end := start.Add(cfg.duration)
	r := &result{Strategy: strat, Mode: m.name, Senders: k, Seconds: cfg.duration.Seconds()}
	if strat == stratGCRA {
		r.Burst = cfg.burstFor(m)
	}
	for _, f := range cfg.faults {
		r.Faults = append(r.Faults, f.String())
	}

	bins := int(math.Ceil(float64(cfg.duration) / float64(binWidth)))
	r.AcceptedPer100ms = make([]int, bins+1)
	r.RejectedPer100ms = make([]int, bins+1)
	var all, accepted []time.Time
	for _, a := range sim.Arrivals() {
		all = append(all, a.At)
		ok := a.Status >= 200 && a.Status < 300
		b := min(max(int(a.At.Sub(start)/binWidth), 0), bins)
		if ok {
			accepted = append(accepted, a.At)
			r.AcceptedPer100ms[b]++
			if !a.At.Before(start) && a.At.Before(end) {
				r.Accepted++
			}
		} else {
			r.RejectedPer100ms[b]++
		}
		switch {
		case a.Status == http.StatusTooManyRequests:
			r.Answered++
			if a.At.Sub(start) >= time.Second {
				r.Late429s++
			}
		case a.Status >= 500:
			r.Failed5xx++
		}
	}
	r.Requests = len(all)
	r.First429s = int(st.first429.Load())
	if rate := float64(r.Answered) / cfg.duration.Seconds(); rate*suspendWindow.Seconds() > suspendAfter429s {
		s := suspendAfter429s / rate
		r.SuspendAfterS = &s
	}

	r.AcceptedRPS = float64(r.Accepted) / cfg.duration.Seconds()
	r.Utilization = r.AcceptedRPS / cfg.target
	r.CeilingRPS = cfg.target
	if strat == stratGCRA {
		r.CeilingRPS = min(cfg.target, cfg.marketing+cfg.otpRate)
	}
	r.MaxAccepted1s = providertest.MaxInAnyWindow(accepted, time.Second)
	r.MaxAccepted100ms = providertest.MaxInAnyWindow(accepted, 100*time.Millisecond)
	r.MaxAll1s = providertest.MaxInAnyWindow(all, time.Second)
	r.MaxAll100ms = providertest.MaxInAnyWindow(all, 100*time.Millisecond)

	waits := st.otpWaitsAt(ld.arrivals(), end)
	r.OTPArrived, r.OTPServed = len(waits), served(waits)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50, p99 := percentile(waits, 0.50), percentile(waits, 0.99)
	r.OTPWaitP50, r.OTPWaitP50AtLeast = ms(p50.Duration), p50.censored
	r.OTPWaitP99, r.OTPWaitP99AtLeast = ms(p99.Duration), p99.censored

	sent := int64(r.Accepted)
	r.Admitted = st.admitted.Load()
	r.RedisCalls = redisCalls
	r.RedisCallsPerMsg = ratio(redisCalls, sent)
	switch {
	case own == nil: // v1 uses no Redis
	case own.err != nil:
		r.RedisStatsError = own.err.Error()
	default:
		r.RedisScripts, r.RedisExecuted = own.stats.Scripts(), own.stats.Executed()
		r.RedisScriptsPerMsg, r.RedisExecutedPerMsg = ratio(r.RedisScripts, sent), ratio(r.RedisExecuted, sent)
		r.RedisMicrosPerMsg = ratio(own.micros, sent)
	}
	if strat == stratGCRA {
		p50, p99, n := st.admitToWireQuantiles()
		r.AdmitToWireP50, r.AdmitToWireP99, r.AdmitToWireCount = ms(p50), ms(p99), n
	}
	r.RedisErrors = st.redisErrors.Load()
	r.Nacks = st.nacks.Load()
	r.Denied = st.denied.Load()
	r.NacksPerSent = ratio(r.Nacks, sent)
	r.FallbackAdmits = st.fallback.Load()
	r.DeadLettered = st.deadLettered.Load()
	r.Spins = st.spins.Load()
	r.SpinsPerSent = ratio(r.Spins, sent)
	r.Retries = st.retries.Load()
	r.Lost = st.lost.Load()
	return r
}

// msText renders a wait in milliseconds, ">" first when it is a lower bound.
func msText(ms float64, atLeast bool) string {
	s := strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	if atLeast {
		s = ">" + s
	}
	return s
}

// suspendText renders SuspendAfterS: seconds, or "never".
func (r *result) suspendText() string {
	if r.SuspendAfterS == nil {
		return "never"
	}
	return strconv.FormatFloat(*r.SuspendAfterS, 'f', 1, 64) + "s"
}

// writeTable writes the rows as an aligned text table with a legend.
func writeTable(w io.Writer, cfg *Config, rows []*result) error {
	fmt.Fprintf(w, "loadtest: %v per run, skew %v, OTP %g/s, %d+%d workers per sender; contract %d/s, TARGET_RPS %g, MARKETING_RPS %g",
		cfg.duration, cfg.skew, cfg.otpRate, cfg.mktWorkers, cfg.otpWorkers, contractRPS, cfg.target, cfg.marketing)
	if cfg.jitter > 0 {
		fmt.Fprintf(w, "; arrival jitter up to %v", cfg.jitter)
	}
	if len(cfg.faults) > 0 {
		var fs []string
		for _, f := range cfg.faults {
			fs = append(fs, f.String())
		}
		fmt.Fprintf(w, "; faults %s", strings.Join(fs, ", "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmode\tK\t429s\t1st try\tafter 1s\tsuspended in\tsent/s\tutil\tmax 1s\tmax 100ms\tOTPs admitted\tOTP p50\tOTP p99\tredis/sent\tscripts/sent\texecuted/sent\tredis µs/sent\tadmit→wire p50/p99\tnacks/sent\tspins/sent\tlost\t")
	for _, r := range rows {
		nacks, spins := "-", "-"
		if r.Strategy == stratGCRA {
			nacks = strconv.FormatFloat(r.NacksPerSent, 'f', 3, 64)
		} else {
			spins = strconv.FormatFloat(r.SpinsPerSent, 'f', 1, 64)
		}
		redis, scripts, executed, micros, wire := "-", "-", "-", "-", "-"
		if r.Strategy != stratV1 {
			redis = strconv.FormatFloat(r.RedisCallsPerMsg, 'f', 2, 64)
		}
		if r.Strategy != stratV1 && r.RedisStatsError == "" {
			scripts = strconv.FormatFloat(r.RedisScriptsPerMsg, 'f', 2, 64)
			executed = strconv.FormatFloat(r.RedisExecutedPerMsg, 'f', 2, 64)
			micros = strconv.FormatFloat(r.RedisMicrosPerMsg, 'f', 1, 64)
		}
		if r.AdmitToWireCount > 0 {
			wire = fmt.Sprintf("%.2f/%.2fms", r.AdmitToWireP50, r.AdmitToWireP99)
		}
		strategy := r.Strategy
		if r.Burst > 0 {
			strategy += fmt.Sprintf(" (burst %d)", r.Burst)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%.1f\t%.3f\t%d (%d)\t%d (%d)\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n",
			strategy, r.Mode, r.Senders, r.Answered, r.First429s, r.Late429s, r.suspendText(),
			r.AcceptedRPS, r.Utilization,
			r.MaxAccepted1s, r.MaxAll1s, r.MaxAccepted100ms, r.MaxAll100ms,
			r.OTPServed, r.OTPArrived, msText(r.OTPWaitP50, r.OTPWaitP50AtLeast), msText(r.OTPWaitP99, r.OTPWaitP99AtLeast),
			redis, scripts, executed, micros, wire, nacks, spins, r.Lost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprint(w, `
429s: answered 429 (all tries); 1st try: of those, to a message's first try; after 1s: after the run's first second,
  which holds the campaign's start (a fixed window lets the window the start fell in and the next one both fill in it).
suspended in: 300 / (429s per second), the incident analysis's extrapolation of "more than 300 429s in 10 minutes"; never if under 0.5/s.
sent/s, util: accepted by the provider within the run, and that over TARGET_RPS.
max 1s, max 100ms: most accepted in any window of that length at any phase (in brackets: all requests); contract 100 and 10.
OTPs admitted: of those arrived. OTP p50/p99: queue arrival to first admission; ">" when the quantile is an OTP never
  admitted (its wait lasts at least to the run's end). redis/sent: Redis commands the clients sent (handshakes left out)
  per accepted message. scripts/sent, executed/sent: Redis's own count (INFO commandstats since CONFIG RESETSTAT at the
  run's start, the whole server's): script calls (EVALSHA, EVAL, FCALL), and every command executed, the scripts' own
  included, less connection setup, PING and the measurement; redis µs/sent: Redis's time in those script calls per
  accepted message. admit→wire: gcra, from the limiter's admission returning to
  the request written on the wire (net/http/httptrace WroteRequest), p50/p99.
nacks/sent: gcra, messages handed back (denied, 429, 5xx); spins/sent: old strategies, 1 ms sleeps after a denial.
lost: old strategies, messages acked although the last try failed.
`)
	return err
}

// jsonReport is the file --json writes.
type jsonReport struct {
	DurationS    float64 `json:"duration_s"`
	SkewMs       float64 `json:"skew_ms"`
	OTPRate      float64 `json:"otp_rate"`
	TargetRPS    float64 `json:"target_rps"`
	MarketingRPS float64 `json:"marketing_rps"`
	ContractRPS  int     `json:"contract_rps"`
	// ArrivalJitterMs is --arrival-jitter: the most each request was held
	// in front of the provider.
	ArrivalJitterMs float64   `json:"arrival_jitter_ms"`
	BinMs           int64     `json:"bin_ms"`
	Rows            []*result `json:"rows"`
}

func writeJSON(w io.Writer, cfg *Config, rows []*result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonReport{
		DurationS: cfg.duration.Seconds(), SkewMs: float64(cfg.skew.Microseconds()) / 1000,
		OTPRate: cfg.otpRate, TargetRPS: cfg.target, MarketingRPS: cfg.marketing, ContractRPS: contractRPS,
		ArrivalJitterMs: float64(cfg.jitter.Microseconds()) / 1000, BinMs: binWidth.Milliseconds(), Rows: rows,
	})
}
