package loadharness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/guard"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
)

// pumpingBucket is the span of one point of a row's series.
const pumpingBucket = 5 * time.Second

// pumpingRun is what one row leaves to measure.
type pumpingRun struct {
	start           time.Time
	msgs            map[string]pumpingMsg
	blocks          []blockSeen
	ends            map[string]dispatch.Event
	nacks           map[string]int
	primary, backup []providertest.Arrival
	cost            redisCost
	verified        int // verifications published
}

// pumpingRow is one row of the pumping scenario.
type pumpingRow struct {
	Spec   pumpingSpec
	Ranges []rangeFigures
	// The legitimate OTPs: published, sent (accepted), sent through the
	// backup, blocked, verifications published, publish→sent p50/p99.
	LegitPublished, LegitSent, LegitBackup, LegitBlocked, Verified int
	LegitP50, LegitP99                                             time.Duration
	Blocks                                                         []blockSeen
	Series                                                         []pumpingPoint
	// Sent is every acceptance; the costs are per acceptance: Redis's
	// script calls and commands, the instances' admission calls and the
	// guard's counting calls (guard.OpSent).
	Sent                                           int
	ScriptsPerSent, CommandsPerSent, AdmitsPerSent float64
	GuardPerSent                                   float64
	CostErr, Ops                                   string
	Unended                                        int
	Nacks                                          map[string]int // by outcome and admission's reason
	Failures                                       []string
}

// rangeFigures is one attack range's part of a row.
type rangeFigures struct {
	Range     string
	Published int
	// Sends are the requests to either simulator (the guard's sends:
	// handed to a provider, whatever its answer: max_per_prefix counts
	// each), OTPs the OTPs among them (min_conversion counts each once,
	// however often it was handed over), Accepted those accepted, Backup
	// those to the backup; Blocked the OTPs acked blocked.
	Sends, OTPs, Accepted, Backup, Blocked int
	Block                                  *blockSeen // its first block; nil: never blocked
}

// pumpingPoint is one pumpingBucket of a row: the attack's sends and
// its OTPs blocked in it, from the row's start.
type pumpingPoint struct {
	From           time.Duration
	Sends, Blocked int
}

// measurePumping turns a row's run into its row and checks it.
func measurePumping(s pumpingSpec, run pumpingRun) *pumpingRow {
	r := &pumpingRow{Spec: s, Blocks: run.blocks, Verified: run.verified, Nacks: run.nacks}
	byRange := map[string]*rangeFigures{}
	for _, rng := range s.ranges {
		byRange[rng] = &rangeFigures{Range: rng, Block: blockOf(run.blocks, rng)}
	}
	series := map[int]*pumpingPoint{}
	point := func(at time.Time) *pumpingPoint {
		i := max(0, int(at.Sub(run.start)/pumpingBucket))
		if series[i] == nil {
			series[i] = &pumpingPoint{From: time.Duration(i) * pumpingBucket}
		}
		return series[i]
	}
	sent, handed := map[string]bool{}, map[string]bool{}
	for i, arrivals := range [][]providertest.Arrival{run.primary, run.backup} {
		for _, a := range arrivals {
			m, ok := run.msgs[a.ID]
			if !ok {
				continue
			}
			accepted := a.Outcome == "accepted"
			if accepted && !sent[a.ID] {
				sent[a.ID] = true
				if !m.attack && i == 1 {
					r.LegitBackup++
				}
			}
			if f := byRange[m.rng]; m.attack && f != nil {
				f.Sends++
				if !handed[a.ID] {
					handed[a.ID] = true
					f.OTPs++
				}
				if accepted {
					f.Accepted++
				}
				if i == 1 {
					f.Backup++
				}
				point(a.At).Sends++
			}
		}
	}
	r.Sent = len(sent)
	var legit []time.Duration
	for id, m := range run.msgs {
		ev, ended := run.ends[id]
		if !ended {
			r.Unended++
		}
		blocked := ended && ev.Outcome == nack.Blocked
		if m.attack {
			byRange[m.rng].Published++
			if blocked {
				byRange[m.rng].Blocked++
				point(ev.Finished).Blocked++
			}
			continue
		}
		r.LegitPublished++
		switch {
		case blocked:
			r.LegitBlocked++
		case sent[id]:
			r.LegitSent++
			if ended && ev.Outcome == nack.Sent {
				legit = append(legit, ev.Finished.Sub(ev.PublishTime))
			}
		}
	}
	slices.Sort(legit)
	r.LegitP50, r.LegitP99 = quantile(legit, 0.50), quantile(legit, 0.99)
	for _, rng := range s.ranges {
		r.Ranges = append(r.Ranges, *byRange[rng])
	}
	for _, i := range slices.Sorted(maps.Keys(series)) {
		r.Series = append(r.Series, *series[i])
	}
	r.cost(run.cost)
	r.Failures = pumpingCriterion(r)
	return r
}

