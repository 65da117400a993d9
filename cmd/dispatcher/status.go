package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// statusSeconds is how many whole seconds of sends status reads: the
// last 1, 10 and 60 s come from them, and --watch draws them.
const statusSeconds = 60

// aliveWithin is how recent a process's last heartbeat must be for status
// to call it alive; a quieter one is silent (cut off from Redis, in its
// fallback, or dead) until admission.HeartbeatKeep drops it.
const aliveWithin = 3 * heartbeatEvery

// runStatus is `dispatcher status`: each account's state as Redis holds it,
// once, or every second with --watch. It only reads.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	load := configFlags(fs, config.Redis|config.Accounts, environ)
	asJSON := fs.Bool("json", false, "print one JSON object (docs/operating.md, \"Status\"); with --watch, one a second")
	watch := fs.Bool("watch", false, "redraw every second, with the last 60 s of sends per class against the contract; one line a second when stdout is not a terminal")
	name := fs.String("on", "", "show only this account")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	const timeout = 2 * time.Second
	rdb, err := operatorRedis(cfg, "status reads the limiter's Redis", timeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	setups, err := cfg.Accounts()
	if err != nil {
		return err
	}
	if *name != "" {
		s, err := pickAccount(setups, *name)
		if err != nil {
			return err
		}
		setups = []config.Account{s}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err = rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("status: redis unreachable: %v", err) // the URL is not printed: it may hold a password
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var lims []*admission.Limiter
	for _, s := range setups {
		lim, err := operatorLimiter(rdb, cfg, s, timeout, quiet)
		if err != nil {
			return err
		}
		lims = append(lims, lim)
	}
	read := func() (statusReport, error) { return readStatus(ctx, setups, lims, time.Now()) }
	if !*watch {
		r, err := read()
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(r)
		}
		r.writeText(stdout)
		return nil
	}
	return watchStatus(ctx, stdout, *asJSON, isTerminal(stdout), read)
}

// statusReport is what status prints; its JSON is documented in
// docs/operating.md ("Status") and stable: fields are added, never renamed.
type statusReport struct {
	Time     time.Time       `json:"time"`
	Accounts []accountReport `json:"accounts"`
}

type accountReport struct {
	Name         string   `json:"name"`
	Provider     string   `json:"provider"`
	Classes      []string `json:"classes"`
	RateUnit     string   `json:"rate_unit"`
	ContractRPS  float64  `json:"contract_rps"`
	TargetRPS    float64  `json:"target_rps"`
	MarketingRPS float64  `json:"marketing_rps"`
	// InForceRPS is the target in force: the lowest of the configured
	// target, the override's and the learned rate.
	InForceRPS float64                `json:"in_force_rps"`
	Override   *overrideReport        `json:"override"`
	Learned    *learnedReport         `json:"learned"`
	Sent       map[string]*sentReport `json:"sent"`
	Penalty    *penaltyReport         `json:"penalty"`
	InFlight   int                    `json:"in_flight"`
	Processes  []processReport        `json:"processes"`

	// LearnedIgnored is the learned rate's state in Redis when the
	// admission script ignores it (a rate below the minimum, or no state
	// it can read).
	LearnedIgnored string `json:"learned_ignored,omitempty"`
}

type overrideReport struct {
	TargetRPS    float64  `json:"target_rps"`    // 0: not overridden
	MarketingRPS float64  `json:"marketing_rps"` // 0: not overridden
	LeftSeconds  *float64 `json:"left_seconds"`  // null: until cleared
	// Ignored is the override's value in Redis when the admission script
	// ignores some of it (a rate that is not a number of at least the
	// minimum counts as 0 above).
	Ignored string `json:"ignored,omitempty"`
}

type learnedReport struct {
	RPS     float64 `json:"rps"`
	Mode    string  `json:"mode"` // searching, probing, settled, pinned
	LowRPS  float64 `json:"low_rps"`
	HighRPS float64 `json:"high_rps"`
}

type sentReport struct {
	Last1s  int `json:"last_1s"`
	Last10s int `json:"last_10s"`
	Last60s int `json:"last_60s"`
	// PerSecond is the units sent in each of the last 60 whole seconds,
	// oldest first.
	PerSecond []int `json:"per_second"`
}

