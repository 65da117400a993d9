package loadharness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/tools/internal/oldlimiters"
)

// runSeq numbers runs within the process, for key namespaces.
var runSeq atomic.Int64

// runMatrix runs every strategy x mode x K of cfg, one after the other, and
// returns their rows in that order. It stops at the first error or when ctx
// ends.
func runMatrix(ctx context.Context, cfg *Config, redisOpts *redis.Options, progress io.Writer) ([]*result, error) {
	total := len(cfg.strategies) * len(cfg.modes) * len(cfg.senders)
	var rows []*result
	for _, strat := range cfg.strategies {
		for _, modeName := range cfg.modes {
			m, _ := modeByName(modeName)
			for _, k := range cfg.senders {
				fmt.Fprintf(progress, "loadtest: run %d/%d: %s %s K=%d (%v)\n", len(rows)+1, total, strat, m.name, k, cfg.duration)
				r, err := runOne(ctx, cfg, redisOpts, strat, m, k, progress)
				if err != nil {
					return nil, fmt.Errorf("run %s %s K=%d: %w", strat, m.name, k, err)
				}
				rows = append(rows, r)
			}
		}
	}
	return rows, nil
}

// skewOf returns sender i's clock skew among k: evenly spread over
// [-spread/2, +spread/2].
func skewOf(i, k int, spread time.Duration) time.Duration {
	if k < 2 {
		return 0
	}
	return time.Duration((float64(i)/float64(k-1) - 0.5) * float64(spread))
}

// runOne runs one strategy against one provider mode with k senders for
// cfg.duration and measures it. Everything it starts is stopped and waited
// for before it returns.
func runOne(ctx context.Context, cfg *Config, redisOpts *redis.Options, strat string, m mode, k int, progress io.Writer) (*result, error) {
	simCfg := m.sim
	simCfg.Latency = cfg.latency
	simCfg.CountSegments = cfg.segments > 1 // as Twilio counts
	sim := providertest.NewGeneric(simCfg)
	srv := serveSim(cfg, sim)
	defer srv.Close()

	redisAddr := redisOpts.Addr
	var px *redistest.Proxy
	if slices.ContainsFunc(cfg.faults, func(f fault) bool { return f.kind == faultRedisDown }) {
		var err error
		if px, err = redistest.StartProxy(redisAddr); err != nil {
			return nil, err
		}
		defer px.Close()
		redisAddr = px.Addr()
	}

	ns, logger := newRun(cfg)
	var (
		st    counters
		ld    = newLoad(cfg.redelivery)
		calls = make([]*callCounter, k)
		rdbs  []*redis.Client
	)
	senders := make([]*sender, k)
	var claimSeq atomic.Int64 // claim tokens, unique across the run's senders
	for i := range senders {
		client, err := simClient(srv.URL)
		if err != nil {
			return nil, err
		}
		defer client.CloseIdleConnections()
		s := &sender{skew: skewOf(i, k, cfg.skew), body: bodyOf(cfg.segments), client: client, load: ld, st: &st}
		calls[i] = &callCounter{}
		var rdb *redis.Client
		if strat != stratV1 {
			rdb = redisClient(redisOpts, redisAddr, calls[i])
			defer rdb.Close()
			rdbs = append(rdbs, rdb)
		}
		switch strat {
		case stratV1:
			split := &oldlimiters.StaticSplit{Limit: oldlimiters.PerPod}
			s.policy = oldPolicy{allow: func(_ context.Context, now time.Time) (bool, error) { return split.AllowAt(now), nil }}
		case stratV2:
			s.policy = oldPolicy{allow: oldlimiters.NewGetIncr(rdb, "sms:"+ns+":", oldlimiters.ContractRPS).AllowAt}
		case stratPlanA:
			s.policy = oldPolicy{allow: oldlimiters.NewAtomicIncr(rdb, "sms:"+ns+":", oldlimiters.ContractRPS).AllowAt}
		case stratGCRA:
			lim, err := admission.New(rdb, admission.Config{
				Account:      ns,
				TargetRPS:    cfg.target,
				MarketingRPS: cfg.marketing,
				Burst:        cfg.burstFor(m),
				MaxSenders:   max(cfg.maxSenders, k),
				RedisTimeout: cfg.redisTO,
				RecordTTL:    recordTTL,
				Logger:       logger,
			})
			if err != nil {
				return nil, fmt.Errorf("admission limiter: %w", err)
			}
			cost := 1
			if cfg.rateUnit == "segment" {
				cost = max(cfg.segments, 1)
			}
			s.policy = gcraPolicy{lim: lim, cost: cost, seq: &claimSeq}
		default:
			return nil, fmt.Errorf("unknown strategy %q", strat)
		}
		senders[i] = s
	}

	dial(ctx, rdbs, progress)
	for _, c := range calls {
		c.n.Store(0) // the PINGs are not the strategy's
	}
	// Redis's own count of this run starts here (the server's figures: runs
	// are sequential, and with --redis-url other users of the server count
	// too). A client of its own, straight to Redis: a redis-down fault
	// takes the proxy away, not Redis.
	var statsRdb *redis.Client
	var statsErr error
	if strat != stratV1 {
		o := *redisOpts
		o.DisableIdentity = true
		statsRdb = redis.NewClient(&o)
		defer statsRdb.Close()
		if statsErr = redisstats.Reset(ctx, statsRdb); statsErr != nil {
			fmt.Fprintf(progress, "loadtest: warning: no figures of Redis's own for this run: %v\n", statsErr)
		}
	}

	start, err := drive(ctx, cfg, cfg.duration, cfg.otpRate, ld, senders, func(runCtx context.Context, start time.Time) {
		injectFaults(runCtx, start, schedule(cfg.faults, sim, px))
	})
	if err != nil {
		return nil, err
	}

	var redisCalls int64
	for _, c := range calls {
		redisCalls += c.n.Load()
	}
	// Read once every sender has stopped: their last commands count too.
	var own *redisStats
	if statsRdb != nil {
		own = &redisStats{err: statsErr}
		if statsErr == nil {
			own.stats, own.err = redisstats.Read(ctx, statsRdb)
			if own.err == nil {
				own.micros, own.err = redisstats.ScriptMicros(ctx, statsRdb)
			}
		}
	}
	return measure(cfg, strat, m, k, start, sim, &st, ld, redisCalls, own), nil
}

