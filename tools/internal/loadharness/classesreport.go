package loadharness

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/provider/providertest"
)

// The classes criterion, which the "after" row is held to: no answer of
// 429; transactional p99 publish→provider at most classesMaxTrxP99, OTP's
// at most classesMaxOTPP99; marketing within classesMktTolerance of the
// rate the ceilings and reserves leave it (what the classes after otp may
// take, less what transactional is published at).
const (
	classesMaxTrxP99    = 500 * time.Millisecond
	classesMaxOTPP99    = 50 * time.Millisecond
	classesMktTolerance = 0.03
)

// classesOrder are the scenario's classes in priority order, with the
// prefix of their messages' ids.
var classesOrder = []struct {
	class  admission.Class
	prefix string
}{{admission.OTP, otpIDPrefix}, {transactional, trxIDPrefix}, {admission.Marketing, marketingIDPrefix}}

// classesRow is one classes row: per class what the simulator accepted,
// and the run's 429s and Redis's cost.
type classesRow struct {
	Spec    classesSpec
	Code    string
	Span    time.Duration // of the rates: from the ramp-up's end to the traffic's
	Classes []classFigures
	// Sent is every acceptance, Rate those of Span per second, MaxIn1s
	// the most in any sliding second, Throttled the answers of 429.
	Sent      int
	Rate      float64
	MaxIn1s   int
	Throttled int
	// ScriptsPerSent and CommandsPerSent are Redis's own count over the
	// run (INFO commandstats) per acceptance; HasStats is false when
	// there was none.
	ScriptsPerSent, CommandsPerSent float64
	HasStats                        bool
	// MarketingWant is the marketing rate the ceilings and reserves leave.
	MarketingWant float64
	// Nacks are the dispatchers' nacks by class, outcome and the
	// admission's reason.
	Nacks    map[string]int
	Failures []string
}

// classFigures is one class's part of a row.
type classFigures struct {
	Class admission.Class
	// Published are the messages published: the streams' during the run,
	// marketing's backlog; Sent those accepted, Unsent the others at the
	// run's end.
	Published, Sent, Unsent int
	Rate                    float64 // first acceptances per second over the row's Span
	MaxIn1s                 int     // the most accepted in any sliding second
	// P50 and P99 are publish→first acceptance: of every message
	// published for OTP and transactional (censored at the run's end when
	// unsent), of those sent for the marketing backlog (from its
	// publishing's start).
	P50, P99 wait
}

// measureClasses turns a classes run into its row: lg, the simulator's
// arrivals, its 429 answers, and Redis's commands over the run (nil: none).
func measureClasses(s classesSpec, lg *classesLog, arrivals []providertest.Arrival, throttled int, cs redisstats.CommandStats) *classesRow {
	r := &classesRow{Spec: s, Code: s.code, Throttled: throttled, MarketingWant: classesTarget - classesOTPReserve - s.trxRate, Nacks: lg.nacks}
	from := lg.start.Add(s.rampUp)
	r.Span = lg.end.Sub(from)
	first := map[string]time.Time{}
	byClass := map[admission.Class][]time.Time{}
	var all []time.Time
	for _, a := range arrivals {
		if a.Outcome != "accepted" {
			continue
		}
		all = append(all, a.At)
		c := classOfID(a.ID)
		byClass[c] = append(byClass[c], a.At)
		if t, ok := first[a.ID]; !ok || a.At.Before(t) {
			first[a.ID] = a.At
		}
	}
	r.Sent, r.MaxIn1s = len(all), providertest.MaxInAnyWindow(all, time.Second)
	inSpan := map[admission.Class]int{}
	for id, at := range first {
		if !at.Before(from) && at.Before(lg.end) {
			inSpan[classOfID(id)]++
		}
	}
	perSecond := func(n int) float64 {
		if r.Span <= 0 {
			return 0
		}
		return float64(n) / r.Span.Seconds()
	}
	total := 0
	for _, co := range classesOrder {
		f := classFigures{Class: co.class, MaxIn1s: providertest.MaxInAnyWindow(byClass[co.class], time.Second), Rate: perSecond(inSpan[co.class])}
		total += inSpan[co.class]
		var ws []wait
		if co.class == admission.Marketing {
			f.Published = s.backlog
			for id, at := range first {
				if classOfID(id) == co.class {
					f.Sent++
					ws = append(ws, wait{Duration: at.Sub(lg.backlogAt)})
				}
			}
		} else {
			for id, pub := range lg.published {
				if !strings.HasPrefix(id, co.prefix) {
					continue
				}
				f.Published++
				if at, ok := first[id]; ok {
					f.Sent++
					ws = append(ws, wait{Duration: at.Sub(pub)})
				} else {
					ws = append(ws, wait{Duration: lg.drained.Sub(pub), censored: true})
				}
			}
		}
		f.Unsent = f.Published - f.Sent
		f.P50, f.P99 = percentile(ws, 0.5), percentile(ws, 0.99)
		r.Classes = append(r.Classes, f)
	}
	r.Rate = perSecond(total)
	if cs != nil && r.Sent > 0 {
		r.HasStats = true
		r.ScriptsPerSent = float64(cs.Scripts()) / float64(r.Sent)
		r.CommandsPerSent = float64(cs.Executed()) / float64(r.Sent)
	}
	if r.Code == codeAfter {
		r.Failures = r.judge()
	}
	return r
}

// classOfID is the class of the message id, by its prefix.
func classOfID(id string) admission.Class {
	for _, co := range classesOrder {
		if strings.HasPrefix(id, co.prefix) {
			return co.class
		}
	}
	return ""
}

