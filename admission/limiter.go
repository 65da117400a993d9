package admission

import (
	"context"
	_ "embed"
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

var (
	//go:embed gcra.lua
	gcraLua    string
	gcraScript = redis.NewScript(gcraLua)

	//go:embed override.lua
	overrideLua    string
	overrideScript = redis.NewScript(overrideLua)

	//go:embed lease_release.lua
	leaseReleaseLua    string
	leaseReleaseScript = redis.NewScript(leaseReleaseLua)

	//go:embed penalty.lua
	penaltyLua    string
	penaltyScript = redis.NewScript(penaltyLua)
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

// A Limiter admits sends on one account. It is safe for concurrent use; any
// number of Limiters in any number of processes may share one Redis.
type Limiter struct {
	rdb   redis.Scripter // *redis.Client or *redis.ClusterClient; only scripts run on it
	cfg   Config
	clock Clock

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
	skipUntil    time.Time // Redis is left alone until then after an error
	lastLog      time.Time // last line logged about Redis
	inFallback   bool
	penaltyUntil time.Time // the latest 429 penalty this process knows of
	fb           fallback
	lastDenial   [2]Decision
	nextAsk      [2]time.Time // by class: the wake ticket the last admission brought back

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
	return l, nil
}

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
		l.mu.Unlock()
		return Decision{RetryAfter: l.penaltyUntil.Sub(now), Source: SourcePenalty, Reason: ReasonPenalty}, nil
	}
	if now.Before(l.skipUntil) {
		d := l.fallbackAt(now, class)
		l.mu.Unlock()
		return d, nil
	}
	l.mu.Unlock()

	l.mu.Lock()
	recovering := l.inFallback
	l.mu.Unlock()
	// A caller whose own deadline falls within the call's timeout may see
	// the call fail a moment before ctx reports it: that is the caller
	// giving up, not Redis failing.
	dl, ok := ctx.Deadline()
	callerBound := ok && time.Until(dl) <= l.cfg.RedisTimeout
	d, err := l.eval(ctx, class, recovering, tickets, within)
	if err != nil && (ctx.Err() != nil || callerBound) {
		if cerr := ctx.Err(); cerr != nil {
			return Decision{}, cerr
		}
		return Decision{}, context.DeadlineExceeded
	}

	now = l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.skipUntil = now.Add(l.cfg.RedisRetryAfter)
		if !l.inFallback {
			l.inFallback = true
			l.fb.enterAt(now, rand.Float64())
		}
		if now.Sub(l.lastLog) >= l.cfg.RedisRetryAfter {
			l.lastLog = now
			l.cfg.Logger.Warn("admission: redis unavailable, deciding locally",
				"rate_per_process", l.cfg.TargetRPS/float64(l.cfg.MaxSenders),
				"retry_in", l.cfg.RedisRetryAfter, "err", err)
		}
		return l.fallbackAt(now, class), nil
	}
	if l.inFallback {
		l.inFallback = false
		l.lastLog = now
		l.cfg.Logger.Info("admission: redis reachable again")
	}
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
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
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
	v, err := gcraScript.Run(ctx, l.rdb, l.scriptKeys[class], args...).Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("gcra eval: %w", err)
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

	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	ms := (retryAfter + time.Millisecond - 1) / time.Millisecond
	left, err := penaltyScript.Run(ctx, l.rdb, []string{l.keys[2], l.keys[0]}, int64(ms), l.args[OTP][1]).Int64()
	if err != nil {
		return fmt.Errorf("penalty eval: %w", err)
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
// configured share.
func (l *Limiter) Override(ctx context.Context, targetRPS, marketingRPS float64, ttl time.Duration) error {
	key := l.scriptKeys[OTP][4]
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	if targetRPS <= 0 && marketingRPS <= 0 {
		if err := overrideScript.Run(ctx, l.rdb, []string{key}, "0", "0", "0").Err(); err != nil {
			return fmt.Errorf("override clear: %w", err)
		}
		return nil
	}
	f := func(v float64) string { return strconv.FormatFloat(max(v, 0), 'f', -1, 64) }
	if err := overrideScript.Run(ctx, l.rdb, []string{key}, f(targetRPS), f(marketingRPS), ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("override: %w", err)
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

// Release ends the in-flight lease of an admission (Decision.Lease); an
// empty lease is a no-op. A lease not released expires after LeaseTTL.
func (l *Limiter) Release(ctx context.Context, lease string) error {
	switch lease {
	case "":
		return nil
	case localLease:
		l.mu.Lock()
		l.localInFlight = max(0, l.localInFlight-1)
		l.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	if err := leaseReleaseScript.Run(ctx, l.rdb, l.scriptKeys[OTP][5:6], lease).Err(); err != nil {
		return fmt.Errorf("lease release: %w", err)
	}
	return nil
}

// State reports whether this process knows of a live 429 penalty and
// whether it is deciding locally because Redis is unreachable.
func (l *Limiter) State() (penalty, fallback bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.penaltyUntil), l.inFallback
}