type penaltyReport struct {
	LeftSeconds float64 `json:"left_seconds"`
	Reason      string  `json:"reason"` // "429", or "account" for an account-level pause
	Detail      string  `json:"detail,omitempty"`
}

type processReport struct {
	ID       string  `json:"id"`
	Host     string  `json:"host"`
	Version  string  `json:"version"`
	Mode     string  `json:"mode"` // ok, penalty, paused, fallback; "silent" when it stopped beating
	LastBeat float64 `json:"last_beat_seconds_ago"`
	Alive    bool    `json:"alive"`
}

// readStatus reads every account at now.
func readStatus(ctx context.Context, setups []config.Account, lims []*admission.Limiter, now time.Time) (statusReport, error) {
	r := statusReport{Time: now.UTC()}
	// The whole seconds before the current one: a second still being
	// counted would read low.
	last := now.Truncate(time.Second).Add(-time.Second)
	for i, s := range setups {
		st, err := lims[i].Status(ctx, last, statusSeconds)
		if err != nil {
			return statusReport{}, fmt.Errorf("account %s: %w", s.Name, err)
		}
		r.Accounts = append(r.Accounts, accountOf(s, st))
	}
	return r, nil
}

// accountOf is the report of account s from its state st.
func accountOf(s config.Account, st admission.AccountStatus) accountReport {
	c := s
	a := accountReport{Name: c.Name, Provider: c.Provider, RateUnit: c.RateUnit,
		ContractRPS: c.ContractRPS, TargetRPS: c.TargetRPS, MarketingRPS: c.MarketingRPS, InForceRPS: c.TargetRPS,
		InFlight: st.InFlight, Sent: map[string]*sentReport{}, Processes: []processReport{}}
	for _, class := range s.Classes {
		a.Classes = append(a.Classes, class.String())
	}
	if o := st.Override; o != nil {
		a.Override = &overrideReport{TargetRPS: o.TargetRPS, MarketingRPS: o.MarketingRPS, Ignored: o.Ignored}
		if o.Left > 0 {
			left := o.Left.Seconds()
			a.Override.LeftSeconds = &left
		}
		if o.TargetRPS > 0 {
			a.InForceRPS = min(a.InForceRPS, o.TargetRPS)
		}
	}
	a.LearnedIgnored = st.LearnedIgnored
	if l := st.Learned; l.RPS > 0 {
		a.Learned = &learnedReport{RPS: l.RPS, Mode: l.Mode, LowRPS: l.Low, HighRPS: l.High}
		if s.Adaptive.Enabled || l.Mode == "pinned" { // else inert (docs/operating.md)
			a.InForceRPS = min(a.InForceRPS, l.RPS)
		}
	}
	for _, class := range []admission.Class{admission.OTP, admission.Marketing} {
		per := st.Sent[class]
		sr := &sentReport{PerSecond: per}
		for i, n := range per {
			age := len(per) - i
			if age <= 1 {
				sr.Last1s += n
			}
			if age <= 10 {
				sr.Last10s += n
			}
			sr.Last60s += n
		}
		a.Sent[class.String()] = sr
	}
	if st.PenaltyLeft > 0 {
		p := &penaltyReport{LeftSeconds: st.PenaltyLeft.Seconds(), Reason: "429"}
		if detail, ok := strings.CutPrefix(st.PenaltyWhy, "account:"); ok {
			p.Reason, p.Detail = "account", detail
		}
		a.Penalty = p
	}
	for _, p := range st.Processes {
		f := strings.Fields(p.State)
		pr := processReport{ID: p.ID, Mode: "unknown", LastBeat: st.Now.Sub(p.LastBeat).Seconds()}
		if len(f) == 3 {
			pr.Mode, pr.Host, pr.Version = f[0], f[1], f[2]
		}
		pr.Alive = st.Now.Sub(p.LastBeat) <= aliveWithin
		if !pr.Alive {
			pr.Mode = "silent"
		}
		a.Processes = append(a.Processes, pr)
	}
	slices.SortFunc(a.Processes, func(x, y processReport) int { return strings.Compare(x.ID, y.ID) })
	return a
}

