package loadharness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/provider/providertest"
)

// The backlog scenario is the classes scenario's stack (runClassesTraffic)
// with today's two classes under a long campaign on a provider that
// allows less than TARGET_RPS, the learned rate on: backlogInstances
// processes, one account at TARGET_RPS classesTarget and MARKETING_RPS
// classesMktRPS, a provider allowing backlogLimit in any sliding second
// (Retry-After 1 s), a marketing backlog of classesBacklog, then OTP at
// backlogOTPRate for the run's length (backlogDuration). It measures the
// OTPs' publish→acceptance, all of them and those clear of a 429's
// Retry-After (and of the ramp-up), and lists the slow ones by their
// publishing. Rows --code: before, the Pub/Sub clients ping every pull
// stream as the client does, so that pstest stalls every 30 s
// (topology.emulatorPings says why); after, topology.NewClient's.
const (
	scenBacklog = "backlog"

	backlogInstances = 3
	backlogDuration  = 5 * time.Minute
	backlogOTPRate   = 2.0
	backlogLimit     = 60

	// backlogMaxOTPP99 is the criterion of the after row: OTP p99
	// publish→acceptance clear of a 429's Retry-After.
	backlogMaxOTPP99 = 50 * time.Millisecond
	// backlogSlowShown bounds the slow OTPs a row lists.
	backlogSlowShown = 12
	// backlogRetryAfter is the simulator's Retry-After: a 429 stops every
	// pod this long.
	backlogRetryAfter = time.Second
)

// checkBacklog checks the backlog scenario's settings of c (set: the flags
// given) and sets its duration and OTP rate.
func checkBacklog(c *Config, set map[string]bool) error {
	for _, name := range classesExcludes {
		if set[name] {
			return fmt.Errorf("--%s does not apply to --scenario %s (%d dispatchers, one account at TARGET_RPS %d, MARKETING_RPS %d, BURST %d)",
				name, scenBacklog, backlogInstances, classesTarget, classesMktRPS, classesBurst)
		}
	}
	c.backlogDuration, c.backlogOTPRate = backlogDuration, backlogOTPRate
	if set["duration"] {
		c.backlogDuration = c.duration
	}
	if set["otp-rate"] {
		c.backlogOTPRate = c.otpRate
	}
	switch {
	case c.backlogDuration < 10*time.Second || c.backlogDuration > 30*time.Minute:
		return fmt.Errorf("--duration must be 10s to 30m with --scenario %s, got %v", scenBacklog, c.backlogDuration)
	case c.backlogOTPRate <= 0 || c.backlogOTPRate > 20:
		return fmt.Errorf("--otp-rate must be in (0, 20] with --scenario %s, got %v", scenBacklog, c.backlogOTPRate)
	}
	return nil
}

// backlogSpecs returns the rows cfg asks for, in --code's order.
func backlogSpecs(cfg *Config) []classesSpec {
	var out []classesSpec
	for _, code := range cfg.codes {
		out = append(out, classesSpec{code: code, duration: cfg.backlogDuration, rampUp: classesRampUp, drain: classesDrain,
			backlog: classesBacklog, otpRate: cfg.backlogOTPRate, instances: backlogInstances,
			limit: backlogLimit, adaptive: true, pings: code == codeBefore})
	}
	return out
}

// runBacklogRows runs every backlog row of cfg on the Redis at redisURL,
// one after the other, and returns them in that order.
func runBacklogRows(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) ([]*backlogRow, error) {
	specs := backlogSpecs(cfg)
	var rows []*backlogRow
	for i, s := range specs {
		fmt.Fprintf(progress, "loadtest: run %d/%d: scenario backlog, code %s (%v)\n", i+1, len(specs), s.code, s.duration)
		run, err := runClassesTraffic(ctx, cfg, redisURL, s, progress)
		if err != nil {
			return nil, fmt.Errorf("run scenario backlog %s: %w", s.code, err)
		}
		rows = append(rows, measureBacklog(s, run.lg, run.arrivals))
	}
	return rows, nil
}

