package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HeartbeatKeep is how long a process that stopped beating stays listed by
// Status: a process cut off from Redis (in its fallback) stops beating, and
// is shown silent until then; a dead one is gone after it.
const HeartbeatKeep = 30 * time.Second

// Heartbeat records that the process id is alive on the account and its
// state ("<mode> <host> <version>"), and reads the account's health into
// Health: one script call, through the circuit (a Redis known down is not
// asked). Call it at most once a second: a process that sends nothing on
// the account, and so makes no other script call there, learns its health
// within a beat.
func (l *Limiter) Heartbeat(ctx context.Context, id, state string) error {
	call := heartbeatCall{Processes: l.tag + ":processes", States: l.tag + ":process-states", Health: l.base.Health,
		ID: id, State: state, Millis: HeartbeatKeep.Milliseconds()}
	return l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		v, err := heartbeatScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Int64Slice()
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		h, err := parseHeartbeat(v)
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		// A reply of an admission or a settle that crossed this one may be
		// overwritten by an older state; the next reply of any of them
		// sets it right.
		l.health.Store(int32(h))
		return nil
	})
}

// parseHeartbeat reads heartbeat.lua's {listed, health}.
func parseHeartbeat(v []int64) (Health, error) {
	if len(v) != 2 || v[1] < int64(Healthy) || v[1] > int64(Degraded) {
		return 0, fmt.Errorf("%w: heartbeat.lua answered %v", ErrBadReply, v)
	}
	return Health(v[1]), nil
}

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

// Process is a process that beat on the account within HeartbeatKeep.
type Process struct {
	ID       string
	State    string // as it last said: "<mode> <host> <version>"
	LastBeat time.Time
}

// Override is an operator's override in force.
type Override struct {
	TargetRPS, MarketingRPS float64       // 0: that rate is not overridden
	Left                    time.Duration // 0: until cleared
	// Ignored is the key's value when gcra.lua ignores some of it (a rate
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
	Processes   []Process
	// Sent is, by class, the units the provider accepted in each of the
	// seconds asked for, oldest first; Classes are the classes in
	// priority order.
	Sent    map[Class][]int
	Classes []Class

	// LearnedIgnored is the learned rate's state when gcra.lua ignores it
	// (a rate below MinRPS, or not a state it can read); Learned is then
	// zero. "" otherwise.
	LearnedIgnored string
	// Health is the account's health as gcra.lua reads it.
	Health HealthStatus
}

// HealthStatus is an account's health as Redis holds it.
type HealthStatus struct {
	Health Health // Healthy with no key, or one of another shape (as gcra.lua reads it)
	// Since is when the account became Degraded; zero unless it is.
	Since time.Time
	// Failures counts the run of failures in a row: so far while Failing,
	// the run that made it so while Degraded (a failed probe starts
	// ProbesOK again, not this).
	Failures int
	// ProbesOK counts, while Degraded, the probes that succeeded in a row.
	ProbesOK int
}

// parseHealth reads the health key's value (gcra.lua's header gives its
// format); any other shape, "" among them, is healthy, as gcra.lua reads
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
		// As gcra.lua reads it: '<target> <marketing>', each rate on its
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
	procs, _ := v[7].([]any)
	for i := 0; i+2 < len(procs); i += 3 {
		id, _ := procs[i].(string)
		score, _ := procs[i+1].(string)
		state, _ := procs[i+2].(string)
		us, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return bad()
		}
		st.Processes = append(st.Processes, Process{ID: id, State: state, LastBeat: time.UnixMicro(int64(us))})
	}
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
