package admission

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The process registry: every process's heartbeat, whatever its accounts,
// in a hash slot of its own (docs/decisions.md, "Operators read the same keys").
const (
	ProcessesKey     = "{sms:processes}"        // process id -> its last beat (µs, Redis TIME)
	ProcessStatesKey = "{sms:processes}:states" // process id -> its state
)

// HeartbeatKeep is how long a process that stopped beating stays listed by
// Processes: a process cut off from Redis (in its fallback) stops beating,
// and is shown silent until then; a dead one is gone after it.
const HeartbeatKeep = 30 * time.Second

// Account is the account the limiter admits on.
func (l *Limiter) Account() string { return l.cfg.Account }

// Heartbeat records in the registry that the process id is alive, and its
// state (opaque here: status says what it holds of each account): one
// script call, through the circuit (a Redis known down is not asked). Any
// of the process's limiters beats for all of them, once a second.
func (l *Limiter) Heartbeat(ctx context.Context, id, state string) error {
	call := heartbeatCall{Processes: ProcessesKey, States: ProcessStatesKey,
		ID: id, State: state, Millis: HeartbeatKeep.Milliseconds()}
	return l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		if err := heartbeatScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Err(); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		return nil
	})
}

// setHealth keeps the account's health as a script reply said it, and
// when.
func (l *Limiter) setHealth(h Health) {
	l.health.Store(int32(h))
	l.healthAt.Store(l.clock.Now().UnixNano())
}

// HealthAge is how long ago a script reply last told the account's
// health (an admission's, a settle's, RefreshHealth's); the longest
// duration if none ever did.
func (l *Limiter) HealthAge() time.Duration {
	at := l.healthAt.Load()
	if at == 0 {
		return math.MaxInt64
	}
	return l.clock.Now().Sub(time.Unix(0, at))
}

// RefreshHealth reads the account's health into Health: one read-only
// script call, through the circuit. A process that sends nothing on the
// account, and so makes no other script call there, learns its health so.
func (l *Limiter) RefreshHealth(ctx context.Context) error {
	call := healthCall{Health: l.base.Health}
	return l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		h, err := healthScript.RunRO(ctx, l.rdb, call.keys(), call.argv()...).Int64()
		if err != nil {
			return fmt.Errorf("health: %w", err)
		}
		if h < int64(Healthy) || h > int64(Degraded) {
			return fmt.Errorf("%w: health.lua answered %d", ErrBadReply, h)
		}
		// A reply of an admission or a settle that crossed this one may be
		// overwritten by an older state; the next reply of any of them
		// sets it right.
		l.setHealth(Health(h))
		return nil
	})
}

// Processes reads the registry in one script call that writes nothing:
// Redis's clock, and every process that beat within HeartbeatKeep.
func (l *Limiter) Processes(ctx context.Context) (time.Time, []Process, error) {
	call := processesCall{Processes: ProcessesKey, States: ProcessStatesKey}
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.RedisTimeout, time.Second))
	defer cancel()
	v, err := processesScript.RunRO(ctx, l.rdb, call.keys(), call.argv()...).Slice()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("processes: %w", err)
	}
	bad := fmt.Errorf("%w: processes.lua answered %v", ErrBadReply, v)
	if len(v) != 2 {
		return time.Time{}, nil, bad
	}
	s, _ := v[0].(string)
	nowUS, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, nil, bad
	}
	procs, ok := parseProcesses(v[1])
	if !ok {
		return time.Time{}, nil, bad
	}
	return time.UnixMicro(nowUS), procs, nil
}

// parseProcesses reads a script's {id, last_beat_us, state, ...}; ok is
// false if a beat is not a number.
func parseProcesses(v any) (procs []Process, ok bool) {
	list, _ := v.([]any)
	for i := 0; i+2 < len(list); i += 3 {
		id, _ := list[i].(string)
		score, _ := list[i+1].(string)
		state, _ := list[i+2].(string)
		us, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return nil, false
		}
		procs = append(procs, Process{ID: id, State: state, LastBeat: time.UnixMicro(int64(us))})
	}
	return procs, true
}
