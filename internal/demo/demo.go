package demo

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
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
	// Classes is the number of classes the instances run: 2 (or 0), the
	// dispatcher's default otp and marketing; 3 adds transactional between
	// them (threeClasses), published at TransactionalRate.
	Classes int
	// TransactionalRate is the transactional messages published per second
	// while the campaign runs, with 3 classes; 0 means
	// DefaultTransactionalRate.
	TransactionalRate float64
	// Console, when set, is started once the stack is set up, on the
	// run's settings, a Redis client and a Pub/Sub client of the stack;
	// what it returns stops it when the run ends.
	Console func(cfg config.Settings, rdb redis.UniversalClient, ps *pubsub.Client) (stop func(), err error)
	// QuietHours gives marketing send windows that hold a third of the
	// campaign (French numbers) until France's window opens, a minute or
	// so after the start (quiet.go).
	QuietHours bool
	// OptOuts is how many recipients, sent every few OTP, reply STOP once
	// half the campaign is sent (optouts.go); with any, the instances
	// run a second account, the home of half of them; 0: none, one
	// account.
	OptOuts int
	// Guard gives the first class (otp) the pumping guard of
	// docs/guard.md's example and has about 80 % of its codes verified
	// (guard.go); the report says what the guard blocked and counted.
	Guard bool
}

