package loadharness

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/status"
)

// suppressionsRow is one row of the suppressions scenario.
type suppressionsRow struct {
	List int // numbers on the list; 0: none
	// Published are the messages published, ToListed those to a number of
	// the list (2 %), Sent the messages the simulator accepted, SentListed
	// those to a number of the list, Suppressed the ends the list
	// stopped (nack.Suppressed), Unended the messages without an end.
	Published, ToListed, Sent, OTPSent, SentListed, Suppressed, Unended int
	OTPP50, OTPP99                                                      time.Duration // publish→sent of the OTPs sent
	// ScriptsPerSent, AdmitsPerSent and CommandsPerSent are Redis's
	// script calls, the admission calls among them (the instances'
	// clients) and Redis's commands, per sent message; PathScriptsPerSent
	// the script calls but the heartbeats' (once a second a process,
	// whatever it sends: a row that sends less pays more of them a
	// message); CostErr says why Redis's are missing.
	ScriptsPerSent, PathScriptsPerSent, AdmitsPerSent, CommandsPerSent float64
	CostErr                                                            string
	Ops                                                                string // script calls by operation, per sent message
	Memory                                                             *listMemory
	Nacks                                                              map[string]int // by outcome and admission's reason
	Failures                                                           []string
}

// measureSuppressions turns a row's traffic, the messages' ends, the
// simulators' arrivals and Redis's cost into its row, and checks a row
// with a list against the criterion.
func measureSuppressions(size int, tr *suppressionsTraffic, ends map[string]dispatch.Event, nacks map[string]int, arrivals []providertest.Arrival, cost redisCost) *suppressionsRow {
	r := &suppressionsRow{List: size, Published: len(tr.listed), Nacks: nacks}
	for _, listed := range tr.listed {
		if listed {
			r.ToListed++
		}
	}
	sent := map[string]bool{}
	for _, a := range arrivals {
		if a.Outcome == "accepted" && !sent[a.ID] {
			if _, ours := tr.listed[a.ID]; ours {
				sent[a.ID] = true
			}
		}
	}
	r.Sent = len(sent)
	var otp []time.Duration
	for id := range sent {
		if tr.listed[id] {
			r.SentListed++
		}
	}
	for id := range tr.listed {
		ev, ok := ends[id]
		switch {
		case !ok:
			r.Unended++
		case ev.Outcome == nack.Suppressed:
			r.Suppressed++
		case ev.Outcome == nack.Sent && ev.Class == admission.OTP:
			r.OTPSent++
			otp = append(otp, ev.Finished.Sub(ev.PublishTime))
		}
	}
	slices.Sort(otp)
	r.OTPP50, r.OTPP99 = quantile(otp, 0.50), quantile(otp, 0.99)
	r.cost(cost)
	r.Failures = suppressionsCriterion(r)
	return r
}

// cost sets r's figures per sent message from c.
func (r *suppressionsRow) cost(c redisCost) {
	if r.Sent == 0 {
		r.CostErr = "nothing sent"
		return
	}
	per := func(n int64) float64 { return float64(n) / float64(r.Sent) }
	r.AdmitsPerSent = per(c.ops[admission.OpAdmit])
	r.Ops = opsPerSent(c.ops, r.Sent)
	if r.CostErr = c.err; c.err == "" {
		r.ScriptsPerSent, r.CommandsPerSent = per(c.scripts), per(c.executed)
		r.PathScriptsPerSent = per(c.scripts - c.ops[status.OpHeartbeat])
	}
}

// nackTotal is the sum of nacks.
func nackTotal(nacks map[string]int) int {
	n := 0
	for _, c := range nacks {
		n += c
	}
	return n
}

// opsPerSent renders ops (script calls by operation) per sent message,
// the most first.
func opsPerSent(ops map[string]int64, sent int) string {
	type op struct {
		name string
		n    int64
	}
	var all []op
	for name, n := range ops {
		all = append(all, op{name, n})
	}
	slices.SortFunc(all, func(a, b op) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.name, b.name)
	})
	var parts []string
	for _, o := range all {
		parts = append(parts, fmt.Sprintf("%s %.3f", o.name, float64(o.n)/float64(sent)))
	}
	return strings.Join(parts, ", ")
}

