package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrBadReply reports a script reply of an unexpected shape.
var ErrBadReply = errors.New("admission: unexpected script reply")

// A Clock tells the process time. The decision never depends on it (Redis
// TIME does); it times the Redis circuit, fallback and local waits.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// An Option configures optional dependencies of a Limiter.
type Option func(*Limiter)

// WithClock makes the Limiter read the process time from c.
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithCircuit makes the Limiter share c, the process's view of Redis's
// health, with the other users of the same Redis (Claims). Without it the
// Limiter has a Circuit of its own (Limiter.Circuit).
func WithCircuit(c *Circuit) Option { return func(l *Limiter) { l.circuit = c } }

// A Limiter admits sends on one account. It is safe for concurrent use; any
// number of Limiters in any number of processes may share one Redis.
type Limiter struct {
	rdb     redis.Scripter // *redis.Client or *redis.ClusterClient; only scripts run on it
	cfg     Config
	clock   Clock
	circuit *Circuit // Redis left alone for RedisRetryAfter after an error

	keys       []string    // global TAT, marketing TAT, penalty: one hash tag
	scriptKeys [2][]string // keys and the class's wake-ticket key, by Class
	args       [2][]any    // ARGV of gcra.lua by Class
	turns      [2]chan int // one waiter per class talks to Redis; see Acquire
	intervalGl time.Duration
	// recoveryFloor is ARGV[6] after a fallback, in microseconds.
	recoveryFloor string
	instance      string        // prefix of lease members: unique per Limiter
	leaseSeq      atomic.Uint64 // suffix of lease members
	localInFlight int           // fallback leases held; guarded by mu

	mu sync.Mutex
	// Guarded by mu.
	inFallback   bool      // decided locally since Redis last answered
	penaltyUntil time.Time // the latest 429 penalty this process knows of
	fb           fallback
	nextAsk      [2]time.Time // by class: the wake ticket the last admission brought back
	// orphans are lease members that may hold a slot of MaxInFlight in
	// Redis though no send uses them: the reply of the admission that took
	// them, or their release, was lost. The next Release frees them.
	orphans []string

	queued [2]atomic.Int32 // by class: callers of Acquire waiting for the turn
}

// New returns a Limiter that keeps its state in rdb. It returns a
// *ConfigError if cfg cannot work.
func New(rdb redis.Scripter, cfg Config, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tag := "{sms:" + cfg.Account + "}"
	gi, mi := interval(cfg.TargetRPS), interval(cfg.MarketingRPS)
	burst := time.Duration(cfg.Burst - 1)
	us := func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
	base := []any{us(gi), us(burst * gi), us(mi), us(burst * mi)}
	// One slot of the burst is OTP's alone (none when BURST is 1).
	reserve := us(min(burst, 1) * gi)
	l := &Limiter{
		rdb:   rdb,
		cfg:   cfg,
		clock: systemClock{},
		keys:  []string{tag + ":tat:global", tag + ":tat:marketing", tag + ":penalty"},
		args: [2][]any{
			append(base[:4:4], "0", "0", reserve, "0", us(gi), "0", strconv.Itoa(cfg.MaxInFlight), "", us(cfg.LeaseTTL)),
			append(base[:4:4], "1", "0", reserve, "0", us(mi), "0", strconv.Itoa(cfg.MaxInFlight), "", us(cfg.LeaseTTL)),
		},
		instance:      strconv.FormatUint(rand.Uint64(), 36),
		turns:         [2]chan int{make(chan int, 1), make(chan int, 1)},
		intervalGl:    gi,
		fb:            newFallback(cfg),
		recoveryFloor: us(cfg.RedisRetryAfter * time.Duration(cfg.MaxSenders-1) / time.Duration(cfg.MaxSenders)),
	}
	for c := range l.scriptKeys {
		l.scriptKeys[c] = append(l.keys[:3:3], tag+":wake:"+Class(c).String(), tag+":override", tag+":leases")
	}
	for _, o := range opts {
		o(l)
	}
	if l.circuit == nil {
		l.circuit = newCircuit(cfg.RedisRetryAfter, cfg.Logger, l.clock)
	}
	return l, nil
}

