package loadharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/provider/providertest"
)

// Scenarios (--scenario) are rows beside the matrix: each sets the provider
// simulator and the real limiter (gcra, with the dispatcher's nack policy)
// up for one feature of the product and measures what the feature is for.
const (
	scenSenders  = "senders"  // a sender pool on an account counting segments
	scenAdaptive = "adaptive" // the learned rate, against a provider allowing less than TARGET_RPS
)

var allScenarios = []string{scenSenders, scenAdaptive, scenFailover, scenReceipts, scenClasses, scenAccounts, scenBacklog, scenSuppressions, scenPumping, scenDeferred}

// scenarioExcludes are the flags of the matrix that --scenario
// does not take.
var scenarioExcludes = []string{"quick", "strategies", "modes", "fault", "json", "svg", "svg-mode", "svg-senders", "rate-unit"}

// Defaults of every scenario.
const (
	scenarioK       = 3   // senders (pods)
	scenarioOTPRate = 2.0 // OTP messages per second: a small stream beside the backlog
)

// The senders scenario: one account whose provider counts segments, 25 in
// any sliding second, with a pool of 10 senders (numbers) of 3 segments in
// any sliding second each, and bodies of 1 to 3 segments. The pool
// (30/s) can carry more than the account: the account's limit binds.
const (
	poolAccountLimit = 25
	poolSenders      = 10
	poolSenderLimit  = 3
	poolMaxSegments  = 3 // MAX_SEGMENTS
	poolBurst        = 1
	// poolJitter is the limiter's ArrivalJitter: the dispatcher's default
	// PROVIDER_ARRIVAL_JITTER. At 0 a sender's slots are exactly 1/3 s
	// apart, and the few microseconds by which arrivals at the provider
	// vary cost a 429 now and then (each pausing the account for its
	// Retry-After).
	poolJitter = 20 * time.Millisecond
	// poolTarget is the most TARGET_RPS (in halves) that the dispatcher's
	// start-up rule allows on this account at BURST 1 and poolJitter:
	// TARGET_RPS × (1 s + PROVIDER_ARRIVAL_JITTER) + BURST + MAX_SEGMENTS
	// - 1 ≤ 25, so 21.5 × 1.02 + 1 + 3 - 1 = 24.93: at most 21.5/25 =
	// 0.86 of the account. Without jitter it would be 22 (0.88).
	poolTarget   = 21.5
	poolDuration = 30 * time.Second
)

// The adaptive scenario: TARGET_RPS 90 on an account whose provider allows
// only 60 messages in any sliding second (Retry-After 1 s, suspension after
// more than 300 429s in 10 minutes), the learned rate on.
const (
	adaptiveLimit    = 60
	adaptiveTarget   = 90
	adaptiveBurst    = 5
	adaptiveMinRPS   = 10
	adaptiveDuration = 5 * time.Minute
	// Its criterion: at most adaptiveMax429s answers of 429 in all, none
	// in the last adaptiveTail (half the run when it is shorter than
	// twice that), and over that tail at least adaptiveMinShare of
	// adaptiveLimit accepted per second.
	adaptiveMax429s  = 10
	adaptiveTail     = 2 * time.Minute
	adaptiveMinShare = 0.9
	// learnedEvery is how often the learned rate is read from Redis during
	// a run; trajectoryEvery how far apart the trajectory line shows it.
	learnedEvery    = 250 * time.Millisecond
	trajectoryEvery = 5 * time.Second
)

// errScenarioFailed is wrapped by the error of a run whose adaptive
// scenario ran to its end and failed its criterion.
var errScenarioFailed = errors.New("scenario failed")

// A scenario is one --scenario row's settings, defaults and flags resolved.
type scenario struct {
	name              string
	duration          time.Duration
	target, marketing float64 // TARGET_RPS, MARKETING_RPS
	burst             int
	otpRate           float64
	maxSegments       int // senders: the longest body (MAX_SEGMENTS), bodies of 1..maxSegments
}

// tail is the span at the end of the run the adaptive criterion looks at.
func (sc scenario) tail() time.Duration {
	return min(adaptiveTail, sc.duration/2)
}

