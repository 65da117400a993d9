package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Mode is the process's state for its heartbeat: "fallback" while it
// decides locally, "paused" or "penalty" while it knows of an account
// pause or a 429's penalty, else "ok".
func (l *Limiter) Mode() string {
	penalty, fallback := l.State()
	_, _, paused := l.AccountPause()
	switch {
	case fallback:
		return "fallback"
	case paused:
		return "paused"
	case penalty:
		return "penalty"
	}
	return "ok"
}

// Process is a process that beat within HeartbeatKeep: in the registry
// (Processes), its State is what it said of itself and its accounts (an
// opaque line to this package); on an account's keys (Status, as an older
// process beat), "<mode> <host> <version>".
type Process struct {
	ID       string
	State    string
	LastBeat time.Time
}

// Override is an operator's override in force.
type Override struct {
	TargetRPS, MarketingRPS float64       // 0: that rate is not overridden
	Left                    time.Duration // 0: until cleared
	// Ignored is the key's value when the admission script ignores some of it (a rate
	// that CheckOverrideRate refuses, which counts as 0 above, or a value
	// of another shape); "" otherwise.
	Ignored string
}

// AccountStatus is an account's state as Redis holds it.
type AccountStatus struct {
	Now         time.Time // Redis's clock
	Override    *Override // nil: none
	Learned     Learned
	PenaltyLeft time.Duration // 0: none
	PenaltyWhy  string        // "throttled", or "account:<why>" for an account pause
	InFlight    int           // live in-flight leases
	// Processes are those an older process's heartbeat left on the
	// account's keys, during a rolling deploy; a process of this version
	// beats in the registry (Processes) instead.
	Processes []Process
	// Sent is, by class, the units the provider accepted in each of the
	// seconds asked for, oldest first; Classes are the classes in
	// priority order.
	Sent    map[Class][]int
	Classes []Class

	// LearnedIgnored is the learned rate's state when the admission script ignores it
	// (a rate below MinRPS, or not a state it can read); Learned is then
	// zero. "" otherwise.
	LearnedIgnored string
	// Health is the account's health as the admission script reads it.
	Health HealthStatus
}

// HealthStatus is an account's health as Redis holds it.
type HealthStatus struct {
	Health Health // Healthy with no key, or one of another shape (as the admission script reads it)
	// Since is when the account became Degraded; zero unless it is.
	Since time.Time
	// Failures counts the run of failures in a row: so far while Failing,
	// the run that made it so while Degraded (a failed probe starts
	// ProbesOK again, not this).
	Failures int
	// ProbesOK counts, while Degraded, the probes that succeeded in a row.
	ProbesOK int
}

// parseHealth reads the health key's value (the admission script's header gives its
// format); any other shape, "" among them, is healthy, as the admission script reads
// it.
func parseHealth(v string) HealthStatus {
	f := strings.Split(v, " ")
	if len(f) != 7 || (f[0] != "h" && f[0] != "d") {
		return HealthStatus{}
	}
	var n [7]int64
	for i := 1; i < 7; i++ {
		x, err := strconv.ParseUint(f[i], 10, 63)
		if err != nil {
			return HealthStatus{}
		}
		n[i] = int64(x)
	}
	if f[0] == "h" && n[1] == 0 {
		return HealthStatus{} // healthy again, kept for finish.lua's rule of old sends
	}
	if f[0] == "h" {
		return HealthStatus{Health: Failing, Failures: int(n[1])}
	}
	return HealthStatus{Health: Degraded, Since: time.UnixMicro(n[6]), Failures: int(n[1]), ProbesOK: int(n[4])}
}

// Status reads the account's state in one script call that writes
// nothing: its override, learned rate, penalty, leases, processes and
// health, and the units sent in each of the seconds from-seconds+1 to from
// (the process's clock, as Settle counts them).
func (l *Limiter) Status(ctx context.Context, from time.Time, seconds int) (AccountStatus, error) {
	a := l.base
	call := statusCall{Override: a.Override, Learned: a.Learned, Penalty: a.Penalty, Leases: a.Leases,
		Processes: l.tag + ":processes", States: l.tag + ":process-states", Health: a.Health}
	for _, c := range l.order {
		for i := seconds - 1; i >= 0; i-- {
			call.Sent = append(call.Sent, l.SentKey(c, from.Add(-time.Duration(i)*time.Second)))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.RedisTimeout, time.Second))
	defer cancel()
	// EVALSHA_RO: Redis refuses any write the script would make, so that
	// reading the state can never change it.
	v, err := statusScript.RunRO(ctx, l.rdb, call.keys(), call.argv()...).Slice()
	if err != nil {
		return AccountStatus{}, fmt.Errorf("status: %w", err)
	}
	return parseStatus(v, seconds, l.Classes())
}

func parseStatus(v []any, seconds int, classes []Class) (AccountStatus, error) {
	bad := func() (AccountStatus, error) {
		return AccountStatus{}, fmt.Errorf("%w: status.lua answered %v", ErrBadReply, v)
	}
	if len(v) != 10 {
		return bad()
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	num := func(i int) int64 { n, _ := v[i].(int64); return n }
	nowUS, err := strconv.ParseInt(str(0), 10, 64)
	if err != nil {
		return bad()
	}
	st := AccountStatus{Now: time.UnixMicro(nowUS), InFlight: int(num(6)), Health: parseHealth(str(9))}
	if o := str(1); o != "" {
		// As the admission script reads it: '<target> <marketing>', each rate on its
		// own.
		ov := &Override{}
		t, m, ok := strings.Cut(o, " ")
		if !ok || strings.Contains(m, " ") {
			ov.Ignored = o
		} else {
			for _, r := range []struct {
				v  string
				to *float64
			}{{t, &ov.TargetRPS}, {m, &ov.MarketingRPS}} {
				if x, err := strconv.ParseFloat(r.v, 64); err == nil && CheckOverrideRate(x) == nil {
					*r.to = x
				} else {
					ov.Ignored = o
				}
			}
		}
		if ms := num(2); ms > 0 {
			ov.Left = time.Duration(ms) * time.Millisecond
		}
		st.Override = ov
	}
	if st.Learned, err = parseLearned(str(3)); err != nil {
		st.Learned, st.LearnedIgnored = Learned{}, str(3)
	}
	if p := str(4); p != "" && num(5) > 0 {
		st.PenaltyWhy, st.PenaltyLeft = p, time.Duration(num(5))*time.Millisecond
	}
	procs, ok := parseProcesses(v[7])
	if !ok {
		return bad()
	}
	st.Processes = procs
	sent, _ := v[8].([]any)
	if len(sent) != len(classes)*seconds {
		return bad()
	}
	st.Sent, st.Classes = make(map[Class][]int, len(classes)), classes
	for i, x := range sent {
		n, _ := x.(int64)
		c := classes[i/seconds]
		st.Sent[c] = append(st.Sent[c], int(n))
	}
	return st, nil
}
