package loadharness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// The failover scenario runs the real dispatcher (dispatch.New, as serve
// wires it) end to end: failoverInstances processes, each with its own
// Redis and Pub/Sub clients and its own limiters, on pstest (package
// localstack), a real Redis and two provider simulators. Account primary
// serves OTP and marketing (TARGET_RPS 90, MARKETING_RPS 70), account
// backup serves OTP only. OTP is published at --otp-rate (10/s) for the
// whole run, and a marketing backlog keeps the primary at its marketing
// rate. After the warm-up the primary fails for the storm's length
// (answering 503, or not answering at all until the send times out), then
// recovers; the run goes on for failoverAfter. A row is one (code, storm)
// pair: code "after" is the account health rule (admission.HealthRule's
// defaults), "before" the same run with the rule switched off (failures
// and timeouts in a row that never add up), which is how the dispatcher
// behaved before an account had a health.
const (
	scenFailover = "failover"

	failoverInstances = 3
	failoverOTPRate   = 10.0
	failoverWarmup    = 10 * time.Second
	failoverStorm     = 15 * time.Second
	failoverAfter     = 12 * time.Second
	// failoverSendTimeout is the scenario's SEND_TIMEOUT (--send-timeout):
	// the dispatcher's default, as operators keep it. A hanging provider
	// costs an OTP the hedge's bound, not this (dispatch.HedgeCeiling).
	failoverSendTimeout = dispatch.DefaultSendTimeout
	// failoverRampUp is the start of the warm-up left out of the rate
	// before the storm: the pulls and the first slots are still starting.
	failoverRampUp = 2 * time.Second
	// failoverDrain bounds the wait, after the run, for every OTP to reach
	// an end; failoverOTPLife is each OTP's deadline from its publishing.
	failoverDrain   = 30 * time.Second
	failoverOTPLife = time.Minute
	// failoverBacklog is the marketing backlog as a multiple of what
	// MARKETING_RPS sends over the whole run.
	failoverBacklog = 1.3
	failoverProject = "loadtest"
)

// The scenario's code rows and storms, in the order they run.
const (
	codeBefore = "before" // the health rule switched off
	codeAfter  = "after"  // the health rule's defaults
	storm503   = "503"    // every request to the primary answered 503
	stormHang  = "hang"   // no request to the primary answered: each send times out
)

var (
	allCodes  = []string{codeBefore, codeAfter}
	allStorms = []string{storm503, stormHang}
)

// The accounts and their rates.
const (
	primaryName         = "primary"
	backupName          = "backup"
	failoverTarget      = 90
	failoverMarketing   = 70
	failoverContractRPS = 100
)

// failoverFlags are the flags only --scenario failover takes;
// failoverExcludes those of the other scenarios it does not.
var (
	failoverFlags    = []string{"code", "storm", "storm-length", "send-timeout"}
	failoverExcludes = []string{"duration", "senders", "target-rps", "marketing-rps", "burst", "segments"}
)

// checkFailover checks the failover scenario's settings of c (set: the
// flags given) and sets its OTP rate.
func checkFailover(c *Config, set map[string]bool) error {
	for _, name := range failoverExcludes {
		if set[name] {
			return fmt.Errorf("--%s does not apply to --scenario %s (%d dispatchers, its accounts' rates, warm-up %v, --storm-length, %v after)",
				name, scenFailover, failoverInstances, failoverWarmup, failoverAfter)
		}
	}
	c.failoverOTPRate = failoverOTPRate
	if set["otp-rate"] {
		c.failoverOTPRate = c.otpRate
	}
	switch {
	case c.failoverOTPRate <= 0 || c.failoverOTPRate > 100:
		return fmt.Errorf("--otp-rate must be in (0, 100] with --scenario %s, got %v", scenFailover, c.failoverOTPRate)
	case c.stormLength < time.Second || c.stormLength > 10*time.Minute:
		return fmt.Errorf("--storm-length must be 1s to 10m, got %v", c.stormLength)
	case c.sendTimeout < 100*time.Millisecond || c.sendTimeout > time.Minute:
		return fmt.Errorf("--send-timeout must be 100ms to 1m, got %v", c.sendTimeout)
	}
	return nil
}

// failoverSpec is one failover row's settings.
type failoverSpec struct {
	code, kind           string // codeBefore or codeAfter; storm503 or stormHang
	warmup, storm, after time.Duration
	sendTimeout          time.Duration
	otpRate              float64
	instances            int
}

