package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/server"
)

// Options are the demo's own settings, besides the dispatcher's.
type Options struct {
	Instances int           // dispatcher instances, each with its own Redis client and limiters
	Campaign  int           // marketing messages published at the start
	OTPRate   float64       // OTP messages published per second while the campaign runs
	Timeout   time.Duration // the run gives up after this long
	// Progress receives a live progress line each second; nil: none.
	Progress io.Writer
	// Traces prints every span to stdout, as OTEL_TRACES_EXPORTER=console.
	Traces bool
	// Fail5xx makes the provider answer 503 for this long at the start.
	Fail5xx time.Duration
	// CampaignSegments is how many segments each campaign body takes.
	CampaignSegments int
	// Getenv reads the OTEL_* variables of the traces; nil means os.Getenv.
	Getenv func(string) string
	// Version is the build's, told in the instances' heartbeats.
	Version string
}

// Run runs the pipeline of cfg on the local stack and returns its report.
func Run(ctx context.Context, cfg config.Settings, o Options) (Report, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stack, err := startLocal(cfg, providertest.Config{Limit: int(cfg.ContractRPS), Window: time.Second, RetryAfter: time.Second})
	if err != nil {
		return Report{}, err
	}
	defer stack.Close()
	cfg = stack.providerConfig(cfg)

	admin, err := topology.NewClient(ctx, cfg.ProjectID, stack.Pubsub.Addr)
	if err != nil {
		return Report{}, err
	}
	defer admin.Close()
	t := cfg.Topology()
	t.WithoutDeadLetterPolicy = true // pstest
	if err := topology.Setup(ctx, admin, t, func(string, string, string) {}); err != nil {
		return Report{}, err
	}

	stats := newStats()
	var tel *server.Telemetry
	if o.Traces {
		// Console traces, as OTEL_TRACES_EXPORTER=console would give.
		getenv := o.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		tel, err = server.NewTelemetry(ctx, func(k string) string {
			if k == "OTEL_TRACES_EXPORTER" {
				return "console"
			}
			return getenv(k)
		})
		if err != nil {
			return Report{}, err
		}
		defer tel.Shutdown(context.WithoutCancel(ctx), logger)
	}
	var counters []*counter
	start := time.Now()
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	var running sync.WaitGroup
	// Closers run after every dispatcher has stopped, whatever happens.
	var closers []func()
	defer func() {
		stopRun()
		running.Wait()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	for i := range o.Instances {
		rdb, err := stack.newRedis()
		if err != nil {
			return Report{}, err
		}
		closers = append(closers, func() { rdb.Close() })
		c := &counter{}
		rdb.AddHook(c)
		counters = append(counters, c)
		ps, err := topology.NewClient(ctx, cfg.ProjectID, stack.Pubsub.Addr)
		if err != nil {
			return Report{}, err
		}
		closers = append(closers, func() { ps.Close() })
		sender, secret, err := cfg.Account.Sender(cfg.SendTimeout, tel.ProviderOptions()...)
		if err != nil {
			return Report{}, err
		}
		closers = append(closers, sender.CloseIdleConnections)
		srv, err := server.New(cfg, []server.Account{{Setup: cfg.Account, Sender: sender, Credentials: secret}}, rdb, ps, server.Options{
			Version: o.Version, Emulator: true, Telemetry: tel, Observer: stats, Logger: logger.With("instance", i),
		})
		if err != nil {
			return Report{}, err
		}
		closers = append(closers, srv.Close)
		running.Go(func() { srv.Run(runCtx) })
	}
	if o.Fail5xx > 0 {
		stack.Sim.FailFor(http.StatusServiceUnavailable, o.Fail5xx)
	}

	// Redis's own count starts here, after the setup and before the
	// traffic, on a client of its own: CONFIG RESETSTAT clears the figures
	// of the whole server (with REDIS_URL, for its other users too).
	statsRdb, err := stack.newRedis()
	if err != nil {
		return Report{}, err
	}
	closers = append(closers, func() { statsRdb.Close() })
	statsErr := redisstats.Reset(ctx, statsRdb)

	var lastSent int
	show := func() {
		if o.Progress == nil {
			return
		}
		stats.mu.Lock()
		sent := stats.sent[0] + stats.sent[1]
		line := fmt.Sprintf("\r%5.0fs  sent %6d (otp %4d, marketing %6d)  %5.1f/s  OTP p99 %-8v  429s %d   ",
			time.Since(start).Seconds(), sent, stats.sent[0], stats.sent[1], float64(sent-lastSent),
			p99(stats.otpLatency).Round(100*time.Microsecond), stack.Sim.Stats().Throttled)
		lastSent = sent
		stats.mu.Unlock()
		io.WriteString(o.Progress, line)
	}
	published, err := produce(ctx, admin, cfg, o, stats, show)
	if o.Progress != nil {
		io.WriteString(o.Progress, "\n")
	}
	stopRun()
	running.Wait()
	if err != nil {
		return Report{}, err
	}

	r := Report{Instances: o.Instances, Elapsed: time.Since(start), EmbeddedRedis: stack.Embedded()}
	stats.mu.Lock()
	r.Sent, r.Expired, r.DeadLettered, r.Nacked = stats.sent, stats.expired, stats.dead, stats.nacked
	r.NackedBy = maps.Clone(stats.nackedBy)
	for c := range 2 {
		if busy := stats.last[c].Sub(stats.first[c]).Seconds(); busy > 0 {
			r.Rate[c] = float64(r.Sent[c]-1) / busy
		}
	}
	r.OTPLatencyP50, r.P99 = quantile(stats.otpLatency, 0.50), quantile(stats.otpLatency, 0.99)
	r.OTPWaitP50, r.OTPWaitP99 = quantile(stats.otpWait, 0.50), quantile(stats.otpWait, 0.99)
	stats.mu.Unlock()
	st := stack.Sim.Stats()
	r.Throttled = st.Throttled + st.SuspendedAnswers
	var accepted, segments []time.Time
	for _, a := range stack.Sim.Arrivals() {
		if a.Outcome == "accepted" {
			accepted = append(accepted, a.At)
			for range a.Segments {
				segments = append(segments, a.At)
			}
		}
	}
	r.MaxIn1s = providertest.MaxInAnyWindow(accepted, time.Second)
	r.MaxSegmentsIn1s = providertest.MaxInAnyWindow(segments, time.Second)
	r.Provider, r.RateUnit, r.CampaignSegments = cfg.Provider, cfg.RateUnit, o.CampaignSegments
	for _, c := range counters {
		r.ScriptCalls += c.scripts.Load()
		r.RedisCmds += c.cmds.Load()
	}
	// Read once every instance has stopped: its last commands count too.
	if statsErr == nil {
		var cs redisstats.CommandStats
		if cs, statsErr = redisstats.Read(ctx, statsRdb); statsErr == nil {
			r.RedisScripts, r.RedisExecuted = cs.Scripts(), cs.Executed()
		}
	}
	switch {
	case statsErr != nil && r.EmbeddedRedis:
		r.RedisStatsErr = "miniredis keeps no INFO commandstats (set REDIS_URL to a real Redis)"
	case statsErr != nil:
		r.RedisStatsErr = statsErr.Error()
	}
	// Deliveries of the messages the demo published, not of the dead
	// letters the instances published.
	mine := map[string]bool{}
	for _, id := range published {
		mine[id] = true
	}
	for _, m := range stack.Pubsub.Messages() {
		if mine[m.ID] {
			r.Published++
			r.Deliveries += m.Deliveries
		}
	}
	return r, nil
}
