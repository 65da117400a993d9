package status

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
)

// accountState is an account's state as Redis holds it (status.lua).
type accountState struct {
	Now         time.Time      // Redis's clock
	Override    *overrideState // nil: none
	Learned     admission.Learned
	PenaltyLeft time.Duration // 0: none
	PenaltyWhy  string        // "throttled", or "account:<why>" for an account pause
	InFlight    int           // live in-flight leases
	// Processes are those an older process's heartbeat left on the
	// account's keys, during a rolling deploy (a process of this version
	// beats in the registry instead), and Read adds those the registry
	// lists with the account.
	Processes []listed
	// Sent is, by class, the units the provider accepted in each of the
	// seconds asked for, oldest first; Classes are the classes in
	// priority order.
	Sent    map[admission.Class][]int
	Classes []admission.Class

	// LearnedIgnored is the learned rate's state when the admission script ignores it
	// (a rate below admission.MinRPS, or not a state it can read); Learned
	// is then zero. "" otherwise.
	LearnedIgnored string
	Health         healthState // as the admission script reads it
}

// overrideState is an operator's override in force.
type overrideState struct {
	TargetRPS, MarketingRPS float64       // 0: that rate is not overridden
	Left                    time.Duration // 0: until cleared
	// Ignored is the key's value when the admission script ignores some of it (a rate
	// that admission.CheckOverrideRate refuses, which counts as 0 above,
	// or a value of another shape); "" otherwise.
	Ignored string
}

// healthState is an account's health as Redis holds it.
type healthState struct {
	Health admission.Health // Healthy with no key, or one of another shape (as the admission script reads it)
	// Since is when the account became Degraded; zero unless it is.
	Since time.Time
	// Failures counts the run of failures in a row: so far while Failing,
	// the run that made it so while Degraded (a failed probe starts
	// ProbesOK again, not this).
	Failures int
	// ProbesOK counts, while Degraded, the probes that succeeded in a row.
	ProbesOK int
}

// readAccount reads the state of lim's account in one script call that
// writes nothing: its override, learned rate, penalty, leases, processes
// and health, and the units sent in each of the seconds from-seconds+1 to
// from (the process's clock, as the limiter counts them).
func (r Redis) readAccount(ctx context.Context, lim *admission.Limiter, from time.Time, seconds int) (accountState, error) {
	key := keys.For(lim.Account())
	names := []string{key.RateOverride(), key.Learned(), key.Penalty(), key.Leases(),
		key.LegacyProcesses(), key.LegacyProcessStates(), key.Health()}
	for _, c := range lim.Classes() {
		for i := seconds - 1; i >= 0; i-- {
			names = append(names, key.Sent(c.String(), from.Add(-time.Duration(i)*time.Second).Unix()))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.readTimeout())
	defer cancel()
	// EVALSHA_RO: Redis refuses any write the script would make, so that
	// reading the state can never change it.
	v, err := statusScript.RunRO(ctx, r.Client, names).Slice()
	if err != nil {
		return accountState{}, fmt.Errorf("status: %w", err)
	}
	return parseAccount(v, seconds, lim.Classes())
}

// parseAccount reads status.lua's reply.
func parseAccount(v []any, seconds int, classes []admission.Class) (accountState, error) {
	bad := fmt.Errorf("%w: status.lua answered %v", admission.ErrBadReply, v)
	if len(v) != 10 {
		return accountState{}, bad
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	num := func(i int) int64 { n, _ := v[i].(int64); return n }
	nowUS, err := strconv.ParseInt(str(0), 10, 64)
	if err != nil {
		return accountState{}, bad
	}
	st := accountState{Now: time.UnixMicro(nowUS), InFlight: int(num(6)), Health: parseHealth(str(9))}
	if o := str(1); o != "" {
		st.Override = parseOverride(o, num(2))
	}
	if st.Learned, err = admission.ParseLearned(str(3)); err != nil {
		st.Learned, st.LearnedIgnored = admission.Learned{}, str(3)
	}
	if p := str(4); p != "" && num(5) > 0 {
		st.PenaltyWhy, st.PenaltyLeft = p, time.Duration(num(5))*time.Millisecond
	}
	procs, ok := parseProcesses(v[7])
	if !ok {
		return accountState{}, bad
	}
	st.Processes = procs
	sent, _ := v[8].([]any)
	if len(sent) != len(classes)*seconds {
		return accountState{}, bad
	}
	st.Sent, st.Classes = make(map[admission.Class][]int, len(classes)), classes
	for i, x := range sent {
		n, _ := x.(int64)
		c := classes[i/seconds]
		st.Sent[c] = append(st.Sent[c], int(n))
	}
	return st, nil
}

// parseOverride reads the override's value o, with ms left to run (0 or
// less: until cleared), as the admission script reads it: '<target> <marketing>', each
// rate on its own.
func parseOverride(o string, ms int64) *overrideState {
	ov := &overrideState{}
	t, m, ok := strings.Cut(o, " ")
	if !ok || strings.Contains(m, " ") {
		ov.Ignored = o
	} else {
		for _, r := range []struct {
			v  string
			to *float64
		}{{t, &ov.TargetRPS}, {m, &ov.MarketingRPS}} {
			if x, err := strconv.ParseFloat(r.v, 64); err == nil && admission.CheckOverrideRate(x) == nil {
				*r.to = x
			} else {
				ov.Ignored = o
			}
		}
	}
	if ms > 0 {
		ov.Left = time.Duration(ms) * time.Millisecond
	}
	return ov
}

// parseHealth reads the health key's value (admit/health.lua's header gives its
// format); any other shape, "" among them, is healthy, as the admission script reads
// it.
func parseHealth(v string) healthState {
	f := strings.Split(v, " ")
	if len(f) != 7 || (f[0] != "h" && f[0] != "d") {
		return healthState{}
	}
	var n [7]int64
	for i := 1; i < 7; i++ {
		x, err := strconv.ParseUint(f[i], 10, 63)
		if err != nil {
			return healthState{}
		}
		n[i] = int64(x)
	}
	if f[0] == "h" && n[1] == 0 {
		return healthState{} // healthy again, kept for finish.lua's rule of old sends
	}
	if f[0] == "h" {
		return healthState{Health: admission.Failing, Failures: int(n[1])}
	}
	return healthState{Health: admission.Degraded, Since: time.UnixMicro(n[6]), Failures: int(n[1]), ProbesOK: int(n[4])}
}

// modeOf is the mode lim's process is in on its account, for its
// heartbeat: "fallback" while it decides locally, "paused" or "penalty"
// while it knows of an account pause or a 429's penalty, else "ok".
func modeOf(lim *admission.Limiter) string {
	st := lim.State()
	switch {
	case st.Fallback:
		return "fallback"
	case st.Paused:
		return "paused"
	case st.Penalty:
		return "penalty"
	}
	return "ok"
}
