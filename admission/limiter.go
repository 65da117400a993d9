package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/keys"
	"smsdispatcher/ledger"
)

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
// Limiter has a Circuit of its own.
func WithCircuit(c *Circuit) Option { return func(l *Limiter) { l.circuit = c } }

// A Limiter admits sends on one account. It is safe for concurrent use; any
// number of Limiters in any number of processes may share one Redis.
type Limiter struct {
	rdb     redis.Scripter // *redis.Client or *redis.ClusterClient; only scripts run on it
	cfg     Config
	clock   Clock
	circuit *Circuit       // Redis left alone for RedisRetryAfter after an error
	claims  *Claims        // the ids' records, under the account's hash tag
	ledger  *ledger.Ledger // the sent messages' stories, receipts and statistics

	base       admitCall             // the admission script's call without a class: the account's keys
	classes    map[Class]*classState // by name
	order      []Class               // the classes in priority order
	intervalGl time.Duration
	// lastSpacing is the last class's interval: a class after the first
	// books at most that far ahead per unit (lookahead).
	lastSpacing time.Duration
	// recoveryFloor is admitCall.RecoveryFloor after a fallback, in
	// microseconds.
	recoveryFloor int64
	instance      string        // prefix of lease members: unique per Limiter
	leaseSeq      atomic.Uint64 // suffix of lease members
	localInFlight int           // fallback leases held; guarded by mu

	mu sync.Mutex
	// Guarded by mu.
	stops stops // the penalty, pause and fallback this process knows of
	fb    fallback
	pool  pool // the sender pool's keys of the admission script
	// orphans are lease members that may hold a slot of MaxInFlight in
	// Redis though no send uses them: the reply of the admission that took
	// them, or their release, was lost. The next Settle frees them.
	orphans []string

	learned    atomic.Int64 // the learned rate in thousandths (0: none), as Redis last said
	ignored    atomic.Int64 // what the admission script last said it ignored in Redis (reportIgnored)
	health     atomic.Int32 // the account's Health as the last script reply said it
	healthAt   atomic.Int64 // when (clock, Unix ns) a reply last said it; 0: never
	healthRule string       // cfg.Health as finish.lua's argument
	key        keys.Account // the account's key names
}

// New returns a Limiter that keeps its state in rdb. It returns a
// *ConfigError if cfg cannot work.
func New(rdb redis.Scripter, cfg Config, opts ...Option) (*Limiter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	key := keys.For(cfg.Account)
	gi := interval(cfg.TargetRPS)
	burst := time.Duration(cfg.Burst - 1)
	call := admitCall{
		GlobalTAT: key.GlobalTAT(), Penalty: key.Penalty(),
		Override: key.RateOverride(), Leases: key.Leases(), Probe: key.Probe(),
		Learned: key.Learned(), Record: key.Records(), Health: key.Health(),
		Skip:       key.Skip(""), // no prefix: never a route's skip
		ProbeEvery: cfg.Health.ProbeEvery.Microseconds(), RouteProbeEvery: cfg.Route.ProbeEvery.Microseconds(),
		GlobalInterval: gi.Microseconds(), GlobalTau: (burst * gi).Microseconds(),
		Tickets: ticketNone, MaxInFlight: cfg.MaxInFlight, LeaseTTL: cfg.LeaseTTL.Microseconds(),
	}
	pool := newPool(cfg, key)
	call.Senders, call.SenderIntervals = pool.keys(), pool.intervals
	if a := cfg.Adaptive; a.Enabled {
		call.Adaptive = fmt.Sprintf("%g %g %d %d", cfg.TargetRPS, a.MinRPS, a.Step.Microseconds(), a.ProbeInterval.Microseconds())
	}
	l := &Limiter{
		key:           key,
		healthRule:    cfg.Health.arg(),
		rdb:           rdb,
		cfg:           cfg,
		clock:         systemClock{},
		base:          call,
		instance:      strconv.FormatUint(rand.Uint64(), 36),
		intervalGl:    gi,
		fb:            newFallback(cfg),
		pool:          pool,
		recoveryFloor: (cfg.RedisRetryAfter * time.Duration(cfg.MaxSenders-1) / time.Duration(cfg.MaxSenders)).Microseconds(),
	}
	l.classes, l.order = newClasses(cfg, key, call)
	l.lastSpacing = l.classes[l.order[len(l.order)-1]].spacing
	for _, o := range opts {
		o(l)
	}
	if l.circuit == nil {
		l.circuit = newCircuit(cfg.RedisRetryAfter, cfg.Logger, l.clock)
	}
	l.claims = NewClaims(rdb, cfg.Account, 0, cfg.RecordTTL, cfg.RedisTimeout, l.circuit)
	l.ledger = ledger.New(rdb, ledger.Config{Account: cfg.Account, RecordTTL: l.claims.recordTTL, Timeout: cfg.RedisTimeout,
		Route: cfg.Route.arg(cfg.Health.Keep), Classes: l.classStrings(), Guard: l.circuit, Now: l.clock.Now})
	return l, nil
}

// Account is the account the limiter admits on.
func (l *Limiter) Account() string { return l.cfg.Account }

// Ledger returns the ledger of the account's sent messages: their
// stories, receipts and statistics, kept through the Limiter's circuit.
func (l *Limiter) Ledger() *ledger.Ledger { return l.ledger }

// Claims returns the ids' send-once records the Limiter claims with its
// slots (Admit), sharing its Circuit.
func (l *Limiter) Claims() *Claims { return l.claims }

// Wake-ticket modes of the admission script (admitCall.Tickets).
const (
	ticketNone     = "0" // the caller will not wait
	ticketOnDenial = "1" // it will wait: spread it among the waiters
	ticketAlways   = "2" // and another caller of the class waits behind it (ticketFor: "2 <its cost>")
)

