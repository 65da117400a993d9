package loadharness

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// The failover criterion, which the "after" rows are held to: during the
// storm, OTP p99 publish→accepted at most failoverMaxP99 and at least
// failoverMinShare of it accepted before the storm's end; no marketing on
// the backup; requests to the primary at most failoverMaxRatio of its rate
// before; the first OTP on the primary within failoverMaxFailback of the
// storm's end, and at most failoverMaxBackupAfter OTPs published after it
// on the backup; nothing lost.
const (
	failoverMaxP99         = 2 * time.Second
	failoverMinShare       = 0.95
	failoverMaxRatio       = 1.2
	failoverMaxFailback    = 5 * time.Second
	failoverMaxBackupAfter = 3
)

// failoverRow is one failover row: what the simulators accepted, when the
// OTPs were published and what became of every message.
type failoverRow struct {
	Code, Storm string
	SendTimeout time.Duration
	StormLength time.Duration

	OTPPublished int // in the whole run
	// StormOTP are the OTPs published during the storm; P50, P99 and Max
	// their publish→first acceptance by either account (censored: not
	// accepted at all, then at least that long), InStorm how many were
	// accepted before the storm's end, Share that of StormOTP.
	StormOTP      int
	P50, P99, Max wait
	InStorm       int
	Share         float64

	OTPOnBackup       int // OTP ids the backup accepted, in the whole run
	BackupAfter       int // of them, those published after the storm's end
	MarketingOnBackup int // marketing ids the backup accepted: it does not serve marketing
	// PrimaryBefore and PrimaryStorm are the requests per second that
	// reached the primary from failoverRampUp to the storm, and during
	// it; Ratio is the second over the first.
	PrimaryBefore, PrimaryStorm, Ratio float64
	// Failback is the first OTP accepted by the primary after the storm's
	// end, from the end; nil: none was.
	Failback *time.Duration

	Expired      int // OTPs that reached their deadline unsent
	DeadLettered int
	// Lost are messages Pub/Sub holds as acked that neither account
	// accepted and that were neither dead-lettered nor expired; Pending
	// OTPs that reached no end within the drain.
	Lost, Pending int
	Duplicates    int // OTP ids accepted more than once (both accounts, say)
	Failures      []string
}

// measureFailover turns a failover run's log into its row.
func measureFailover(s failoverSpec, lg *failoverLog) *failoverRow {
	r := &failoverRow{Code: s.code, Storm: s.kind, SendTimeout: s.sendTimeout, StormLength: lg.stormEnd.Sub(lg.stormStart)}
	first := map[string]time.Time{} // id -> its first acceptance by either account
	times := map[string]int{}
	accept := func(arrivals []providertest.Arrival, each func(a providertest.Arrival)) {
		for _, a := range arrivals {
			if a.Outcome != "accepted" {
				continue
			}
			times[a.ID]++
			if t, ok := first[a.ID]; !ok || a.At.Before(t) {
				first[a.ID] = a.At
			}
			each(a)
		}
	}
	onBackup := map[string]bool{}
	accept(lg.primary, func(a providertest.Arrival) {
		if strings.HasPrefix(a.ID, otpIDPrefix) && !a.At.Before(lg.stormEnd) {
			if d := a.At.Sub(lg.stormEnd); r.Failback == nil || d < *r.Failback {
				r.Failback = &d
			}
		}
	})
	accept(lg.backup, func(a providertest.Arrival) {
		switch {
		case strings.HasPrefix(a.ID, marketingIDPrefix):
			r.MarketingOnBackup++
		case strings.HasPrefix(a.ID, otpIDPrefix):
			onBackup[a.ID] = true
		}
	})
	r.OTPOnBackup = len(onBackup)
	for id := range onBackup {
		if pub, ok := lg.otp[id]; ok && !pub.Before(lg.stormEnd) {
			r.BackupAfter++
		}
	}

	r.OTPPublished = len(lg.otp)
	var ws []wait
	for id, pub := range lg.otp {
		if times[id] > 1 {
			r.Duplicates++
		}
		out, ended := lg.ended[id]
		_, sent := first[id]
		switch {
		case !ended:
			r.Pending++
		case out == nack.Expired && !sent:
			r.Expired++
		}
		if pub.Before(lg.stormStart) || !pub.Before(lg.stormEnd) {
			continue
		}
		r.StormOTP++
		if !sent {
			ws = append(ws, wait{Duration: lg.drained.Sub(pub), censored: true})
			continue
		}
		ws = append(ws, wait{Duration: first[id].Sub(pub)})
		if first[id].Before(lg.stormEnd) {
			r.InStorm++
		}
	}
	r.P50, r.P99, r.Max = percentile(ws, 0.5), percentile(ws, 0.99), percentile(ws, 1)
	if r.StormOTP > 0 {
		r.Share = float64(r.InStorm) / float64(r.StormOTP)
	}
	r.DeadLettered = len(lg.deadLettered)
	for id := range lg.acked {
		_, sent := first[id]
		if !sent && !lg.deadLettered[id] && lg.ended[id] != nack.Expired {
			r.Lost++
		}
	}

	before, storm := 0, 0
	from := lg.start.Add(failoverRampUp)
	for _, t := range lg.primaryRequests {
		switch {
		case !t.Before(from) && t.Before(lg.stormStart):
			before++
		case !t.Before(lg.stormStart) && t.Before(lg.stormEnd):
			storm++
		}
	}
	if span := lg.stormStart.Sub(from).Seconds(); span > 0 {
		r.PrimaryBefore = float64(before) / span
	}
	if span := r.StormLength.Seconds(); span > 0 {
		r.PrimaryStorm = float64(storm) / span
	}
	if r.PrimaryBefore > 0 {
		r.Ratio = r.PrimaryStorm / r.PrimaryBefore
	}
	if r.Code == codeAfter {
		r.Failures = r.judge()
	}
	return r
}