// Circuit returns the Limiter's view of Redis's health, to share with
// Claims.
func (l *Limiter) Circuit() *Circuit { return l.circuit }

// Keys returns the Redis keys of the account: global TAT, marketing TAT and
// penalty.
func (l *Limiter) Keys() []string { return append([]string(nil), l.keys...) }

// TryAcquire decides at once whether a message of class may be sent now,
// with at most one Redis round trip. A live penalty known to this process
// and an open Redis circuit are decided without Redis. Redis errors are not
// returned: the fallback decides instead. The error is non-nil only when ctx
// ends first.
func (l *Limiter) TryAcquire(ctx context.Context, class Class) (Decision, error) {
	return l.tryAcquire(ctx, class, ticketNone, 0)
}

// Wake-ticket modes of gcra.lua (ARGV[8]).
const (
	ticketNone     = "0" // the caller will not wait
	ticketOnDenial = "1" // it will wait: spread it among the waiters
	ticketAlways   = "2" // and another caller of the class waits behind it
)

// tryAcquire is TryAcquire taking wake tickets no further than within.
func (l *Limiter) tryAcquire(ctx context.Context, class Class, tickets string, within time.Duration) (Decision, error) {
	now := l.clock.Now()
	l.mu.Lock()
	if now.Before(l.penaltyUntil) {
		left := l.penaltyUntil.Sub(now) // read under mu: ReportThrottled writes it
		l.mu.Unlock()
		return Decision{RetryAfter: left, Source: SourcePenalty, Reason: ReasonPenalty}, nil
	}
	recovering := l.inFallback
	orphans := len(l.orphans) > 0
	l.mu.Unlock()
	if orphans && l.circuit.Allow() {
		// Leases whose admission reply was lost may fill MaxInFlight:
		// free them before asking for another. On failure they are kept.
		_ = l.Release(ctx, "")
	}

	d, err := l.eval(ctx, class, recovering, tickets, within)
	if callerGaveUp(err) {
		return Decision{}, err
	}
	now = l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil { // Redis failed, or failed less than RedisRetryAfter ago
		if !l.inFallback {
			l.inFallback = true
			l.fb.enterAt(now, rand.Float64())
			l.cfg.Logger.Warn("admission: deciding locally until redis answers",
				"rate_per_process", l.cfg.TargetRPS/float64(l.cfg.MaxSenders), "err", err)
		}
		return l.fallbackAt(now, class), nil
	}
	l.inFallback = false
	if d.Source == SourcePenalty {
		if until := now.Add(d.RetryAfter); until.After(l.penaltyUntil) {
			l.penaltyUntil = until
		}
	}
	return d, nil
}

// eval runs gcra.lua once. recovering says this process is coming back
// from its fallback: others may still be in theirs for up to one
// RedisRetryAfter, sending (MaxSenders-1)/MaxSenders of the target between
// them, so the script first reserves that much time on both keys.
func (l *Limiter) eval(ctx context.Context, class Class, recovering bool, tickets string, within time.Duration) (Decision, error) {
	args := l.args[class]
	var lease string
	if recovering || tickets != ticketNone || l.cfg.MaxInFlight > 0 {
		args = slices.Clone(args)
		args[7] = tickets
		args[9] = strconv.FormatInt(within.Microseconds(), 10)
		if recovering {
			args[5] = l.recoveryFloor
		}
		if l.cfg.MaxInFlight > 0 {
			lease = l.instance + "-" + strconv.FormatUint(l.leaseSeq.Add(1), 10)
			args[11] = lease
		}
	}
	var v []any
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		v, err = gcraScript.Run(ctx, l.rdb, l.scriptKeys[class], args...).Slice()
		if err != nil {
			return fmt.Errorf("gcra eval: %w", err)
		}
		return nil
	})
	if err != nil {
		if lease != "" && err != ErrRedisDown {
			// The script may have run and taken the lease with the reply
			// lost: free it rather than hold a slot for LeaseTTL.
			l.orphan(lease)
		}
		return Decision{}, err
	}
	d, err := parseReply(v)
	if err == nil && d.Allowed {
		d.Lease = lease
	}
	return d, err
}