// tryAcquire decides at once whether a send of class of cost units may
// go now, with at most one Redis round trip, taking wake tickets no
// further than within, booking a slot that opens within lookahead, and claim's
// send-once claim with it when claim.Token is set.
func (l *Limiter) tryAcquire(ctx context.Context, class Class, cost int, tickets string, within, lookahead time.Duration, claim Claim) (Decision, error) {
	c, err := l.classOf(class)
	if err != nil {
		return Decision{}, err
	}
	return l.try(ctx, c, cost, tickets, within, lookahead, claim)
}

// try is tryAcquire for the class c: a stop this process knows of is
// decided without Redis (stops.held); else Redis decides, told first of a
// pause it never heard of, and its answer updates the stops.
func (l *Limiter) try(ctx context.Context, c *classState, cost int, tickets string, within, lookahead time.Duration, claim Claim) (Decision, error) {
	now := l.clock.Now()
	l.mu.Lock()
	if d, held := l.stops.held(now); held {
		l.mu.Unlock()
		return d, nil
	}
	why, pauseLeft, unshared := l.stops.unsharedPause(now)
	recovering := l.stops.fallback
	orphans := len(l.orphans) > 0
	l.mu.Unlock()
	l.freeLeftovers(ctx, orphans)
	if unshared {
		// Redis never heard of this process's pause: tell it now, so that
		// its answer below is about the pause, not past it.
		if d, err := l.sharePause(ctx, pauseLeft, why); callerGaveUp(err) {
			return Decision{}, err
		} else if err != nil {
			return d, nil
		}
	}
	asked := l.clock.Now()
	d, err := l.eval(ctx, c, cost, recovering, tickets, within, lookahead, claim)
	if callerGaveUp(err) {
		return Decision{}, err
	}
	now = l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil { // Redis failed, or failed less than RedisRetryAfter ago
		return l.withoutRedis(now, c, cost, claim, err), nil
	}
	answer, unused := l.stops.answered(asked, now, d)
	if unused {
		// The slot goes unused: its claim and lease are given back with
		// the next call that reaches Redis.
		if d.Claimed {
			l.claims.keep(claimRef{d.claim.ID, d.claim.Token})
		}
		if d.Lease != "" {
			l.orphans = keepLeftovers(l.orphans, d.Lease)
		}
	}
	return answer, nil
}

// freeLeftovers gives back, when Redis is not known down, what an earlier
// call lost: leases whose admission reply was lost (orphans: they may
// fill MaxInFlight) before asking for another, and claims whose release
// was lost (they hold their ids' redeliveries). On failure they are kept.
func (l *Limiter) freeLeftovers(ctx context.Context, orphans bool) {
	if orphans && l.circuit.Allow() {
		_ = l.Settle(ctx, Decision{}, "", ResultNone, ledger.Story{})
	}
	if l.claims.leftovers() && l.circuit.Allow() {
		l.claims.releaseLeftovers(ctx)
	}
}

// sharePause records in Redis the pause this process knows of (why, left
// to run). When Redis cannot be told, the pause holds, asked about again
// after accountRecheck: the error is returned with the pause's denial.
func (l *Limiter) sharePause(ctx context.Context, left time.Duration, why string) (Decision, error) {
	_, _, err := l.recordPenalty(ctx, left, why)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.stops.pauseUnchecked(l.clock.Now()), err
	}
	l.stops.pauseRecorded()
	return Decision{}, nil
}

// withoutRedis decides at now an admission Redis did not answer (err): a
// stop this process knows of holds; else the fallback decides. l.mu must
// be held.
func (l *Limiter) withoutRedis(now time.Time, c *classState, cost int, claim Claim, err error) Decision {
	d, held, begun := l.stops.unanswered(now)
	if held {
		return d
	}
	if begun {
		// No shared health without Redis: the fallback decides alone,
		// and a degraded state seen before would hold for good.
		l.health.Store(int32(Healthy))
		l.fb.learnedRate(l.cfg, l.learnedRPS())
		l.fb.enterAt(now, rand.Float64())
		l.cfg.Logger.Warn("admission: deciding locally until redis answers",
			"rate_per_process", l.cfg.TargetRPS/float64(l.cfg.MaxSenders), "err", err)
	}
	if claim.Token != "" && !c.policy.SendsWithoutRecord {
		// Without its send-once record a message of any class but
		// OTP's (policy.Class.SendsWithoutRecord) waits for Redis (a
		// duplicate OTP beats a lost one; not so a campaign's).
		return Decision{RetryAfter: l.cfg.RedisRetryAfter, Source: SourceFallback, Reason: ReasonNoRecord}
	}
	return l.fallbackAt(now, c, cost)
}

// stopped returns the denial of a 429 penalty or account pause this
// process knows of, if one is live.
func (l *Limiter) stopped() (Decision, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stops.live(now)
}

// A State is what a process knows of its account at one instant, for its
// gauges and heartbeat.
type State struct {
	Penalty    bool    // a penalty is live: a 429's, or an account-level pause
	Paused     bool    // an account-level pause is live (AccountPause says why)
	Fallback   bool    // deciding locally: Redis is unreachable
	LearnedRPS float64 // the learned rate in force as Redis last answered; 0: none, the configured rates hold
}

// State reports what this process knows of its account now.
func (l *Limiter) State() State {
	now := l.clock.Now()
	l.mu.Lock()
	penalty, fallback := l.stops.state(now)
	_, _, paused := l.stops.accountPause(now)
	l.mu.Unlock()
	return State{Penalty: penalty, Paused: paused, Fallback: fallback, LearnedRPS: l.learnedRPS()}
}
