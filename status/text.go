package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
)

// WriteText prints r for a person.
func (r Report) WriteText(w io.Writer) {
	for i, a := range r.Accounts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "account %s: %s, serves %s, rates in %ss\n", a.Name, a.Provider, listText(a.Classes), a.RateUnit)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  rates\t%s\n", a.ratesText())
		fmt.Fprintf(tw, "  override\t%s\n", a.Override.text(a.lastClass()))
		learned := a.Learned.text()
		if a.LearnedIgnored != "" {
			learned = fmt.Sprintf("ignored: %q is no learned rate of at least %v/s", a.LearnedIgnored, admission.MinRPS)
		}
		fmt.Fprintf(tw, "  learned\t%s\n", learned)
		for _, class := range a.Classes {
			s := a.sent(class)
			fmt.Fprintf(tw, "  sent %s\t%d in the last 1 s, %d in 10 s (%.1f/s), %d in 60 s (%.1f/s)\n",
				class, s.Last1s, s.Last10s, float64(s.Last10s)/10, s.Last60s, float64(s.Last60s)/60)
		}
		a.writeDelivery(tw)
		fmt.Fprintf(tw, "  penalty\t%s\n", a.Penalty.Text())
		if h, ok := a.Health.text(r.Time); ok {
			fmt.Fprintf(tw, "  health\t%s\n", h)
		}
		fmt.Fprintf(tw, "  in flight\t%d\n", a.InFlight)
		fmt.Fprintf(tw, "  processes\t%s\n", processesText(a.Processes))
		tw.Flush()
	}
	r.writeRoutes(w)
	if s := r.Suppressions; s != nil {
		changes := []string{}
		for _, k := range slices.Sorted(maps.Keys(s.LastHour)) {
			changes = append(changes, fmt.Sprintf("%s %d", k, s.LastHour[k]))
		}
		if len(changes) == 0 {
			changes = append(changes, "none")
		}
		fmt.Fprintf(w, "\nsuppression list: %d numbers; changes in the last hour: %s\n", s.Numbers, strings.Join(changes, ", "))
	}
}

// listText says names as a list: "a", "a and b", "a, b and c".
func listText(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// writeRoutes prints the routing table: a line per class and prefix, the
// accounts in order.
func (r Report) writeRoutes(w io.Writer) {
	if len(r.Routes) == 0 {
		return
	}
	if len(r.Accounts) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "routes (%s): class, destination, accounts in order\n", r.Route)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, rt := range r.Routes {
		accounts := strings.Join(rt.Accounts, ", ")
		if accounts == "" {
			accounts = "none: dead-lettered (invalid: no_route)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", rt.Class, rt.Prefix, accounts)
	}
	tw.Flush()
}

// ratesText says a's rates: the contract, the target, each class's
// ceiling (the first class's only when it is below the target) and
// reserve, and the rate in force when it is below the target.
func (a Account) ratesText() string {
	rates := fmt.Sprintf("contract %g/s, target %g/s", a.ContractRPS, a.TargetRPS)
	var reserves []string
	for i, c := range a.ClassRates {
		if i > 0 || c.CeilingRPS < a.TargetRPS {
			rates += fmt.Sprintf(", %s %g/s", c.Class, c.CeilingRPS)
		}
		if c.ReserveRPS > 0 {
			reserves = append(reserves, fmt.Sprintf("%s %g/s", c.Class, c.ReserveRPS))
		}
	}
	if len(reserves) > 0 {
		rates += "; reserved from the classes after it: " + strings.Join(reserves, ", ")
	}
	if a.InForceRPS < a.TargetRPS {
		rates += fmt.Sprintf("; in force %g/s", a.InForceRPS)
	}
	return rates
}

// lastClass is the name of a's last class, whose ceiling an override's
// second rate lowers.
func (a Account) lastClass() string {
	if len(a.Classes) == 0 {
		return admission.Marketing.String()
	}
	return a.Classes[len(a.Classes)-1]
}

// sent is a's sends of class; none when the report has none of it.
func (a Account) sent(class string) *Sent {
	if s := a.Sent[class]; s != nil {
		return s
	}
	return &Sent{}
}

// text says o for a person; last is the class whose ceiling its second
// rate lowers.
func (o *Override) text(last string) string {
	if o == nil {
		return "none"
	}
	var parts []string
	if o.TargetRPS > 0 {
		parts = append(parts, fmt.Sprintf("target %g/s", o.TargetRPS))
	}
	if o.MarketingRPS > 0 {
		parts = append(parts, fmt.Sprintf("%s %g/s", last, o.MarketingRPS))
	}
	if o.Ignored != "" {
		parts = append(parts, fmt.Sprintf("ignored: %q holds a rate that is not 0 nor a number of at least %v/s", o.Ignored, admission.MinRPS))
	}
	left := "until cleared"
	if o.LeftSeconds != nil {
		left = fmt.Sprintf("%s left", (time.Duration(*o.LeftSeconds * float64(time.Second))).Round(time.Second))
	}
	return strings.Join(parts, ", ") + ", " + left
}

func (l *Learned) text() string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("%g/s %s (last good %g/s, last throttled %g/s)", l.RPS, l.Mode, l.LowRPS, l.HighRPS)
}

// Text is p for a person: a 429's penalty and its time left, or an
// account pause, its time left and the provider's reason; "none" for no
// penalty. The console's overview says it so too.
func (p *Penalty) Text() string {
	if p == nil {
		return "none"
	}
	left := time.Duration(p.LeftSeconds * float64(time.Second)).Round(100 * time.Millisecond)
	if p.Reason == "account" {
		return fmt.Sprintf("account paused, %v left (%s)", left, p.Detail)
	}
	return fmt.Sprintf("429, %v left", left)
}