// cost sets r's figures per sent message from c.
func (r *pumpingRow) cost(c redisCost) {
	if r.Sent == 0 {
		r.CostErr = "nothing sent"
		return
	}
	per := func(n int64) float64 { return float64(n) / float64(r.Sent) }
	r.AdmitsPerSent, r.GuardPerSent = per(c.ops[admission.OpAdmit]), per(c.ops[guard.OpSent])
	r.Ops = opsPerSent(c.ops, r.Sent)
	if r.CostErr = c.err; c.err == "" {
		r.ScriptsPerSent, r.CommandsPerSent = per(c.scripts), per(c.executed)
	}
}

// pumpingCriterion is what a row with the guard misses: a legitimate OTP
// blocked or without an end; an attack range not blocked by the row's
// rule (on: prefix_rate, slow: conversion), or sent to more than the
// rule's figure allows, in the rule's own unit: at most count +
// pumpingSlack sends (on), fewer than min_sends + pumpingSlack OTPs
// (slow). The off row is the reference: held to nothing.
func pumpingCriterion(r *pumpingRow) []string {
	if !r.Spec.guard {
		return nil
	}
	var out []string
	if r.LegitBlocked > 0 {
		out = append(out, fmt.Sprintf("%d legitimate OTPs blocked", r.LegitBlocked))
	}
	if r.Unended > 0 {
		out = append(out, fmt.Sprintf("%d OTPs without an end", r.Unended))
	}
	reason, most, unit := guard.ReasonPrefixRate, pumpingPrefixCount+pumpingSlack, "sends"
	if r.Spec.row == guardSlow {
		reason, most, unit = guard.ReasonConversion, pumpingMinSends+pumpingSlack-1, "OTPs"
	}
	for _, f := range r.Ranges {
		got := f.Sends
		if unit == "OTPs" {
			got = f.OTPs
		}
		switch {
		case f.Block == nil:
			out = append(out, fmt.Sprintf("range %s never blocked", f.Range))
		case f.Block.Reason != reason:
			out = append(out, fmt.Sprintf("range %s blocked for %s, not %s", f.Range, f.Block.Reason, reason))
		}
		if got > most {
			out = append(out, fmt.Sprintf("range %s got %d %s (most %d)", f.Range, got, unit, most))
		}
	}
	return out
}