// parseReply turns gcra.lua's {allowed, wait_us, reason} into a Decision.
func parseReply(v []any) (Decision, error) {
	if len(v) != 3 {
		return Decision{}, fmt.Errorf("%w: %d elements, want 3", ErrBadReply, len(v))
	}
	var n [3]int64
	for i := range v {
		x, ok := v[i].(int64)
		if !ok {
			return Decision{}, fmt.Errorf("%w: element %d is %T", ErrBadReply, i, v[i])
		}
		n[i] = x
	}
	d := Decision{Allowed: n[0] == 1, RetryAfter: time.Duration(n[1]) * time.Microsecond, Source: SourceRedis}
	switch {
	case n[0] == 1 && n[2] == 0:
		d.Next, d.RetryAfter = max(d.RetryAfter, 0), 0
	case n[0] == 0 && n[2] == 1:
		d.Source, d.Reason = SourcePenalty, ReasonPenalty
	case n[0] == 0 && n[2] == 2:
		d.Reason = ReasonGlobal
	case n[0] == 0 && n[2] == 3:
		d.Reason = ReasonMarketing
	case n[0] == 0 && n[2] == 4:
		d.Reason = ReasonInFlight
	default:
		return Decision{}, fmt.Errorf("%w: %v", ErrBadReply, v)
	}
	if !d.Allowed && d.RetryAfter <= 0 {
		return Decision{}, fmt.Errorf("%w: denial without a wait: %v", ErrBadReply, v)
	}
	return d, nil
}