// Run runs the pipeline of cfg on the local stack and returns its report.
func Run(ctx context.Context, cfg config.Settings, o Options) (Report, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.Classes == 3 {
		cfg = threeClasses(cfg)
		o.TransactionalRate = cmp.Or(o.TransactionalRate, DefaultTransactionalRate)
	}
	var quiet *QuietHours
	if o.QuietHours {
		var q QuietHours
		var err error
		if cfg, q, err = quietHours(cfg, time.Now()); err != nil {
			return Report{}, err
		}
		quiet = &q
	}
	if o.Guard {
		cfg = guarded(cfg)
	}
	sim := providertest.Config{Limit: int(cfg.ContractRPS), Window: time.Second, RetryAfter: time.Second}
	cfg, err := receiptsOn(cfg, &sim)
	if err != nil {
		return Report{}, err
	}
	stack, err := startLocal(cfg, sim)
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
	if err := setupLanes(ctx, admin, cfg); err != nil {
		return Report{}, err
	}

	if o.Console != nil {
		rdb, err := stack.newRedis()
		if err != nil {
			return Report{}, err
		}
		defer rdb.Close()
		stop, err := o.Console(cfg, rdb, admin)
		if err != nil {
			return Report{}, err
		}
		defer stop()
	}

	var tel *server.Telemetry
	if o.Traces {
		if tel, err = consoleTelemetry(ctx, o.Getenv); err != nil {
			return Report{}, err
		}
		defer tel.Shutdown(context.WithoutCancel(ctx), logger)
	}
	r := &run{cfg: cfg, o: o, stack: stack, stats: newStats(), start: time.Now()}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	// Closers run after every dispatcher has stopped, whatever happens.
	defer func() {
		stopRun()
		r.running.Wait()
		for i := len(r.closers) - 1; i >= 0; i-- {
			r.closers[i]()
		}
	}()
	var ver *verifier
	if o.Guard {
		ver = newVerifier(runCtx, admin, cfg.VerificationsTopic)
		r.closers = append(r.closers, func() { ver.stop() })
		r.stats.verify = ver.verify
	}
	if err := r.startInstances(ctx, runCtx, tel, logger); err != nil {
		return Report{}, err
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
	r.closers = append(r.closers, func() { statsRdb.Close() })
	statsErr := redisstats.Reset(ctx, statsRdb)

	plan := r.optOutPlan(runCtx)
	published, err := produce(ctx, admin, cfg, o, r.stats, plan, r.showProgress)
	if o.Progress != nil {
		io.WriteString(o.Progress, "\n")
	}
	verified := 0
	if ver != nil {
		verified = ver.stop() // the last ones marked while the receipts come
	}
	var delivery map[string]Delivery
	if err == nil {
		r.stats.mu.Lock()
		sent := r.stats.sentOn[cfg.Account.Name] // the receipts waited for are its
		r.stats.mu.Unlock()
		delivery = r.waitDelivery(ctx, statsRdb, sent)
	}
	stopRun()
	r.running.Wait()
	if err != nil {
		return Report{}, err
	}
	rep := r.report(published)
	rep.Delivery, rep.Quiet = delivery, quiet
	// Read once every instance has stopped: its last commands count too.
	if statsErr == nil {
		var cs redisstats.CommandStats
		if cs, statsErr = redisstats.Read(ctx, statsRdb); statsErr == nil {
			rep.RedisScripts, rep.RedisExecuted = cs.Scripts(), cs.Executed()
		}
	}
	if rep.Guard != nil {
		rep.Guard.Verified = verified
		r.countGuarded(ctx, statsRdb, rep.Guard)
	}
	switch {
	case statsErr != nil && rep.EmbeddedRedis:
		rep.RedisStatsErr = "miniredis keeps no INFO commandstats (set REDIS_URL to a real Redis)"
	case statsErr != nil:
		rep.RedisStatsErr = statsErr.Error()
	}
	return rep, nil
}

// consoleTelemetry is telemetry whose traces go to stdout, as
// OTEL_TRACES_EXPORTER=console gives; getenv (nil: os.Getenv) says the
// other OTEL_* variables.
func consoleTelemetry(ctx context.Context, getenv func(string) string) (*server.Telemetry, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	return server.NewTelemetry(ctx, func(k string) string {
		if k == "OTEL_TRACES_EXPORTER" {
			return "console"
		}
		return getenv(k)
	})
}

// run is one demo run's instances and what they counted.
type run struct {
	cfg      config.Settings
	o        Options
	stack    localStack
	stats    *stats
	start    time.Time
	counters []*counter // of each instance's Redis client
	lastSent int        // at the last progress line; owned by produce's goroutine
	running  sync.WaitGroup
	closers  []func() // run last first, once running is done
}

// optOutPlan is produce's optOutPlan of the run: o.OptOuts recipients,
// whose replies run until runCtx ends; none without OptOuts.
func (r *run) optOutPlan(runCtx context.Context) optOutPlan {
	if r.o.OptOuts == 0 {
		return optOutPlan{}
	}
	recipients := optOutRecipients(r.o.OptOuts)
	r.stats.mu.Lock()
	r.stats.stopAt = make([]time.Time, len(recipients))
	r.stats.mu.Unlock()
	var accounts []string
	for _, a := range r.accounts() {
		accounts = append(accounts, a.Name)
	}
	return optOutPlan{recipients: recipients, reply: func() {
		r.running.Go(func() { r.replyStop(runCtx, accounts, recipients) })
	}}
}

// accounts are the accounts the instances send on: the settings' one,
// and with OptOuts the second (secondAccount).
func (r *run) accounts() []config.Account {
	if r.o.OptOuts == 0 {
		return []config.Account{r.cfg.Account}
	}
	return []config.Account{r.cfg.Account, secondAccount(r.cfg.Account)}
}

// startInstances starts o.Instances servers, each with its own Redis and
// Pub/Sub clients, running until runCtx ends; their accounts are routed
// by longest prefix (the second account's numbers go to it first).
func (r *run) startInstances(ctx, runCtx context.Context, tel *server.Telemetry, logger *slog.Logger) error {
	cfg := r.cfg
	for i := range r.o.Instances {
		rdb, err := r.stack.newRedis()
		if err != nil {
			return err
		}
		r.closers = append(r.closers, func() { rdb.Close() })
		c := &counter{}
		rdb.AddHook(c)
		r.counters = append(r.counters, c)
		ps, err := topology.NewClient(ctx, cfg.ProjectID, r.stack.Pubsub.Addr)
		if err != nil {
			return err
		}
		r.closers = append(r.closers, func() { ps.Close() })
		var accounts []server.Account
		for _, a := range r.accounts() {
			sender, secret, err := a.Sender(cfg.SendTimeout, append(tel.ProviderOptions(), cfg.ReceiptOptions(a)...)...)
			if err != nil {
				return err
			}
			r.closers = append(r.closers, sender.CloseIdleConnections)
			accounts = append(accounts, server.Account{Setup: a, Sender: sender, Credentials: secret})
		}
		srv, err := server.New(cfg, accounts, rdb, ps, server.Options{
			Version: r.o.Version, Emulator: true, Telemetry: tel, Observer: r.stats, Logger: logger.With("instance", i),
			Route: dispatch.RouteLongestPrefix,
		})
		if err != nil {
			return err
		}
		r.closers = append(r.closers, srv.Close)
		r.running.Go(func() { srv.Run(runCtx) })
		if i == 0 {
			// One listener takes every instance's receipts, as a load
			// balancer in front of the pods would spread them.
			r.running.Go(func() {
				if err := srv.RunReceipts(runCtx); err != nil && runCtx.Err() == nil {
					logger.Error("receipts stopped", "err", err)
				}
			})
		}
	}
	return nil
}

// showProgress writes the progress line to o.Progress, if set.
func (r *run) showProgress() {
	if r.o.Progress == nil {
		return
	}
	s := r.stats
	s.mu.Lock()
	sent := total(s.sent)
	line := fmt.Sprintf("\r%5.0fs  sent %6d (otp %4d, marketing %6d)  %5.1f/s  OTP p99 %-8v  429s %d   ",
		time.Since(r.start).Seconds(), sent, s.sent[admission.OTP], s.sent[admission.Marketing], float64(sent-r.lastSent),
		p99(s.latency[admission.OTP]).Round(100*time.Microsecond), r.stack.Sim.Stats().Throttled)
	r.lastSent = sent
	s.mu.Unlock()
	io.WriteString(r.o.Progress, line)
}

// report is what the instances, their clients, the simulator and Pub/Sub
// counted, once every instance has stopped; published are the ids of the
// messages the demo published.
func (r *run) report(published []string) Report {
	rep := Report{Instances: r.o.Instances, Elapsed: time.Since(r.start), EmbeddedRedis: r.stack.Embedded()}
	s := r.stats
	s.mu.Lock()
	rep.Sent, rep.Expired, rep.DeadLettered, rep.Nacked = maps.Clone(s.sent), s.expired, s.dead, s.nacked
	rep.NackedBy, rep.Rate = maps.Clone(s.nackedBy), map[admission.Class]float64{}
	for c := range s.sent {
		if busy := s.last[c].Sub(s.first[c]).Seconds(); busy > 0 {
			rep.Rate[c] = float64(rep.Sent[c]-1) / busy
		}
	}
	rep.OTPLatencyP50, rep.P99 = quantile(s.latency[admission.OTP], 0.50), quantile(s.latency[admission.OTP], 0.99)
	rep.Latency = map[admission.Class]Latency{}
	for _, c := range r.cfg.ClassList() {
		rep.Classes = append(rep.Classes, c.Name)
		rep.Latency[c.Name] = Latency{P50: quantile(s.latency[c.Name], 0.50), P99: quantile(s.latency[c.Name], 0.99)}
	}
	rep.OTPWaitP50, rep.OTPWaitP99 = quantile(s.otpWait, 0.50), quantile(s.otpWait, 0.99)
	rep.Deferred, rep.Released = len(s.deferred), s.released
	rep.OptOut = s.optOutReport(r.start)
	if s.released > 0 {
		rep.ReleasedFrom, rep.ReleasedUntil = s.firstRelease.Sub(r.start), s.lastRelease.Sub(r.start)
	}
	s.mu.Unlock()
	st := r.stack.Sim.Stats()
	rep.Throttled = st.Throttled + st.SuspendedAnswers
	var accepted, segments []time.Time
	for _, a := range r.stack.Sim.Arrivals() {
		if a.Outcome == "accepted" {
			accepted = append(accepted, a.At)
			for range a.Segments {
				segments = append(segments, a.At)
			}
		}
	}
	rep.MaxIn1s = providertest.MaxInAnyWindow(accepted, time.Second)
	rep.MaxSegmentsIn1s = providertest.MaxInAnyWindow(segments, time.Second)
	rep.Provider, rep.RateUnit, rep.CampaignSegments = r.cfg.Provider, r.cfg.RateUnit, r.o.CampaignSegments
	for _, c := range r.counters {
		rep.ScriptCalls += c.scripts.Load()
		rep.RedisCmds += c.cmds.Load()
	}
	if r.o.Guard {
		rep.Guard = r.guardFigures()
	}
	// Deliveries of the messages the demo published, not of the dead
	// letters the instances published.
	mine := map[string]bool{}
	for _, id := range published {
		mine[id] = true
	}
	for _, m := range r.stack.Pubsub.Messages() {
		if mine[m.ID] {
			rep.Published++
			rep.Deliveries += m.Deliveries
		}
	}
	return rep
}
