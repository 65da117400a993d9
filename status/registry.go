package status

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
)

// The process registry: every process's heartbeat, whatever its accounts,
// in a hash slot of its own (docs/decisions.md, "Operators read the same
// keys"): keys.Processes, process id -> its last beat (µs, Redis TIME), and
// keys.ProcessStates, process id -> its state.

// heartbeatKeep is how long a process that stopped beating stays listed
// in the registry: a process cut off from Redis (in its fallback) stops
// beating, and is shown silent until then; a dead one is gone after it.
const heartbeatKeep = 30 * time.Second

// Redis is the Redis the accounts' limiters share, as this package beats
// on it and reads it.
type Redis struct {
	Client redis.Scripter // *redis.Client or *redis.ClusterClient
	// Circuit is the limiters' view of Redis's health
	// (admission.WithCircuit): a beat does not ask a Redis known down.
	// Reads ask regardless.
	Circuit *admission.Circuit
	// Timeout bounds a beat (the limiters' RedisTimeout; 0 means
	// admission.DefaultRedisTimeout), and a read at least 1s.
	Timeout time.Duration
}

func (r Redis) timeout() time.Duration { return cmp.Or(r.Timeout, admission.DefaultRedisTimeout) }

// readTimeout bounds a read, which an operator waits for.
func (r Redis) readTimeout() time.Duration { return max(r.timeout(), time.Second) }

// listed is a process that beat within heartbeatKeep: in the registry,
// its state is what it said of itself and its accounts (registryState);
// on an account's keys (readAccount, as an older process beat), "<mode>
// <host> <version>".
type listed struct {
	ID       string
	State    string
	LastBeat time.Time
	// Denied is, by class, what the process denied on the account its
	// listing is for (listings); nil for an older process's beat.
	Denied map[string]int64
}

// heartbeat records in the registry that the process id is alive, and its
// state: one script call, through the circuit (a Redis known down is not
// asked).
func (r Redis) heartbeat(ctx context.Context, id, state string) error {
	return r.Circuit.Do(ctx, r.timeout(), func(ctx context.Context) error {
		registry := []string{keys.Processes(), keys.ProcessStates()}
		if err := heartbeatScript.Run(ctx, r.Client, registry, id, state, heartbeatKeep.Milliseconds()).Err(); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		return nil
	})
}

// processes reads the registry in one script call that writes nothing:
// Redis's clock, and every process that beat within heartbeatKeep.
func (r Redis) processes(ctx context.Context) (time.Time, []listed, error) {
	ctx, cancel := context.WithTimeout(ctx, r.readTimeout())
	defer cancel()
	v, err := processesScript.RunRO(ctx, r.Client, []string{keys.Processes(), keys.ProcessStates()}).Slice()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("processes: %w", err)
	}
	bad := fmt.Errorf("%w: processes.lua answered %v", admission.ErrBadReply, v)
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
func parseProcesses(v any) (procs []listed, ok bool) {
	list, _ := v.([]any)
	for i := 0; i+2 < len(list); i += 3 {
		id, _ := list[i].(string)
		score, _ := list[i+1].(string)
		state, _ := list[i+2].(string)
		us, err := strconv.ParseFloat(score, 64)
		if err != nil {
			return nil, false
		}
		procs = append(procs, listed{ID: id, State: state, LastBeat: time.UnixMicro(int64(us))})
	}
	return procs, true
}