// resolveScenarios returns the scenarios list names, each with its
// defaults unless the command line set them (set: the flags given).
func resolveScenarios(c *Config, list string, set map[string]bool) ([]scenario, error) {
	names, err := parseNames(list, allScenarios)
	if err != nil {
		return nil, fmt.Errorf("--scenario: %w", err)
	}
	if set["adaptive-step"] && !slices.Contains(names, scenAdaptive) {
		return nil, errors.New("--adaptive-step applies to --scenario adaptive")
	}
	if set["provider-arrival-jitter"] && !slices.Contains(names, scenSenders) {
		return nil, errors.New("--provider-arrival-jitter applies to --scenario senders")
	}
	if set["pool"] && !slices.Contains(names, scenSenders) {
		return nil, errors.New("--pool applies to --scenario senders")
	}
	c.failover = slices.Contains(names, scenFailover)
	c.classes = slices.Contains(names, scenClasses)
	c.backlogRun = slices.Contains(names, scenBacklog)
	c.deferredRun = slices.Contains(names, scenDeferred)
	for _, name := range failoverFlags {
		if set[name] && !c.failover && !(name == "code" && (c.classes || c.backlogRun || c.deferredRun)) {
			return nil, fmt.Errorf("--%s applies to --scenario %s", name, scenFailover)
		}
	}
	if c.failover {
		if err := checkFailover(c, set); err != nil {
			return nil, err
		}
	}
	c.receipts = slices.Contains(names, scenReceipts)
	for _, name := range receiptsFlags {
		if set[name] && !c.receipts {
			return nil, fmt.Errorf("--%s applies to --scenario %s", name, scenReceipts)
		}
	}
	if c.receipts {
		if err := checkReceipts(c, set); err != nil {
			return nil, err
		}
	}
	if c.classes {
		if err := checkClasses(c, set); err != nil {
			return nil, err
		}
	}
	if c.backlogRun {
		if err := checkBacklog(c, set); err != nil {
			return nil, err
		}
	}
	c.accountsRun = slices.Contains(names, scenAccounts)
	if err := checkAccounts(c, set); err != nil {
		return nil, err
	}
	c.suppressionsRun = slices.Contains(names, scenSuppressions)
	if err := checkSuppressions(c, set); err != nil {
		return nil, err
	}
	c.pumpingRun = slices.Contains(names, scenPumping)
	if err := checkPumping(c, set); err != nil {
		return nil, err
	}
	if err := checkDeferred(c, set); err != nil {
		return nil, err
	}
	var out []scenario
	for _, name := range names {
		if name == scenFailover || name == scenReceipts || name == scenClasses || name == scenAccounts || name == scenBacklog || name == scenDeferred {
			continue // their rows run apart (failover.go, receipts.go, classes.go, accounts.go, backlog.go, deferred.go)
		}
		if name == scenSuppressions || name == scenPumping {
			continue // theirs too (suppressions.go, pumping.go)
		}
		sc := scenario{name: name, duration: poolDuration, target: poolTarget, burst: poolBurst, otpRate: scenarioOTPRate, maxSegments: poolMaxSegments}
		if set["segments"] {
			if name != scenSenders {
				return nil, fmt.Errorf("--segments applies to --scenario %s (the longest body), not %s", scenSenders, name)
			}
			sc.maxSegments = c.segments
		}
		if name == scenAdaptive {
			sc.duration, sc.target, sc.burst = adaptiveDuration, adaptiveTarget, adaptiveBurst
		}
		if set["duration"] {
			sc.duration = c.duration
		}
		if set["target-rps"] {
			sc.target = c.target
		}
		sc.marketing = sc.target
		if set["marketing-rps"] {
			sc.marketing = c.marketing
		}
		if set["burst"] {
			sc.burst = c.burst
		}
		if set["otp-rate"] {
			sc.otpRate = c.otpRate
		}
		switch {
		case sc.marketing > sc.target:
			return nil, fmt.Errorf("--scenario %s: --marketing-rps %v is above TARGET_RPS %v", name, sc.marketing, sc.target)
		case name == scenSenders && sc.target > poolAccountLimit:
			return nil, fmt.Errorf("--scenario %s: --target-rps %v is above the account's %d segments/s", name, sc.target, poolAccountLimit)
		case name == scenSenders && (c.pool < 1 || c.pool > admission.MaxPoolSize):
			return nil, fmt.Errorf("--pool must be 1 to %d, got %d", admission.MaxPoolSize, c.pool)
		case name == scenSenders && (c.providerJitter < 0 || c.providerJitter > time.Second):
			return nil, fmt.Errorf("--provider-arrival-jitter must be 0 to 1s, got %v", c.providerJitter)
		case name == scenAdaptive && c.adaptiveStep < 100*time.Millisecond:
			return nil, fmt.Errorf("--adaptive-step must be at least 100ms, got %v", c.adaptiveStep)
		}
		out = append(out, sc)
	}
	return out, nil
}