// backlogRow is one backlog row: the OTPs' waits, all and clear of a
// 429's Retry-After, the 429s and marketing's rate.
type backlogRow struct {
	Spec            classesSpec
	Code            string
	Published, Sent int           // OTPs
	P50, P99, Max   wait          // publish→first acceptance of every OTP (censored when unsent)
	Clear           int           // OTPs published after the ramp-up whose wait overlaps no Retry-After
	ClearP50        wait          // ... their median,
	ClearP99        wait          // p99
	ClearMax        wait          // and most
	Throttled       int           // answers of 429
	LastThrottle    time.Duration // from the feed's start; 0: none
	MarketingRate   float64       // marketing accepted per second after the ramp-up
	Slow            []slowOTP     // the slowest backlogSlowShown OTPs clear of a Retry-After over backlogMaxOTPP99, by publishing
	SlowCount       int           // all of them
	Failures        []string      // the after row's criterion missed
}

// slowOTP is one OTP over the criterion: when it was published (from the
// feed's start), its wait, and where the wait went: publish→a dispatcher
// (Pull), →its slot (Slot), 0 when not known.
type slowOTP struct {
	At         time.Duration
	Wait       wait
	Pull, Slot time.Duration
}

// measureBacklog turns a backlog run into its row: lg and the simulator's
// arrivals.
func measureBacklog(s classesSpec, lg *classesLog, arrivals []providertest.Arrival) *backlogRow {
	lg.mu.Lock() // dispatchers left behind (runClassesTraffic) may still observe
	defer lg.mu.Unlock()
	r := &backlogRow{Spec: s, Code: s.code}
	from := lg.start.Add(s.rampUp)
	first := map[string]time.Time{}
	var throttles []time.Time
	marketing := 0
	for _, a := range arrivals {
		switch {
		case a.Outcome == "throttled":
			throttles = append(throttles, a.At)
		case a.Outcome != "accepted":
		case strings.HasPrefix(a.ID, marketingIDPrefix):
			if !a.At.Before(from) && a.At.Before(lg.end) {
				marketing++
			}
		default:
			if t, ok := first[a.ID]; !ok || a.At.Before(t) {
				first[a.ID] = a.At
			}
		}
	}
	r.Throttled = len(throttles)
	if len(throttles) > 0 {
		r.LastThrottle = slices.MaxFunc(throttles, time.Time.Compare).Sub(lg.start)
	}
	if span := lg.end.Sub(from); span > 0 {
		r.MarketingRate = float64(marketing) / span.Seconds()
	}
	var all, clear []wait
	for id, pub := range lg.published {
		if !strings.HasPrefix(id, otpIDPrefix) {
			continue
		}
		r.Published++
		end, sent := first[id]
		w := wait{Duration: end.Sub(pub)}
		if sent {
			r.Sent++
		} else {
			end = lg.drained
			w = wait{Duration: end.Sub(pub), censored: true}
		}
		all = append(all, w)
		if pub.Before(from) || overlapsRetryAfter(pub, end, throttles) {
			continue
		}
		clear = append(clear, w)
		if w.censored || w.Duration > backlogMaxOTPP99 {
			r.SlowCount++
			o := slowOTP{At: pub.Sub(lg.start), Wait: w}
			if st, ok := lg.otpSteps[id]; ok {
				o.Pull = st.received.Sub(pub)
				if !st.admitted.IsZero() {
					o.Slot = st.admitted.Sub(st.received)
				}
			}
			r.Slow = append(r.Slow, o)
		}
	}
	r.P50, r.P99, r.Max = percentile(all, 0.5), percentile(all, 0.99), percentile(all, 1)
	r.Clear = len(clear)
	r.ClearP50, r.ClearP99, r.ClearMax = percentile(clear, 0.5), percentile(clear, 0.99), percentile(clear, 1)
	slices.SortFunc(r.Slow, func(a, b slowOTP) int { return cmp.Compare(b.Wait.Duration, a.Wait.Duration) })
	r.Slow = r.Slow[:min(len(r.Slow), backlogSlowShown)]
	slices.SortFunc(r.Slow, func(a, b slowOTP) int { return cmp.Compare(a.At, b.At) })
	if r.Code == codeAfter {
		if r.ClearP99.censored || r.ClearP99.Duration > backlogMaxOTPP99 {
			r.Failures = append(r.Failures, fmt.Sprintf("OTP p99 clear of a Retry-After %s > %v", latencyText(r.ClearP99), backlogMaxOTPP99))
		}
		if r.Sent < r.Published {
			r.Failures = append(r.Failures, fmt.Sprintf("%d of %d OTPs unsent", r.Published-r.Sent, r.Published))
		}
	}
	return r
}