// ReportThrottled records that the provider answered 429 with retryAfter:
// this process stops at once, and every process sharing the Redis stops
// until retryAfter has passed. A longer live penalty is never shortened.
// retryAfter below one millisecond counts as one millisecond. The error
// reports that Redis could not record the penalty; this process honours it
// regardless.
func (l *Limiter) ReportThrottled(ctx context.Context, retryAfter time.Duration) error {
	retryAfter = max(retryAfter, time.Millisecond)
	now := l.clock.Now()
	l.mu.Lock()
	if until := now.Add(retryAfter); until.After(l.penaltyUntil) {
		l.penaltyUntil = until
	}
	l.mu.Unlock()

	ms := (retryAfter + time.Millisecond - 1) / time.Millisecond
	var left int64
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) (err error) {
		left, err = penaltyScript.Run(ctx, l.rdb, []string{l.keys[2], l.keys[0]}, int64(ms), l.args[OTP][1]).Int64()
		if err != nil {
			return fmt.Errorf("penalty eval: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Another process may hold a longer penalty: honour it here too.
	l.mu.Lock()
	if until := now.Add(time.Duration(left) * time.Millisecond); until.After(l.penaltyUntil) {
		l.penaltyUntil = until
	}
	l.mu.Unlock()
	return nil
}

// Override lowers the account's rates for every process until ttl has
// passed (ttl 0: until cleared): targetRPS and marketingRPS, where positive,
// replace TargetRPS and MarketingRPS in the script when they are lower; a
// value above the configured one is ignored there, so an override can never
// raise a rate. Both zero clears it. The Redis-down fallback keeps the
// configured share. What the account owes from sends just made is carried
// over to the new rate, so a cleared override gives the configured rate
// back at once, while a live 429 penalty keeps its length; that reckoning
// uses this Limiter's configured rates, which must be the pods'. An
// override that ends by its ttl gets no such reckoning: the account may
// then wait up to Burst intervals of the override's rate.
func (l *Limiter) Override(ctx context.Context, targetRPS, marketingRPS float64, ttl time.Duration) error {
	keys := []string{l.scriptKeys[OTP][4], l.keys[0], l.keys[1], l.scriptKeys[OTP][3], l.scriptKeys[Marketing][3]}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	f := func(v float64) string { return strconv.FormatFloat(max(v, 0), 'f', -1, 64) }
	what := "override"
	if targetRPS <= 0 && marketingRPS <= 0 {
		what, targetRPS, marketingRPS, ttl = "override clear", 0, 0, 0
	}
	// The configured intervals, so that the script can rescale what the
	// TATs owe to the interval in force after the change.
	ms := int64(0) // until cleared
	if ttl > 0 {
		ms = int64((ttl + time.Millisecond - 1) / time.Millisecond) // a ttl under 1 ms is not "until cleared"
	}
	err := overrideScript.Run(ctx, l.rdb, keys, f(targetRPS), f(marketingRPS), ms,
		l.args[OTP][0], l.args[OTP][2], l.args[OTP][1], l.args[OTP][3]).Err()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// localLease marks a lease held in the fallback, not in Redis.
const localLease = "local"

// fallbackAt decides in the fallback, holding a local lease when
// MaxInFlight is set. Called with l.mu held.
func (l *Limiter) fallbackAt(now time.Time, class Class) Decision {
	if l.cfg.MaxInFlight > 0 && l.localInFlight >= max(1, l.cfg.MaxInFlight/l.cfg.MaxSenders) {
		return Decision{RetryAfter: l.intervalGl, Source: SourceFallback, Reason: ReasonInFlight}
	}
	d := l.fb.decideAt(now, class)
	if d.Allowed && l.cfg.MaxInFlight > 0 {
		l.localInFlight++
		d.Lease = localLease
	}
	return d
}

// Release ends the in-flight lease of an admission (Decision.Lease), and
// with it any lease whose admission reply or release was lost; an empty
// lease ends only those. A lease Redis did not hear of is kept for the next
// Release; past that it expires after LeaseTTL.
func (l *Limiter) Release(ctx context.Context, lease string) error {
	switch lease {
	case "":
		l.mu.Lock()
		none := len(l.orphans) == 0
		l.mu.Unlock()
		if none {
			return nil
		}
	case localLease:
		l.mu.Lock()
		l.localInFlight = max(0, l.localInFlight-1)
		l.mu.Unlock()
		return nil
	}
	l.mu.Lock()
	members := toAny(l.orphans)
	l.orphans = nil
	l.mu.Unlock()
	if lease != "" {
		members = append(members, lease)
	}
	if len(members) == 0 {
		return nil
	}
	err := l.circuit.do(ctx, l.cfg.RedisTimeout, func(ctx context.Context) error {
		if err := leaseReleaseScript.Run(ctx, l.rdb, l.scriptKeys[OTP][5:6], members...).Err(); err != nil {
			return fmt.Errorf("lease release: %w", err)
		}
		return nil
	})
	if err != nil {
		for _, m := range members {
			l.orphan(m.(string))
		}
	}
	return err
}

// maxOrphans bounds the leases kept for a later release; past it the
// oldest are left to expire after LeaseTTL.
const maxOrphans = 1024

// orphan keeps lease for the next Release.
func (l *Limiter) orphan(lease string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.orphans = append(l.orphans, lease)
	if n := len(l.orphans) - maxOrphans; n > 0 {
		l.orphans = slices.Delete(l.orphans, 0, n)
	}
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}

// State reports whether this process knows of a live 429 penalty and
// whether it is deciding locally because Redis is unreachable.
func (l *Limiter) State() (penalty, fallback bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.penaltyUntil), l.inFallback
}