// poolFrom is the From of the pool's sender i (0-based).
func poolFrom(i int) string { return fmt.Sprintf("+8150000%04d", i+1) }

// runScenarios runs every scenario of cfg with each K, one after the
// other, and returns their rows in that order. It stops at the first error
// or when ctx ends.
func runScenarios(ctx context.Context, cfg *Config, redisOpts *redis.Options, progress io.Writer) ([]*scenarioResult, error) {
	total := len(cfg.scenarios) * len(cfg.senders)
	var rows []*scenarioResult
	for _, sc := range cfg.scenarios {
		for _, k := range cfg.senders {
			fmt.Fprintf(progress, "loadtest: run %d/%d: scenario %s K=%d (%v)\n", len(rows)+1, total, sc.name, k, sc.duration)
			r, err := runScenario(ctx, cfg, redisOpts, sc, k, progress)
			if err != nil {
				return nil, fmt.Errorf("run scenario %s K=%d: %w", sc.name, k, err)
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// runScenario runs sc with k senders for sc.duration and measures it. As
// runOne, everything it starts is stopped and waited for before it
// returns.
func runScenario(ctx context.Context, cfg *Config, redisOpts *redis.Options, sc scenario, k int, progress io.Writer) (*scenarioResult, error) {
	simCfg := providertest.Config{Token: simToken, Window: time.Second, RetryAfter: time.Second, Latency: cfg.latency}
	ns, logger := newRun(cfg)
	lcfg := admission.Config{
		Account:      ns,
		TargetRPS:    sc.target,
		MarketingRPS: sc.marketing,
		Burst:        sc.burst,
		MaxSenders:   max(cfg.maxSenders, k),
		RedisTimeout: cfg.redisTO,
		RecordTTL:    recordTTL,
		Logger:       logger,
	}
	var mix []string // bodies of 1..MAX_SEGMENTS segments, for the senders scenario
	switch sc.name {
	case scenSenders:
		simCfg.Limit, simCfg.CountSegments = poolAccountLimit, true
		simCfg.SenderLimit, simCfg.SenderWindow = poolSenderLimit, time.Second
		simCfg.SuspendAfter = -1 // as the matrix's modes: the run keeps measuring
		for i := range cfg.pool {
			lcfg.Senders = append(lcfg.Senders, admission.Sender{From: poolFrom(i), RPS: poolSenderLimit})
		}
		lcfg.MaxCost, lcfg.ArrivalJitter = sc.maxSegments, cfg.providerJitter
		for n := 1; n <= sc.maxSegments; n++ {
			mix = append(mix, bodyOf(n))
		}
	case scenAdaptive:
		simCfg.Limit = adaptiveLimit // suspension: the simulator's default, 300 429s in 10 minutes
		lcfg.Adaptive = admission.Adaptive{Enabled: true, MinRPS: adaptiveMinRPS, Step: cfg.adaptiveStep}
	default:
		return nil, fmt.Errorf("unknown scenario %q", sc.name)
	}

	sim := providertest.NewGeneric(simCfg)
	srv := serveSim(cfg, sim)
	defer srv.Close()

	var (
		st       counters
		ld       = newLoad(cfg.redelivery)
		senders  = make([]*sender, k)
		lims     = make([]*admission.Limiter, k)
		rdbs     []*redis.Client
		claimSeq atomic.Int64
	)
	for i := range senders {
		client, err := simClient(srv.URL)
		if err != nil {
			return nil, err
		}
		defer client.CloseIdleConnections()
		rdb := redisClient(redisOpts, redisOpts.Addr, &callCounter{})
		defer rdb.Close()
		rdbs = append(rdbs, rdb)
		lim, err := admission.New(rdb, lcfg)
		if err != nil {
			return nil, fmt.Errorf("admission limiter: %w", err)
		}
		lims[i] = lim
		senders[i] = &sender{skew: skewOf(i, k, cfg.skew), body: sendBody, mix: mix, client: client, load: ld, st: &st,
			policy: gcraPolicy{lim: lim, cost: 1, seq: &claimSeq}}
	}
	dial(ctx, rdbs, progress)
	// The learned rate is read on a client of its own, as an operator's
	// command would (Limiter.Learned).
	var watcher *admission.Limiter
	if lcfg.Adaptive.Enabled {
		o := *redisOpts
		o.DisableIdentity = true
		wrdb := redis.NewClient(&o)
		defer wrdb.Close()
		var err error
		if watcher, err = admission.New(wrdb, lcfg); err != nil {
			return nil, fmt.Errorf("admission limiter: %w", err)
		}
	}

	var (
		samples []learnedSample
		readErr int
		also    []func(context.Context, time.Time)
	)
	if watcher != nil {
		also = append(also, func(runCtx context.Context, start time.Time) {
			samples, readErr = watchLearned(runCtx, watcher, start)
		})
	}
	// The harness's own client, for Redis's statistics: reset before the
	// run, read after it.
	statsRdb := redis.NewClient(redisOpts)
	defer statsRdb.Close()
	statsErr := redisstats.Reset(ctx, statsRdb)
	start, err := drive(ctx, cfg, sc.duration, sc.otpRate, ld, senders, also...)
	if err != nil {
		return nil, err
	}

	r := measureScenario(sc, k, cfg, start, sim, &st, ld)
	if sc.name == scenSenders && statsErr == nil && r.Accepted > 0 {
		cs, err := redisstats.Read(ctx, statsRdb)
		us, usErr := redisstats.ScriptMicros(ctx, statsRdb)
		if err == nil && usErr == nil {
			r.HasStats, r.MicrosPerSent = true, float64(us)/float64(r.Accepted)
			r.ScriptsPerSent = float64(cs.Scripts()) / float64(r.Accepted)
			r.CommandsPerSent = float64(cs.Executed()) / float64(r.Accepted)
		}
	}
	if watcher != nil {
		r.LearnedReadErrors = readErr
		end, err := watcher.Learned(ctx)
		if err != nil {
			r.LearnedErr = err.Error()
		} else {
			r.Learned = &end
		}
		for _, l := range lims {
			r.PodsLearned = append(r.PodsLearned, l.State().LearnedRPS)
		}
		r.learnedSeries(samples, sc)
	}
	return r, nil
}

// A learnedSample is the account's learned rate as Redis held it At after
// the run's start.
type learnedSample struct {
	At   time.Duration
	RPS  float64 // 0: none, the configured rates hold
	Mode string
}

// watchLearned reads lim's account's learned rate every learnedEvery
// until ctx ends, and returns what it read and how many reads failed.
func watchLearned(ctx context.Context, lim *admission.Limiter, start time.Time) ([]learnedSample, int) {
	var out []learnedSample
	fails := 0
	tick := time.NewTicker(learnedEvery)
	defer tick.Stop()
	for {
		st, err := lim.Learned(ctx)
		switch {
		case ctx.Err() != nil:
			return out, fails
		case err != nil:
			fails++
		default:
			out = append(out, learnedSample{At: time.Since(start), RPS: st.RPS, Mode: st.Mode})
		}
		select {
		case <-ctx.Done():
			return out, fails
		case <-tick.C:
		}
	}
}