// suppressionsCriterion is what a row with a list misses: a listed
// recipient sent, a listed one not ended suppressed, a message without an
// end, more than suppressionsMaxScripts script calls per sent message
// on the messages' paths (the heartbeats apart).
// A row without a list is the reference: held to nothing.
func suppressionsCriterion(r *suppressionsRow) []string {
	if r.List == 0 {
		return nil
	}
	var out []string
	if r.SentListed > 0 {
		out = append(out, fmt.Sprintf("%d messages to listed numbers sent", r.SentListed))
	}
	if r.Suppressed != r.ToListed {
		out = append(out, fmt.Sprintf("%d of %d messages to listed numbers suppressed", r.Suppressed, r.ToListed))
	}
	if r.Unended > 0 {
		out = append(out, fmt.Sprintf("%d messages without an end", r.Unended))
	}
	if r.CostErr == "" && r.PathScriptsPerSent > suppressionsMaxScripts {
		out = append(out, fmt.Sprintf("%.3f script calls per sent message, the heartbeats apart (most %.2f)", r.PathScriptsPerSent, suppressionsMaxScripts))
	}
	return out
}

// writeSuppressionsTable writes the two rows side by side, the list's
// memory, and the verdict.
func writeSuppressionsTable(w io.Writer, cfg *Config, rows []*suppressionsRow) error {
	fmt.Fprintf(w, "scenario suppressions: %d dispatchers (server.New and Run, as serve wires them), pstest, Redis, the strict simulator (%d in any sliding 1 s); "+
		"one account, TARGET_RPS %d, MARKETING_RPS %d, BURST %d; a campaign of %d published first, OTP %g/s while it runs; every %dth recipient a number of the list\n",
		suppressionsInstances, contractRPS, classesTarget, classesMktRPS, classesBurst, suppressionsCampaign, cfg.suppressionsOTPRate, suppressEvery)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "list\tpublished\tto listed\tsent\tsent to listed\tsuppressed\tunended\tnacks\tOTP p50\tOTP p99\tscript calls/sent\tof them on the path\tadmissions/sent\tcommands/sent\tverdict\t")
	for _, r := range rows {
		scripts, path, cmds := "n/a", "n/a", "n/a"
		if r.CostErr == "" {
			scripts, path, cmds = fmt.Sprintf("%.3f", r.ScriptsPerSent), fmt.Sprintf("%.3f", r.PathScriptsPerSent), fmt.Sprintf("%.2f", r.CommandsPerSent)
		}
		verdict := "-"
		if r.List > 0 {
			verdict = okText(len(r.Failures) == 0)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.3f\t%s\t%s\t\n", r.List, r.Published, r.ToListed, r.Sent, r.SentListed, r.Suppressed,
			r.Unended, nackTotal(r.Nacks), durMs(r.OTPP50), durMs(r.OTPP99), scripts, path, r.AdmitsPerSent, cmds, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 2 && rows[0].OTPP99 > 0 {
		fmt.Fprintf(w, "OTP p99 with the list over without: %.2f× (p50 %.2f×)\n",
			float64(rows[1].OTPP99)/float64(rows[0].OTPP99), float64(rows[1].OTPP50)/float64(max(rows[0].OTPP50, 1)))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "list %d: calls per sent message by operation (other: commands that are no script): %s; nacks: %s\n", r.List, r.Ops, nacksText(r.Nacks))
		if r.CostErr != "" {
			fmt.Fprintf(w, "list %d: no Redis figures: %s\n", r.List, r.CostErr)
		}
		if m := r.Memory; m != nil {
			fmt.Fprintf(w, "list of %d: import %v (Store.Import, batches of %d); Redis %.1f B a number (used_memory), the hash %.1f B a number (MEMORY USAGE); "+
				"a process %.1f B a number (heap after Load), its Load %v\n",
				m.Size, m.Import.Round(time.Millisecond), suppressionsImportBatch, m.RedisBytes, m.HashBytes, m.ProcessBytes, m.Load.Round(time.Millisecond))
		}
		if len(r.Failures) > 0 {
			fmt.Fprintf(w, "list %d misses: %s\n", r.List, strings.Join(r.Failures, "; "))
		}
	}
	_, err := fmt.Fprintf(w, `
to listed: messages published to a number of the list (the same numbers in both rows); sent: accepted by the simulator;
  suppressed: ended suppressed; OTP p50/p99: publish→sent; script calls/sent, commands/sent: Redis's INFO commandstats
  from after the instances loaded the list to their stop, per sent message; on the path: the script calls but the heartbeats'
  (one a second a process, whatever it sends); admissions/sent: the instances' admission calls.
verdict (the row with a list): no listed number sent, each suppressed, every message ended, script calls/sent on the path ≤ %.2f.

`, suppressionsMaxScripts)
	return err
}

// suppressionsVerdict returns an error wrapping errScenarioFailed when a
// row missed the criterion.
func suppressionsVerdict(rows []*suppressionsRow) error {
	var failed []string
	for _, r := range rows {
		if len(r.Failures) > 0 {
			failed = append(failed, fmt.Sprintf("suppressions list %d: %s", r.List, strings.Join(r.Failures, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
