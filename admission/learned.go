package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Learned is the state of an account's learned rate (Config.Adaptive), as
// Redis holds it and every process shares it.
type Learned struct {
	// RPS is the rate in force, in the account's unit per second; 0 when
	// nothing was learned and the configured rates hold.
	RPS float64
	// Low is the highest rate proven good (no 429 while the account was
	// pressed), High the last rate throttled; 0 when not known.
	Low, High float64
	// Mode is "searching", "probing" (one step above a settled rate),
	// "settled", "pinned" (by an operator), or "" when nothing was learned.
	Mode string
	// Next is when the search may next move up (zero when pinned or none).
	Next time.Time
}

// maxScriptNumber is the largest number the scripts write or take from
// Redis, 2^53 - 1: past it a Lua double is no longer an integer.
const maxScriptNumber = 1<<53 - 1

var learnedModes = map[string]string{"s": "searching", "u": "probing", "p": "settled", "P": "pinned"}

// ParseLearned reads learned.lua's and the admission script's state string, the
// learned rate's key as status reads it too. A state the scripts ignore
// (a rate below MinRPS, a number past 2^53 or not a number) is an error
// wrapping ErrBadReply: no process is held to it.
func ParseLearned(v string) (Learned, error) {
	if v == "" {
		return Learned{}, nil
	}
	f := strings.Fields(v)
	if len(f) != 7 {
		return Learned{}, fmt.Errorf("%w: learned state %q", ErrBadReply, v)
	}
	var n [4]float64
	for i := range n {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil || !(x >= 0 && x <= maxScriptNumber) || (i == 0 && x < MinRPS) {
			return Learned{}, fmt.Errorf("%w: learned state %q", ErrBadReply, v)
		}
		n[i] = x
	}
	mode, ok := learnedModes[f[4]]
	if cut, err := strconv.ParseFloat(f[5], 64); !ok || err != nil || !(cut >= 0 && cut <= maxScriptNumber) {
		return Learned{}, fmt.Errorf("%w: learned state %q", ErrBadReply, v)
	}
	s := Learned{RPS: n[0], Low: n[1], High: n[2], Mode: mode}
	if n[3] > 0 {
		s.Next = time.UnixMicro(int64(n[3]))
	}
	return s, nil
}

// learnedRPS returns the learned rate as the last Redis answer of this
// process said, 0 when none is in force (the configured rates hold).
func (l *Limiter) learnedRPS() float64 { return float64(l.learned.Load()) / 1000 }

// Learned reads the account's learned rate from Redis.
func (l *Limiter) Learned(ctx context.Context) (Learned, error) {
	return l.learnedOp(ctx, "get", 0)
}

// PinLearned holds the account's rate at rps (at least Adaptive.MinRPS, or
// MinRPS when the account does not learn, and at most TargetRPS) for every
// process: the search stops. rps 0 unpins: the learned rate is forgotten,
// and the configured rates hold again until the next 429 starts a new
// search.
func (l *Limiter) PinLearned(ctx context.Context, rps float64) (Learned, error) {
	if rps == 0 {
		return l.learnedOp(ctx, "reset", 0)
	}
	lo := MinRPS
	if l.cfg.Adaptive.Enabled {
		lo = l.cfg.Adaptive.MinRPS
	}
	if !(rps >= lo) || rps > l.cfg.TargetRPS {
		return Learned{}, fmt.Errorf("admission: a pinned rate must be %v to TargetRPS (%v), got %v", lo, l.cfg.TargetRPS, rps)
	}
	return l.learnedOp(ctx, "pin", rps)
}

func (l *Limiter) learnedOp(ctx context.Context, op string, rps float64) (Learned, error) {
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.RedisTimeout, time.Second))
	defer cancel()
	call := learnedCall{Learned: l.base.Learned, Op: op, Rate: strconv.FormatFloat(rps, 'f', 3, 64)}
	v, err := learnedScript.Run(ctx, l.rdb, call.keys(), call.argv()...).Slice()
	if err != nil {
		return Learned{}, fmt.Errorf("learned rate %s: %w", op, err)
	}
	if len(v) != 2 {
		return Learned{}, fmt.Errorf("%w: learned.lua answered %v", ErrBadReply, v)
	}
	s, _ := v[0].(string)
	st, err := ParseLearned(s)
	if err == nil {
		l.learned.Store(int64(st.RPS * 1000))
	}
	return st, err
}