// text is h for a person at now, and whether it is worth a line: a
// degraded account, or a run of failures counted on a healthy one.
func (h Health) text(now time.Time) (string, bool) {
	switch {
	case h.State == "degraded":
		since := ""
		if h.Since != nil {
			since = fmt.Sprintf(" for %v (since %s)", max(now.Sub(*h.Since), 0).Round(time.Second), h.Since.Format(time.TimeOnly+" UTC"))
		}
		return fmt.Sprintf("degraded%s, after %d failures in a row: probes only, %d succeeded in a row", since, h.FailuresInARow, h.ProbesOK), true
	case h.FailuresInARow > 0:
		return fmt.Sprintf("healthy, %d failures in a row counted", h.FailuresInARow), true
	}
	return "", false
}

func processesText(ps []Process) string {
	if len(ps) == 0 {
		return "none heard from"
	}
	var alive, silent []string
	for _, p := range ps {
		if p.Alive {
			alive = append(alive, fmt.Sprintf("%s %s", p.ID, p.Mode))
		} else {
			silent = append(silent, fmt.Sprintf("%s %.0fs", p.ID, p.LastBeat))
		}
	}
	s := fmt.Sprintf("%d alive", len(alive))
	if len(alive) > 0 {
		s += ": " + strings.Join(alive, ", ")
	}
	if len(silent) > 0 {
		s += fmt.Sprintf("; %d silent (cut off from Redis, in its fallback, or gone): %s", len(silent), strings.Join(silent, ", "))
	}
	return s
}

// Watch prints read's report every second until ctx ends: redrawn in
// place on a terminal, one line a second (or one JSON object) otherwise.
// An error of read ends it, except on a terminal, where it is shown and
// read again.
func Watch(ctx context.Context, w io.Writer, asJSON, terminal bool, read func() (Report, error)) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		r, err := read()
		switch {
		case ctx.Err() != nil:
			return nil // ^C: the end --watch waits for, not a failure
		case err != nil && !terminal:
			return err
		case err != nil:
			fmt.Fprintf(w, "\x1b[H\x1b[2J%s  status: %v (retrying)\n", time.Now().UTC().Format(time.TimeOnly), err)
		case asJSON:
			if err := json.NewEncoder(w).Encode(r); err != nil {
				return err
			}
		case terminal:
			var b strings.Builder
			b.WriteString("\x1b[H\x1b[2J")
			fmt.Fprintf(&b, "dispatcher status  %s  (every second; Ctrl-C ends)\n\n", r.Time.Format(time.DateTime))
			r.WriteText(&b)
			b.WriteString("\n")
			for _, a := range r.Accounts {
				a.writeSparklines(&b)
			}
			io.WriteString(w, b.String())
		default:
			for _, a := range r.Accounts {
				fmt.Fprintln(w, a.line(r.Time))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// line is a's one line of --watch when stdout is not a terminal.
func (a Account) line(t time.Time) string {
	pen := "-"
	if a.Penalty != nil {
		pen = fmt.Sprintf("%s:%.1fs", a.Penalty.Reason, a.Penalty.LeftSeconds)
	}
	alive, fallback := 0, 0
	for _, p := range a.Processes {
		if p.Alive {
			alive++
		}
		if p.Mode == "fallback" || p.Mode == "silent" {
			fallback++
		}
	}
	var sent strings.Builder
	for _, class := range a.Classes {
		fmt.Fprintf(&sent, " %s=%d", class, a.sent(class).Last1s)
	}
	for _, class := range []string{admission.OTP.String(), admission.Marketing.String()} { // always there, as before classes were configured
		if !slices.Contains(a.Classes, class) {
			fmt.Fprintf(&sent, " %s=%d", class, a.sent(class).Last1s)
		}
	}
	return fmt.Sprintf("%s account=%s%s in_force=%g/s penalty=%s in_flight=%d processes=%d not_deciding_with_redis=%d health=%s",
		t.Format(time.RFC3339), a.Name, sent.String(), a.InForceRPS, pen, a.InFlight, alive, fallback, a.Health.State)
}

// sparks are the eight heights of a sparkline.
var sparks = []rune("▁▂▃▄▅▆▇█")

// writeSparklines draws the last 60 s of each class, scaled so that the
// top is the contract: a second at the contract is a full block, and one
// above it '!'.
func (a Account) writeSparklines(b *strings.Builder) {
	fmt.Fprintf(b, "%s, last 60 s per second (full height: the contract, %g/s; ! above it)\n", a.Name, a.ContractRPS)
	width := len("contract")
	for _, class := range a.Classes {
		width = max(width, len(class))
	}
	for _, class := range a.Classes {
		fmt.Fprintf(b, "  %-*s ", width, class)
		for _, n := range a.sent(class).PerSecond {
			switch f := float64(n) / a.ContractRPS; {
			case n == 0:
				b.WriteRune(' ')
			case f > 1:
				b.WriteRune('!')
			default:
				b.WriteRune(sparks[min(len(sparks)-1, int(f*float64(len(sparks))))])
			}
		}
		fmt.Fprintf(b, " %d/s\n", a.sent(class).Last1s)
	}
	fmt.Fprintf(b, "  %-*s %s %g/s\n", width, "contract", strings.Repeat("─", seconds), a.ContractRPS)
}