// figures returns r's figures of class c.
func (r *classesRow) figures(c admission.Class) classFigures {
	for _, f := range r.Classes {
		if f.Class == c {
			return f
		}
	}
	return classFigures{Class: c}
}

// judge returns the classes criterion's failures of r; none: it passed.
func (r *classesRow) judge() []string {
	var out []string
	fail := func(bad bool, format string, args ...any) {
		if bad {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	otp, trx, mkt := r.figures(admission.OTP), r.figures(transactional), r.figures(admission.Marketing)
	fail(r.Throttled > 0, "%d answers of 429", r.Throttled)
	fail(trx.P99.censored || trx.P99.Duration > classesMaxTrxP99, "transactional p99 %s > %v", latencyText(trx.P99), classesMaxTrxP99)
	fail(otp.P99.censored || otp.P99.Duration > classesMaxOTPP99, "OTP p99 %s > %v", latencyText(otp.P99), classesMaxOTPP99)
	fail(math.Abs(mkt.Rate-r.MarketingWant) > classesMktTolerance*r.MarketingWant, "marketing %.1f/s, not within %.0f%% of %g/s",
		mkt.Rate, classesMktTolerance*100, r.MarketingWant)
	return out
}

// latencyText renders a wait in milliseconds below a second, else in
// seconds; ">" first when it is a lower bound.
func latencyText(w wait) string {
	s := fmt.Sprintf("%.1fms", float64(w.Microseconds())/1000)
	if w.Duration >= time.Second {
		s = fmt.Sprintf("%.2fs", w.Seconds())
	}
	if w.censored {
		s = ">" + s
	}
	return s
}

// writeClassesTable writes the classes rows, a line per class and one for
// the whole row, with their legend and the "after" row's verdict.
func writeClassesTable(w io.Writer, _ *Config, rows []*classesRow) error {
	if len(rows) == 0 {
		return nil
	}
	s := rows[0].Spec
	fmt.Fprintf(w, "scenario classes: %d dispatchers (dispatch.New with Deps.Lanes, each with its own Redis and Pub/Sub clients), pstest, Redis, the strict simulator (%d in any sliding 1 s); "+
		"one account, TARGET_RPS %d, BURST %d; a marketing backlog of %d published first, then transactional %g/s and OTP %g/s for %v; "+
		"after: classes otp, transactional (class_rps %d), marketing (class_rps %d), reserve_rps otp %d; before: today's two classes (otp, marketing at MARKETING_RPS %d), transactional published to the marketing topic\n",
		s.instances, classesContract, classesTarget, classesBurst, s.backlog, s.trxRate, s.otpRate, s.duration,
		classesTrxRPS, classesMktRPS, classesOTPReserve, classesMktRPS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "code\tclass\tpublished\tsent\trate/s\tp50\tp99\tmost in 1 s\tunsent at end\t429s\tscript calls/sent\tcommands/sent\tverdict\t")
	for _, r := range rows {
		for _, f := range r.Classes {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%d\t%d\t\t\t\t\t\n",
				r.Code, f.Class, f.Published, f.Sent, f.Rate, latencyText(f.P50), latencyText(f.P99), f.MaxIn1s, f.Unsent)
		}
		scripts, cmds := "n/a", "n/a"
		if r.HasStats {
			scripts, cmds = fmt.Sprintf("%.2f", r.ScriptsPerSent), fmt.Sprintf("%.2f", r.CommandsPerSent)
		}
		verdict := "-"
		if r.Code == codeAfter {
			verdict = okText(len(r.Failures) == 0)
		}
		fmt.Fprintf(tw, "%s\tall\t\t%d\t%.1f\t\t\t%d\t\t%d\t%s\t%s\t%s\t\n", r.Code, r.Sent, r.Rate, r.MaxIn1s, r.Throttled, scripts, cmds, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s nacks: %s\n", r.Code, nacksText(r.Nacks))
	}
	for _, r := range rows {
		if len(r.Failures) > 0 {
			fmt.Fprintf(w, "%s misses: %s\n", r.Code, strings.Join(r.Failures, "; "))
		}
	}
	_, err := fmt.Fprintf(w, `
published: OTP and transactional messages published during the run, the marketing backlog; sent: accepted by the
  simulator; rate/s: first acceptances per second from %v into the run to the traffic's end; p50, p99:
  publish→first acceptance (">": some were never accepted, at least that long), for marketing of the backlog's
  messages sent, from its publishing; most in 1 s: acceptances in any sliding second; unsent at end: after the
  traffic and up to %v more for the OTP and transactional messages. script calls/sent, commands/sent: Redis's INFO
  commandstats over the run per acceptance (the scripts' own commands included).
verdict (after row): no 429, transactional p99 ≤ %v, OTP p99 ≤ %v, marketing within %.0f%% of TARGET_RPS − reserve_rps otp −
  the transactional rate (%d − %d − %g = %g/s).

`, s.rampUp, s.drain, classesMaxTrxP99, classesMaxOTPP99, classesMktTolerance*100,
		classesTarget, classesOTPReserve, s.trxRate, rows[0].MarketingWant)
	return err
}

// nacksText renders nacks in their keys' order; "none" if empty.
func nacksText(nacks map[string]int) string {
	if len(nacks) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(nacks)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, nacks[k]))
	}
	return strings.Join(parts, ", ")
}

// classesVerdict returns an error wrapping errScenarioFailed when the
// "after" row missed the classes criterion.
func classesVerdict(rows []*classesRow) error {
	var failed []string
	for _, r := range rows {
		if len(r.Failures) > 0 {
			failed = append(failed, fmt.Sprintf("classes %s: %s", r.Code, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