// writePumpingTable writes the rows: a line per attack range and one for
// the legitimate OTPs, then the blocks and the series over time.
func writePumpingTable(w io.Writer, cfg *Config, rows []*pumpingRow) error {
	p := cfg.pumping
	fmt.Fprintf(w, "scenario pumping: %d dispatchers (server.New and Run, as serve wires them), pstest, Redis; account main (otp, marketing) and backup (otp), "+
		"each its simulator (%d in any sliding 1 s), main answering 503 from %v for %v (OTPs fail over); legitimate OTP %g/s to 1,000 ranges (1 in %d unverified, "+
		"the others verified %v after their send); attack %g/s to %s (off, on), %g/s to %s (slow); guard: max_per_prefix {digits %d, count %d, per 10m}, "+
		"min_conversion {ratio %g, min_sends %d, per 30m, digits %d, grace 60s (slow: %v, --guard-grace)}\n",
		pumpingInstances, contractRPS, pumpingStormAt, pumpingStorm, p.legitRate, pumpingVerifyShare, pumpingVerifyAfter,
		p.attackRate, strings.Join(fastRanges, ", "), p.slowRate, strings.Join(slowRanges, ", "),
		pumpingPrefixDigits, pumpingPrefixCount, pumpingRatio, pumpingMinSends, pumpingConvDigits, p.grace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "guard\ttraffic\tpublished\tsends\tOTPs sent\taccepted\ton backup\tblocked\tblocked at\tby\tcounted (verified)\tp50\tp99\tverdict\t")
	for _, r := range rows {
		for _, f := range r.Ranges {
			at, by, counted := "never", "", ""
			if b := f.Block; b != nil {
				at, by, counted = fmt.Sprintf("%.1f s", b.At.Seconds()), b.Reason, fmt.Sprintf("%d (%d)", b.Sends, b.Verified)
			}
			fmt.Fprintf(tw, "%s\tattack %s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\t\t\t\n", r.Spec.row, f.Range, f.Published, f.Sends, f.OTPs, f.Accepted, f.Backup, f.Blocked, at, by, counted)
		}
		verdict := "-"
		if r.Spec.guard {
			verdict = okText(len(r.Failures) == 0)
		}
		fmt.Fprintf(tw, "%s\tlegitimate\t%d\t\t\t%d\t%d\t%d\t\t\t\t%s\t%s\t%s\t\n", r.Spec.row, r.LegitPublished, r.LegitSent, r.LegitBackup, r.LegitBlocked,
			durMs(r.LegitP50), durMs(r.LegitP99), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "guard\tsent\tscript calls/sent\tcommands/sent\tadmissions/sent\tguard counts/sent\tverifications\tnacks\tunended\t")
	for _, r := range rows {
		scripts, cmds := "n/a", "n/a"
		if r.CostErr == "" {
			scripts, cmds = fmt.Sprintf("%.3f", r.ScriptsPerSent), fmt.Sprintf("%.2f", r.CommandsPerSent)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.3f\t%.3f\t%d\t%d\t%d\t\n", r.Spec.row, r.Sent, scripts, cmds, r.AdmitsPerSent, r.GuardPerSent, r.Verified, nackTotal(r.Nacks), r.Unended)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s: blocks as read: %s\n", r.Spec.row, blocksText(r.Blocks))
		fmt.Fprintf(w, "%s: the attack every %v (sends/blocked): %s\n", r.Spec.row, pumpingBucket, seriesText(r.Series))
		fmt.Fprintf(w, "%s: calls per sent message by operation (other: commands that are no script): %s; nacks: %s\n", r.Spec.row, r.Ops, nacksText(r.Nacks))
		if r.CostErr != "" {
			fmt.Fprintf(w, "%s: no Redis figures: %s\n", r.Spec.row, r.CostErr)
		}
		if len(r.Failures) > 0 {
			fmt.Fprintf(w, "%s misses: %s\n", r.Spec.row, strings.Join(r.Failures, "; "))
		}
	}
	_, err := fmt.Fprintf(w, `
sends: requests to either simulator (what max_per_prefix counts: handed to a provider, whatever the answer, a failed
  one and its failover two); OTPs sent: the OTPs among them (what min_conversion counts, once each); blocked: OTPs
  acked blocked; blocked at: the block first read in Redis, from the row's start; counted (verified): the sends (and
  verified ones) the rule counted when it blocked; p50/p99: publish→sent of the legitimate OTPs; script calls/sent,
  commands/sent: Redis's INFO commandstats over the row per accepted message; admissions/sent, guard counts/sent: the
  instances' calls of the admission script and of the guard's counter.
verdict (rows with the guard): no legitimate OTP blocked, every OTP ended; on: each attack range blocked by prefix_rate
  with at most count + %d sends; slow: each blocked by conversion with fewer than min_sends + %d OTPs sent.

`, pumpingSlack, pumpingSlack)
	return err
}

// blocksText renders the blocks in the order seen.
func blocksText(blocks []blockSeen) string {
	if len(blocks) == 0 {
		return "none"
	}
	var parts []string
	for _, b := range blocks {
		parts = append(parts, fmt.Sprintf("%s %s at %.1f s (%d sends, %d verified)", b.Range, b.Reason, b.At.Seconds(), b.Sends, b.Verified))
	}
	return strings.Join(parts, "; ")
}

// seriesText renders the series, a point each "from: sends/blocked".
func seriesText(series []pumpingPoint) string {
	var parts []string
	for _, p := range series {
		parts = append(parts, fmt.Sprintf("%.0fs %d/%d", p.From.Seconds(), p.Sends, p.Blocked))
	}
	return strings.Join(parts, ", ")
}

// pumpingVerdict returns an error wrapping errScenarioFailed when a row
// missed the criterion.
func pumpingVerdict(rows []*pumpingRow) error {
	var failed []string
	for _, r := range rows {
		if len(r.Failures) > 0 {
			failed = append(failed, fmt.Sprintf("pumping %s: %s", r.Spec.row, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