// writeText prints r for a person.
func (r statusReport) writeText(w io.Writer) {
	for i, a := range r.Accounts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "account %s: %s, serves %s, rates in %ss\n", a.Name, a.Provider, strings.Join(a.Classes, " and "), a.RateUnit)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		rates := fmt.Sprintf("contract %g/s, target %g/s, marketing %g/s", a.ContractRPS, a.TargetRPS, a.MarketingRPS)
		if a.InForceRPS < a.TargetRPS {
			rates += fmt.Sprintf("; in force %g/s", a.InForceRPS)
		}
		fmt.Fprintf(tw, "  rates\t%s\n", rates)
		fmt.Fprintf(tw, "  override\t%s\n", a.Override.text())
		learned := a.Learned.text()
		if a.LearnedIgnored != "" {
			learned = fmt.Sprintf("ignored: %q is no learned rate of at least %v/s", a.LearnedIgnored, admission.MinRPS)
		}
		fmt.Fprintf(tw, "  learned\t%s\n", learned)
		for _, class := range []string{"otp", "marketing"} {
			s := a.Sent[class]
			fmt.Fprintf(tw, "  sent %s\t%d in the last 1 s, %d in 10 s (%.1f/s), %d in 60 s (%.1f/s)\n",
				class, s.Last1s, s.Last10s, float64(s.Last10s)/10, s.Last60s, float64(s.Last60s)/60)
		}
		fmt.Fprintf(tw, "  penalty\t%s\n", a.Penalty.text())
		fmt.Fprintf(tw, "  in flight\t%d\n", a.InFlight)
		fmt.Fprintf(tw, "  processes\t%s\n", processesText(a.Processes))
		tw.Flush()
	}
}

func (o *overrideReport) text() string {
	if o == nil {
		return "none"
	}
	var parts []string
	if o.TargetRPS > 0 {
		parts = append(parts, fmt.Sprintf("target %g/s", o.TargetRPS))
	}
	if o.MarketingRPS > 0 {
		parts = append(parts, fmt.Sprintf("marketing %g/s", o.MarketingRPS))
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

func (l *learnedReport) text() string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("%g/s %s (last good %g/s, last throttled %g/s)", l.RPS, l.Mode, l.LowRPS, l.HighRPS)
}

func (p *penaltyReport) text() string {
	if p == nil {
		return "none"
	}
	left := time.Duration(p.LeftSeconds * float64(time.Second)).Round(100 * time.Millisecond)
	if p.Reason == "account" {
		return fmt.Sprintf("account paused, %v left (%s)", left, p.Detail)
	}
	return fmt.Sprintf("429, %v left", left)
}

func processesText(ps []processReport) string {
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

// watchStatus prints read's report every second until ctx ends: redrawn in
// place on a terminal, one line a second (or one JSON object) otherwise.
func watchStatus(ctx context.Context, w io.Writer, asJSON, terminal bool, read func() (statusReport, error)) error {
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
			r.writeText(&b)
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
func (a accountReport) line(t time.Time) string {
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
	return fmt.Sprintf("%s account=%s otp=%d marketing=%d in_force=%g/s penalty=%s in_flight=%d processes=%d not_deciding_with_redis=%d",
		t.Format(time.RFC3339), a.Name, a.Sent["otp"].Last1s, a.Sent["marketing"].Last1s, a.InForceRPS, pen, a.InFlight, alive, fallback)
}

// sparks are the eight heights of a sparkline.
var sparks = []rune("▁▂▃▄▅▆▇█")

// writeSparklines draws the last 60 s of each class, scaled so that the
// top is the contract: a second at the contract is a full block, and one
// above it '!'.
func (a accountReport) writeSparklines(b *strings.Builder) {
	fmt.Fprintf(b, "%s, last 60 s per second (full height: the contract, %g/s; ! above it)\n", a.Name, a.ContractRPS)
	for _, class := range []string{"otp", "marketing"} {
		fmt.Fprintf(b, "  %-9s ", class)
		for _, n := range a.Sent[class].PerSecond {
			switch f := float64(n) / a.ContractRPS; {
			case n == 0:
				b.WriteRune(' ')
			case f > 1:
				b.WriteRune('!')
			default:
				b.WriteRune(sparks[min(len(sparks)-1, int(f*float64(len(sparks))))])
			}
		}
		fmt.Fprintf(b, " %d/s\n", a.Sent[class].Last1s)
	}
	fmt.Fprintf(b, "  %-9s %s %g/s\n", "contract", strings.Repeat("─", statusSeconds), a.ContractRPS)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