// judge returns the failover criterion's failures of r; none: it passed.
func (r *failoverRow) judge() []string {
	var out []string
	fail := func(bad bool, format string, args ...any) {
		if bad {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	fail(r.P99.censored || r.P99.Duration > failoverMaxP99, "storm OTP p99 %s > %v", waitText(r.P99), failoverMaxP99)
	fail(r.Share < failoverMinShare, "%.3f of the storm's OTP accepted during it < %.2f", r.Share, failoverMinShare)
	fail(r.MarketingOnBackup > 0, "%d marketing messages on the backup", r.MarketingOnBackup)
	fail(r.Ratio > failoverMaxRatio, "requests to the primary during the storm %.2f× its rate before > %.1f×", r.Ratio, failoverMaxRatio)
	fail(r.Failback == nil || *r.Failback > failoverMaxFailback, "failback %s > %v", failbackText(r.Failback), failoverMaxFailback)
	fail(r.BackupAfter > failoverMaxBackupAfter, "%d OTPs published after the storm on the backup > %d", r.BackupAfter, failoverMaxBackupAfter)
	fail(r.Lost > 0 || r.Pending > 0, "%d lost, %d OTPs at no end", r.Lost, r.Pending)
	return out
}

// waitText renders a wait in seconds, ">" first when it is a lower bound.
func waitText(w wait) string {
	s := fmt.Sprintf("%.2fs", w.Seconds())
	if w.censored {
		s = ">" + s
	}
	return s
}

func failbackText(d *time.Duration) string {
	if d == nil {
		return "none"
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// writeFailoverTable writes the failover rows with their legend and the
// "after" rows' verdicts.
func writeFailoverTable(w io.Writer, cfg *Config, rows []*failoverRow) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "scenario failover: %d dispatchers (dispatch.New, each with its own Redis and Pub/Sub clients), pstest, Redis, two simulators (%d/s each, sliding 1 s); "+
		"account %s (otp, marketing; TARGET_RPS %d, MARKETING_RPS %d), account %s (otp); OTP %g/s, a marketing backlog of %.1f× what MARKETING_RPS sends; "+
		"warm-up %v, storm %v on %s, %v after; SEND_TIMEOUT %v; before: the health rule off (failures and timeouts in a row never add up), after: admission.HealthRule's defaults\n",
		failoverInstances, failoverContractRPS, primaryName, failoverTarget, failoverMarketing, backupName, cfg.failoverOTPRate, failoverBacklog,
		failoverWarmup, cfg.stormLength, primaryName, failoverAfter, cfg.sendTimeout)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "code\tstorm\tSEND_TIMEOUT\tstorm OTPs\tp50\tp99\tmax\tsent in storm\tOTPs on backup\tafter storm\tmarketing on backup\tprimary req/s before\tduring\tratio\tfailback\texpired\tdead-lettered\tlost\tat no end\tsent twice\tverdict\t")
	for _, r := range rows {
		verdict := "-"
		if r.Code == codeAfter {
			verdict = okText(len(r.Failures) == 0)
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\t%s\t%s\t%d (%.3f)\t%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			r.Code, r.Storm, r.SendTimeout, r.StormOTP, waitText(r.P50), waitText(r.P99), waitText(r.Max), r.InStorm, r.Share, r.OTPOnBackup, r.BackupAfter, r.MarketingOnBackup,
			r.PrimaryBefore, r.PrimaryStorm, r.Ratio, failbackText(r.Failback), r.Expired, r.DeadLettered, r.Lost, r.Pending, r.Duplicates, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if len(r.Failures) > 0 {
			fmt.Fprintf(w, "%s/%s misses: %s\n", r.Code, r.Storm, strings.Join(r.Failures, "; "))
		}
	}
	_, err := fmt.Fprintf(w, `
storm OTPs: OTPs published during the storm; p50, p99, max: their publish→first acceptance by either simulator (">": some
  were never accepted, at least that long); sent in storm: of them, accepted before the storm's end (and that share).
OTPs on backup: OTP ids the backup accepted in the whole run; after storm: of them, those published after the storm's end.
marketing on backup: must be 0 (it serves OTP only).
primary req/s: requests that reached the primary (any answer, or none), from %v into the warm-up to the storm, and during
  it; ratio: during over before. failback: the first OTP the primary accepted after the storm's end, from the end.
expired: OTPs past their deadline (%v) unsent; lost: acked in Pub/Sub, never accepted, dead-lettered nor expired; at no
  end: OTPs that had not reached an end %v after the run; sent twice: OTP ids accepted more than once (a send that timed
  out on the primary may have gone through there too).
verdict (after rows): p99 ≤ %v, sent in storm ≥ %.2f, no marketing on backup, ratio ≤ %.1f, failback ≤ %v, ≤ %d OTPs
  published after the storm on the backup, nothing lost.

`, failoverRampUp, failoverOTPLife, failoverDrain, failoverMaxP99, failoverMinShare, failoverMaxRatio, failoverMaxFailback, failoverMaxBackupAfter)
	return err
}

// failoverVerdict returns an error wrapping errScenarioFailed when an
// "after" row missed the failover criterion.
func failoverVerdict(rows []*failoverRow) error {
	var failed []string
	for _, r := range rows {
		if len(r.Failures) > 0 {
			failed = append(failed, fmt.Sprintf("failover %s/%s: %s", r.Code, r.Storm, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