// redisStats are Redis's own figures of one run: INFO commandstats since
// the CONFIG RESETSTAT at its start, or why there are none.
type redisStats struct {
	stats  redisstats.CommandStats
	micros int64 // Redis's time in script calls
	err    error
}

// newRun returns a namespace no other run, here or in another process,
// counts in, and the run's logger: discarded unless --verbose.
func newRun(cfg *Config) (string, *slog.Logger) {
	ns := "lt-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(runSeq.Add(1), 10)
	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("run", ns)
	}
	return ns, logger
}

// serveSim serves sim on a server of its own, behind the arrival jitter
// when cfg asks for one. The caller closes the server.
func serveSim(cfg *Config, sim *providertest.Simulator) *httptest.Server {
	var handler http.Handler = sim
	if cfg.jitter > 0 {
		handler = arrivalJitter{next: sim, max: cfg.jitter}
	}
	return httptest.NewServer(handler)
}

// simClient returns a sender's provider client of the simulator at url.
func simClient(url string) (*provider.Client, error) {
	client, err := provider.NewClient(url, simToken, provider.WithTimeout(sendTimeout))
	if err != nil {
		return nil, fmt.Errorf("provider client: %w", err)
	}
	return client, nil
}

// dial opens each sender's first Redis connection now, so that no run
// measures a dial. A failure is only reported: the strategies meet it as
// they would in production.
func dial(ctx context.Context, rdbs []*redis.Client, progress io.Writer) {
	for _, rdb := range rdbs {
		if err := rdb.Ping(ctx).Err(); err != nil && ctx.Err() == nil {
			fmt.Fprintf(progress, "loadtest: warning: Redis PING before the run: %v\n", err)
		}
	}
}

// drive runs the senders' workers, the OTP stream at otpRate, the
// redeliveries and each of also for d, waits for all of them, and returns
// the run's start. It fails when ctx ended first.
func drive(ctx context.Context, cfg *Config, d time.Duration, otpRate float64, ld *load, senders []*sender, also ...func(runCtx context.Context, start time.Time)) (time.Time, error) {
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(d))
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { ld.streamOTP(runCtx, otpRate) })
	wg.Go(func() { ld.redeliver(runCtx) })
	for _, f := range also {
		wg.Go(func() { f(runCtx, start) })
	}
	for _, s := range senders {
		for range cfg.mktWorkers {
			wg.Go(func() { s.work(runCtx, false) })
		}
		for range cfg.otpWorkers {
			wg.Go(func() { s.work(runCtx, true) })
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return start, fmt.Errorf("interrupted: %w", err)
	}
	return start, nil
}