// overlapsRetryAfter reports whether [from, to] meets the Retry-After of
// any 429 of throttles.
func overlapsRetryAfter(from, to time.Time, throttles []time.Time) bool {
	for _, t := range throttles {
		if !to.Before(t) && from.Before(t.Add(backlogRetryAfter)) {
			return true
		}
	}
	return false
}

// writeBacklogTable writes the backlog rows, their slow OTPs, legend and
// the after row's verdict.
func writeBacklogTable(w io.Writer, _ *Config, rows []*backlogRow) error {
	if len(rows) == 0 {
		return nil
	}
	s := rows[0].Spec
	fmt.Fprintf(w, "scenario backlog: %d dispatchers (each with its own Redis and Pub/Sub clients), pstest, Redis, a simulator allowing %d in any sliding 1 s (Retry-After %v); "+
		"one account, TARGET_RPS %d, MARKETING_RPS %d, BURST %d, the learned rate on (min_rps %d); a marketing backlog of %d published first, then OTP %g/s for %v; "+
		"before: the Pub/Sub clients ping every pull stream; after: topology.NewClient's, which does not ping a stream the lane is not reading\n",
		s.instances, s.limit, backlogRetryAfter, classesTarget, classesMktRPS, classesBurst, adaptiveMinRPS, s.backlog, s.otpRate, s.duration)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "code\tOTPs\tsent\tp50\tp99\tmax\tclear\tclear p50\tclear p99\tclear max\tslow\t429s\tlast 429\tmarketing/s\tverdict\t")
	for _, r := range rows {
		verdict := "-"
		if r.Code == codeAfter {
			verdict = okText(len(r.Failures) == 0)
		}
		last := "-"
		if r.Throttled > 0 {
			last = r.LastThrottle.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%.1f\t%s\t\n", r.Code, r.Published, r.Sent,
			latencyText(r.P50), latencyText(r.P99), latencyText(r.Max), r.Clear, latencyText(r.ClearP50), latencyText(r.ClearP99), latencyText(r.ClearMax),
			r.SlowCount, r.Throttled, last, r.MarketingRate, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		var parts []string
		for _, o := range r.Slow {
			parts = append(parts, fmt.Sprintf("%.1fs %s (pull %s, slot %s)", o.At.Seconds(), latencyText(o.Wait),
				latencyText(wait{Duration: o.Pull}), latencyText(wait{Duration: o.Slot})))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		fmt.Fprintf(w, "%s slow OTPs (published at: wait): %s\n", r.Code, strings.Join(parts, "; "))
	}
	for _, r := range rows {
		if len(r.Failures) > 0 {
			fmt.Fprintf(w, "%s misses: %s\n", r.Code, strings.Join(r.Failures, "; "))
		}
	}
	_, err := fmt.Fprintf(w, `
p50, p99, max: publish→first acceptance of every OTP (">": some were never accepted, at least that long); clear: the
  OTPs published after the first %v whose wait overlaps no 429's Retry-After, and their figures; slow: those of them
  over %v, the %d slowest listed by when they were published (from the feed's start), with where the wait went: pull,
  publish→a dispatcher's handler; slot, the handler→its slot; last 429: from the feed's start;
  marketing/s: accepted after the first %v.
verdict (after row): every OTP sent, OTP p99 clear of a Retry-After ≤ %v.

`, s.rampUp, backlogMaxOTPP99, backlogSlowShown, s.rampUp, backlogMaxOTPP99)
	return err
}

// backlogVerdict returns an error wrapping errScenarioFailed when the
// "after" row missed its criterion.
func backlogVerdict(rows []*backlogRow) error {
	var failed []string
	for _, r := range rows {
		if len(r.Failures) > 0 {
			failed = append(failed, fmt.Sprintf("backlog %s: %s", r.Code, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