// total is the run's length: warm-up, storm and what follows it.
func (s failoverSpec) total() time.Duration { return s.warmup + s.storm + s.after }

// healthRule is the account health rule of s.code.
func (s failoverSpec) healthRule() admission.HealthRule {
	if s.code == codeBefore {
		const never = 1 << 30
		return admission.HealthRule{Failures: never, Timeouts: never}
	}
	return admission.HealthRule{}
}

// failoverSpecs returns the rows cfg asks for: each code with each storm.
func failoverSpecs(cfg *Config) []failoverSpec {
	var out []failoverSpec
	for _, code := range cfg.codes {
		for _, st := range cfg.failoverStorms {
			out = append(out, failoverSpec{code: code, kind: st, warmup: failoverWarmup, storm: cfg.stormLength, after: failoverAfter,
				sendTimeout: cfg.sendTimeout, otpRate: cfg.failoverOTPRate, instances: failoverInstances})
		}
	}
	return out
}

// runFailoverRows runs every failover row of cfg on the Redis at redisURL,
// one after the other, and returns them in that order.
func runFailoverRows(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) ([]*failoverRow, error) {
	specs := failoverSpecs(cfg)
	var rows []*failoverRow
	for i, s := range specs {
		fmt.Fprintf(progress, "loadtest: run %d/%d: scenario failover, code %s, storm %s (%v)\n", i+1, len(specs), s.code, s.kind, s.total())
		r, err := runFailover(ctx, cfg, redisURL, s, progress)
		if err != nil {
			return nil, fmt.Errorf("run scenario failover %s/%s: %w", s.code, s.kind, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// runFailover runs one row and measures it. Everything it starts is
// stopped and waited for before it returns.
func runFailover(ctx context.Context, cfg *Config, redisURL string, s failoverSpec, progress io.Writer) (*failoverRow, error) {
	ns, logger := newRun(cfg)
	simCfg := providertest.Config{Token: simToken, Limit: failoverContractRPS, Window: time.Second, RetryAfter: time.Second, SuspendAfter: -1}
	fault := &stormFault{}
	stack, err := localstack.Start(localstack.Options{
		Project: failoverProject,
		NackDelays: map[string]time.Duration{
			failoverTopology.OTPSubscription:       topology.MinimumBackoff("otp"),
			failoverTopology.MarketingSubscription: topology.MinimumBackoff("marketing"),
		},
		Sim:      simCfg,
		Wrap:     fault.wrap,
		RedisURL: redisURL,
	})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	backup := providertest.NewGeneric(simCfg)
	backupSrv := httptest.NewServer(backup)
	defer backupSrv.Close()

	admin, err := topology.NewClient(ctx, failoverProject, stack.Pubsub.Addr)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	t := failoverTopology
	t.MaxWait, t.SendTimeout = dispatch.DefaultMarketingMaxWait, s.sendTimeout
	if err := topology.Setup(ctx, admin, t, func(string, string, string) {}); err != nil {
		return nil, fmt.Errorf("pubsub setup: %w", err)
	}

	lg := newFailoverLog()
	// The marketing backlog goes in first: the primary sends marketing at
	// its rate from the run's first slot.
	if err := publishBacklog(ctx, admin, int(failoverBacklog*failoverMarketing*s.total().Seconds())); err != nil {
		return nil, err
	}

	ds, err := runDispatchers(ctx, s.instances, func(i int) (*dispatch.Dispatcher, []func(), error) {
		return newFailoverInstance(ctx, s, ns, redisURL, stack, backupSrv.URL, lg, logger.With("instance", i), cfg.redisTO)
	})
	defer ds.close()
	if err != nil {
		return nil, err
	}

	start := time.Now()
	lg.start = start
	feedCtx, stopFeed := context.WithDeadline(ctx, start.Add(s.total()))
	defer stopFeed()
	otp := admin.Publisher(failoverTopology.OTPTopic)
	otp.PublishSettings.DelayThreshold = time.Millisecond
	var feeding sync.WaitGroup
	var feedErr error
	feeding.Go(func() { feedErr = feedOTP(feedCtx, otp, s.otpRate, lg) })
	feeding.Go(func() {
		timer := time.NewTimer(time.Until(start.Add(s.warmup)))
		defer timer.Stop()
		select {
		case <-feedCtx.Done():
			return
		case <-timer.C:
		}
		lg.stormStart = time.Now()
		lg.stormEnd = lg.stormStart.Add(s.storm)
		switch s.kind {
		case storm503:
			stack.Sim.FailFor(http.StatusServiceUnavailable, s.storm)
		case stormHang:
			fault.hangUntil(lg.stormEnd)
		}
		fmt.Fprintf(progress, "loadtest: the primary fails (%s) for %v\n", s.kind, s.storm)
	})
	feeding.Wait()
	otp.Stop()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	if feedErr != nil {
		return nil, feedErr
	}
	drained := lg.waitOTPEnds(ctx, failoverDrain)
	lg.drained = time.Now()
	fmt.Fprintf(progress, "loadtest: run over; every OTP at an end: %v\n", drained)
	ds.stop()

	lg.primaryRequests = fault.requests()
	lg.primary, lg.backup = stack.Sim.Arrivals(), backup.Arrivals()
	for _, m := range stack.Pubsub.Messages() {
		if m.Acks == 0 || (m.Topic != topicName(failoverTopology.OTPTopic) && m.Topic != topicName(failoverTopology.MarketingTopic)) {
			continue
		}
		var body struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(m.Data, &body) == nil {
			lg.acked[body.ID] = true
		}
	}
	return measureFailover(s, lg), nil
}

// failoverTopology names the scenario's topics and subscriptions, as the
// dispatcher's defaults do. pstest republishes forever under a dead-letter
// policy, and the dispatcher dead-letters explicitly anyway.
var failoverTopology = topology.Topology{
	OTPTopic: "sms-otp", MarketingTopic: "sms-marketing", DeadLetterTopic: "sms-dead-letter",
	OTPSubscription: "sms-otp-dispatcher", MarketingSubscription: "sms-marketing-dispatcher",
	DeadLetterInspect: "sms-dead-letter-inspect", DeadLetterRetention: 24 * time.Hour,
	WithoutDeadLetterPolicy: true,
}

func topicName(id string) string { return "projects/" + failoverProject + "/topics/" + id }

// newFailoverInstance builds one dispatcher process on clients of its own:
// Redis, Pub/Sub, and a provider client per account; its limiters are
// the ones serve builds (config.Process.Limiter) with the row's health
// rule. The closers release what it opened, also on an error.
func newFailoverInstance(ctx context.Context, s failoverSpec, ns, redisURL string, stack *localstack.Stack, backupURL string,
	lg *failoverLog, logger *slog.Logger, redisTimeout time.Duration) (*dispatch.Dispatcher, []func(), error) {
	rdb, ps, closers, err := instanceClients(ctx, redisURL, stack, redisTimeout, false)
	if err != nil {
		return nil, closers, err
	}

	p := failoverProcess(s)
	var accounts []dispatch.Account
	for _, a := range failoverAccounts(ns, stack.SimURL, backupURL) {
		lc := p.Limiter(a)
		lc.Health, lc.RedisTimeout, lc.Logger = s.healthRule(), redisTimeout, logger
		lim, err := admission.New(rdb, lc)
		if err != nil {
			return nil, closers, fmt.Errorf("account %s: %w", a.Name, err)
		}
		sender, err := provider.NewClient(a.ProviderURL, simToken, provider.WithTimeout(s.sendTimeout))
		if err != nil {
			return nil, closers, err
		}
		closers = append(closers, sender.CloseIdleConnections)
		accounts = append(accounts, dispatch.Account{Name: a.Name, Classes: a.Classes, Limiter: lim, Claims: lim.Claims(),
			Sender: sender, RateUnit: a.Unit(), MaxSegments: a.MaxSegments})
	}
	dlq := ps.Publisher(failoverTopology.DeadLetterTopic)
	closers = append(closers, dlq.Stop)
	primary := failoverAccounts(ns, "", "")[0]
	d, err := dispatch.New(dispatch.Config{
		OTPMaxWait: p.OTPMaxWait, MarketingMaxWait: p.MarketingMaxWait, SendTimeout: p.SendTimeout,
		MaxDeliveryAttempts:  topology.MaxDeliveryAttempts,
		OTPOutstanding:       p.Outstanding(admission.OTP, primary),
		MarketingOutstanding: p.Outstanding(admission.Marketing, primary),
		ReadAhead:            failoverReadAhead,
		Logger:               logger,
	}, dispatch.Deps{
		OTP: ps.Subscriber(failoverTopology.OTPSubscription), Marketing: ps.Subscriber(failoverTopology.MarketingSubscription),
		Accounts: accounts, DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: lg,
	})
	return d, closers, err
}

// failoverReadAhead is what serve reads ahead from a Pub/Sub emulator
// (pstest ignores the client's flow control; server.readAhead says why).
const failoverReadAhead = 1000

// failoverProcess is the process settings of the scenario: the
// dispatcher's defaults, with s's SEND_TIMEOUT.
func failoverProcess(s failoverSpec) config.Process {
	return config.Process{
		MaxSenders: admission.DefaultMaxSenders, ArrivalJitter: 20 * time.Millisecond,
		OTPMaxWait: dispatch.DefaultOTPMaxWait, MarketingMaxWait: dispatch.DefaultMarketingMaxWait,
		SendTimeout: s.sendTimeout, ShutdownGrace: dispatch.DefaultGrace,
	}
}

// failoverAccounts are the scenario's two accounts, in routing order, with
// names of the run ns (their Redis keys are the run's alone).
func failoverAccounts(ns, primaryURL, backupURL string) []config.Account {
	a := config.Account{Provider: "generic", RateUnit: "message", MaxSegments: 1, ContractRPS: failoverContractRPS,
		TargetRPS: failoverTarget, MarketingRPS: failoverMarketing, Burst: admission.DefaultBurst}
	primary, backup := a, a
	primary.Name, primary.ProviderURL, primary.Classes = ns+"-"+primaryName, primaryURL, []admission.Class{admission.OTP, admission.Marketing}
	backup.Name, backup.ProviderURL, backup.Classes = ns+"-"+backupName, backupURL, []admission.Class{admission.OTP}
	return []config.Account{primary, backup}
}

// dispatchers are the dispatchers of a scenario's processes, running.
type dispatchers struct {
	stopRun context.CancelFunc
	running sync.WaitGroup
	closers []func() // what the processes opened, in order
}

// runDispatchers runs n dispatchers, the i-th of newInstance(i), until
// stop or close; on an error it returns what it started, for close.
func runDispatchers(ctx context.Context, n int, newInstance func(i int) (*dispatch.Dispatcher, []func(), error)) (*dispatchers, error) {
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	ds := &dispatchers{stopRun: stopRun}
	for i := range n {
		d, closeAll, err := newInstance(i)
		ds.closers = append(ds.closers, closeAll...)
		if err != nil {
			return ds, err
		}
		ds.running.Go(func() { d.Run(runCtx) })
	}
	return ds, nil
}

// stop ends the dispatchers' runs and waits for them.
func (ds *dispatchers) stop() {
	ds.stopRun()
	ds.running.Wait()
}

// stopWithin stops the dispatchers and reports whether their runs ended
// within d; if not, they are left running.
func (ds *dispatchers) stopWithin(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		ds.stop()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// close stops the dispatchers and closes what they opened, last first.
func (ds *dispatchers) close() {
	ds.stop()
	for i := len(ds.closers) - 1; i >= 0; i-- {
		ds.closers[i]()
	}
}

// instanceClients opens one process's own clients: Redis (adapted to the
// stack) and Pub/Sub on the stack's server, topology.NewClient's, or with
// pings one whose pull streams ping the emulator as the client does. The
// closers release what it opened, also on an error.
func instanceClients(ctx context.Context, redisURL string, stack *localstack.Stack, redisTimeout time.Duration, pings bool) (redis.UniversalClient, *pubsub.Client, []func(), error) {
	var closers []func()
	rdb, err := redisconn.New(redisconn.Settings{URL: redisURL, CallTimeout: redisTimeout})
	if err != nil {
		return nil, nil, closers, err
	}
	closers = append(closers, func() { rdb.Close() })
	stack.Adapt(rdb)
	var ps *pubsub.Client
	if pings {
		ps, err = pubsub.NewClient(ctx, failoverProject, option.WithEndpoint(stack.Pubsub.Addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	} else {
		ps, err = topology.NewClient(ctx, failoverProject, stack.Pubsub.Addr)
	}
	if err != nil {
		return nil, nil, closers, err
	}
	closers = append(closers, func() { ps.Close() })
	return rdb, ps, closers, nil
}
