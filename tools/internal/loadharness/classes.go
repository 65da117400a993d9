package loadharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// The classes scenario runs the real dispatcher (dispatch.New with
// Deps.Lanes, as serve wires it) end to end: classesInstances processes,
// each with its own Redis and Pub/Sub clients and its own limiter, on
// pstest, a real Redis and the strict simulator (classesContract in any
// sliding second). One account, TARGET_RPS classesTarget, BURST
// classesBurst. A marketing backlog is published first, then
// transactional messages and OTPs at steady rates for the run's length.
// Code "after" configures three classes: otp, transactional (class_rps
// classesTrxRPS) and marketing (class_rps classesMktRPS), with reserve_rps
// otp classesOTPReserve; "before" is today's two classes (otp, marketing
// at MARKETING_RPS classesMktRPS), the transactional messages published to
// the marketing topic behind the backlog.
const (
	scenClasses = "classes"

	classesInstances = 3
	classesDuration  = time.Minute
	classesBacklog   = 20000
	classesOTPRate   = 5.0
	classesTrxRate   = 10.0

	classesContract   = 100
	classesTarget     = 90
	classesBurst      = 5
	classesTrxRPS     = 30
	classesMktRPS     = 70
	classesOTPReserve = 20

	// classesRampUp is the start of the run left out of the rates: the
	// pulls and the first slots are still starting.
	classesRampUp = 2 * time.Second
	// classesDrain bounds the wait, after the traffic, for every OTP and
	// transactional message to reach the provider.
	classesDrain = 3 * time.Second
	// classesOTPLife is each OTP's deadline from its publishing.
	classesOTPLife = time.Minute
	// classesStuck bounds the stop of dispatchers whose clients ping every
	// pull stream (classesSpec.pings): past their grace, pstest is stuck.
	classesStuck = 20 * time.Second
)

// transactional is the class the scenario adds between otp and marketing.
const transactional admission.Class = "transactional"

// The ids of the transactional messages (OTPs and marketing: failover's).
const trxIDPrefix = "trx-"

// classesExcludes are the flags of the other scenarios that --scenario
// classes does not take. It takes --duration, --otp-rate and --code.
var classesExcludes = []string{"senders", "target-rps", "marketing-rps", "burst", "segments"}

// checkClasses checks the classes scenario's settings of c (set: the
// flags given) and sets its duration and OTP rate.
func checkClasses(c *Config, set map[string]bool) error {
	for _, name := range classesExcludes {
		if set[name] {
			return fmt.Errorf("--%s does not apply to --scenario %s (%d dispatchers, one account at TARGET_RPS %d, BURST %d)",
				name, scenClasses, classesInstances, classesTarget, classesBurst)
		}
	}
	c.classesDuration, c.classesOTPRate = classesDuration, classesOTPRate
	if set["duration"] {
		c.classesDuration = c.duration
	}
	if set["otp-rate"] {
		c.classesOTPRate = c.otpRate
	}
	switch {
	case c.classesDuration < time.Second || c.classesDuration > 30*time.Minute:
		return fmt.Errorf("--duration must be 1s to 30m with --scenario %s, got %v", scenClasses, c.classesDuration)
	case c.classesOTPRate <= 0 || c.classesOTPRate > classesOTPReserve:
		return fmt.Errorf("--otp-rate must be in (0, %d] with --scenario %s (reserve_rps otp), got %v", classesOTPReserve, scenClasses, c.classesOTPRate)
	}
	return nil
}

// classesSpec is one classes row's settings.
type classesSpec struct {
	code             string // codeBefore or codeAfter
	duration, rampUp time.Duration
	drain            time.Duration
	backlog          int
	otpRate, trxRate float64 // trxRate 0: no transactional messages
	instances        int
	// limit is what the simulator allows in any sliding second; adaptive
	// turns the learned rate on; pings has the Pub/Sub clients ping
	// their pull streams as the client does, not as topology.NewClient
	// lets it against an emulator (the backlog scenario's before row).
	limit           int
	adaptive, pings bool
}

// classesSpecs returns the rows cfg asks for, in --code's order.
func classesSpecs(cfg *Config) []classesSpec {
	var out []classesSpec
	for _, code := range cfg.codes {
		out = append(out, classesSpec{code: code, duration: cfg.classesDuration, rampUp: min(classesRampUp, cfg.classesDuration/4),
			drain: classesDrain, backlog: classesBacklog, otpRate: cfg.classesOTPRate, trxRate: classesTrxRate, instances: classesInstances,
			limit: classesContract})
	}
	return out
}

// runClassesRows runs every classes row of cfg on the Redis at redisURL,
// one after the other, and returns them in that order.
func runClassesRows(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) ([]*classesRow, error) {
	specs := classesSpecs(cfg)
	var rows []*classesRow
	for i, s := range specs {
		fmt.Fprintf(progress, "loadtest: run %d/%d: scenario classes, code %s (%v)\n", i+1, len(specs), s.code, s.duration)
		r, err := runClasses(ctx, cfg, redisURL, s, progress)
		if err != nil {
			return nil, fmt.Errorf("run scenario classes %s: %w", s.code, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// runClasses runs one row and measures it.
func runClasses(ctx context.Context, cfg *Config, redisURL string, s classesSpec, progress io.Writer) (*classesRow, error) {
	run, err := runClassesTraffic(ctx, cfg, redisURL, s, progress)
	if err != nil {
		return nil, err
	}
	return measureClasses(s, run.lg, run.arrivals, run.throttled, run.cs), nil
}

// classesRun is what one run of the classes' stack leaves to measure.
type classesRun struct {
	lg        *classesLog
	arrivals  []providertest.Arrival // the simulator's
	throttled int                    // the simulator's answers of 429 and of a suspension
	cs        redisstats.CommandStats
}

// runClassesTraffic runs s's dispatchers and traffic. It resets the
// statistics of the Redis at redisURL (CONFIG RESETSTAT). Everything it
// starts is stopped and waited for before it returns, but with s.pings:
// a lane that stops reading its stream while pstest holds its lock for a
// ping on it never stops (pstest never answers again), and after
// classesStuck the run is left behind, its dispatchers and pstest
// unclosed.
func runClassesTraffic(ctx context.Context, cfg *Config, redisURL string, s classesSpec, progress io.Writer) (*classesRun, error) {
	stuck := false
	unlessStuck := func(f func()) {
		if !stuck {
			f()
		}
	}
	ns, logger := newRun(cfg)
	p, account := classesSettings(s.code, ns)
	lanes := p.ClassList()
	delays := map[string]time.Duration{}
	for i, l := range lanes {
		delays[l.Subscription] = topology.MinimumBackoff(retryClass(i))
	}
	stack, err := localstack.Start(localstack.Options{
		Project: failoverProject, NackDelays: delays, RedisURL: redisURL,
		Sim: providertest.Config{Token: simToken, Limit: s.limit, Window: time.Second, RetryAfter: time.Second, SuspendAfter: -1},
	})
	if err != nil {
		return nil, err
	}
	defer unlessStuck(func() { stack.Close() })
	admin, err := topology.NewClient(ctx, failoverProject, stack.Pubsub.Addr)
	if err != nil {
		return nil, err
	}
	defer unlessStuck(func() { admin.Close() })
	if err := setupClasses(ctx, admin, p, lanes); err != nil {
		return nil, err
	}

	lg := newClassesLog()
	lg.backlogAt = time.Now()
	if err := publishBacklog(ctx, admin, s.backlog); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "loadtest: %d marketing messages published in %v\n", s.backlog, time.Since(lg.backlogAt).Round(time.Millisecond))

	// The harness's own client, for Redis's statistics; reset before the
	// dispatchers start, read once they have stopped.
	statsRdb, err := redisconn.New(redisconn.Settings{URL: redisURL, CallTimeout: receiptsReadTimeout})
	if err != nil {
		return nil, err
	}
	defer statsRdb.Close()
	statsErr := redisstats.Reset(ctx, statsRdb)

	ds, err := runDispatchers(ctx, s.instances, func(i int) (*dispatch.Dispatcher, []func(), error) {
		return newClassesInstance(ctx, s, p, account, stack, lg, logger.With("instance", i), cfg.redisTO)
	})
	defer unlessStuck(ds.close)
	if err != nil {
		return nil, err
	}

	lg.start = time.Now()
	feedCtx, stopFeed := context.WithDeadline(ctx, lg.start.Add(s.duration))
	defer stopFeed()
	otp := admin.Publisher(lanes[0].Topic)
	trx := admin.Publisher(trxTopic(s.code))
	for _, pub := range []*pubsub.Publisher{otp, trx} {
		pub.PublishSettings.DelayThreshold = time.Millisecond
	}
	var feeding sync.WaitGroup
	var otpErr, trxErr error
	feeding.Go(func() {
		otpErr = feedClass(feedCtx, otp, s.otpRate, otpIDPrefix, "Your code is 482913", classesOTPLife, lg)
	})
	if s.trxRate > 0 {
		feeding.Go(func() {
			trxErr = feedClass(feedCtx, trx, s.trxRate, trxIDPrefix, "Your cart is waiting: 2 items", 0, lg)
		})
	}
	feeding.Wait()
	otp.Stop()
	trx.Stop()
	lg.end = time.Now()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted: %w", err)
	}
	if err := errors.Join(otpErr, trxErr); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	drained := lg.waitStreamsSent(ctx, stack.Sim, s.drain)
	lg.drained = time.Now()
	fmt.Fprintf(progress, "loadtest: traffic over; every OTP and transactional message sent: %v\n", drained)
	if s.pings {
		if stuck = !ds.stopWithin(classesStuck); stuck {
			fmt.Fprintf(progress, "loadtest: the dispatchers did not stop within %v: pstest holds its lock for a ping on a stream no longer read; left behind\n", classesStuck)
		}
	} else {
		ds.stop()
	}

	var cs redisstats.CommandStats
	if statsErr == nil {
		cs, statsErr = redisstats.Read(ctx, statsRdb)
	}
	if statsErr != nil {
		fmt.Fprintf(progress, "loadtest: no Redis statistics: %v\n", statsErr)
		cs = nil
	}
	st := stack.Sim.Stats()
	return &classesRun{lg: lg, arrivals: stack.Sim.Arrivals(), throttled: st.Throttled + st.SuspendedAnswers, cs: cs}, nil
}

// retryClass is the retry policy of the class at position i: the first
// class's is OTP's, the others' marketing's.
func retryClass(i int) string {
	if i == 0 {
		return "otp"
	}
	return "marketing"
}

// trxTopic is the topic the transactional messages are published to: its
// own with the three classes, marketing's with today's two.
func trxTopic(code string) string {
	if code == codeAfter {
		return classesLanes[1].Topic
	}
	return failoverTopology.MarketingTopic
}

// classesLanes are the classes of the "after" row, in priority order.
var classesLanes = []config.Class{
	{Name: admission.OTP, Topic: failoverTopology.OTPTopic, Subscription: failoverTopology.OTPSubscription, MaxWait: dispatch.DefaultOTPMaxWait},
	{Name: transactional, Topic: "sms-transactional", Subscription: "sms-transactional-dispatcher", MaxWait: 4 * time.Second},
	{Name: admission.Marketing, Topic: failoverTopology.MarketingTopic, Subscription: failoverTopology.MarketingSubscription, MaxWait: dispatch.DefaultMarketingMaxWait},
}

// classesSettings are the process settings of code's row (the
// dispatcher's defaults, and its classes) and its account, named of the
// run ns.
func classesSettings(code, ns string) (config.Process, config.Account) {
	p := config.Process{
		MaxSenders: admission.DefaultMaxSenders, ArrivalJitter: 20 * time.Millisecond,
		OTPMaxWait: dispatch.DefaultOTPMaxWait, MarketingMaxWait: dispatch.DefaultMarketingMaxWait,
		SendTimeout: dispatch.DefaultSendTimeout, ShutdownGrace: dispatch.DefaultGrace,
		OTPTopic: failoverTopology.OTPTopic, OTPSubscription: failoverTopology.OTPSubscription,
		MarketingTopic: failoverTopology.MarketingTopic, MarketingSubscription: failoverTopology.MarketingSubscription,
	}
	a := config.Account{Name: ns + "-main", Provider: "generic", RateUnit: "message", MaxSegments: 1,
		ContractRPS: classesContract, TargetRPS: classesTarget, MarketingRPS: classesMktRPS, Burst: classesBurst,
		Classes: []admission.Class{admission.OTP, admission.Marketing}}
	if code == codeAfter {
		p.Lanes = classesLanes
		a.Classes = []admission.Class{admission.OTP, transactional, admission.Marketing}
		a.ClassRPS = map[admission.Class]float64{transactional: classesTrxRPS, admission.Marketing: classesMktRPS}
		a.ReserveRPS = map[admission.Class]float64{admission.OTP: classesOTPReserve}
	}
	return p, a
}

// setupClasses creates the topics and subscriptions of failoverTopology,
// and those of lanes it does not name.
func setupClasses(ctx context.Context, admin *pubsub.Client, p config.Process, lanes []config.Class) error {
	t := failoverTopology
	t.MaxWait, t.SendTimeout = p.MarketingMaxWait, p.SendTimeout
	if err := topology.Setup(ctx, admin, t, func(string, string, string) {}); err != nil {
		return fmt.Errorf("pubsub setup: %w", err)
	}
	for _, l := range lanes {
		if l.Topic == t.OTPTopic || l.Topic == t.MarketingTopic {
			continue
		}
		if _, err := admin.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicName(l.Topic)}); err != nil {
			return fmt.Errorf("create topic %s: %w", l.Topic, err)
		}
		if _, err := admin.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: topology.SubscriptionName(failoverProject, l.Subscription), Topic: topicName(l.Topic),
			AckDeadlineSeconds: int32((l.MaxWait + p.SendTimeout + 10*time.Second) / time.Second),
			RetryPolicy:        &pubsubpb.RetryPolicy{MinimumBackoff: durationpb.New(topology.MinimumBackoff("marketing"))},
		}); err != nil {
			return fmt.Errorf("create subscription %s: %w", l.Subscription, err)
		}
	}
	return nil
}

// newClassesInstance builds one dispatcher process on clients of its own:
// Redis, Pub/Sub and the provider's; its limiter is the one serve builds
// (config.Process.Limiter), with the learned rate when s asks for it, its
// lanes p's classes. The closers release what it opened, also on an error.
func newClassesInstance(ctx context.Context, s classesSpec, p config.Process, a config.Account, stack *localstack.Stack, lg *classesLog,
	logger *slog.Logger, redisTimeout time.Duration) (*dispatch.Dispatcher, []func(), error) {
	rdb, ps, closers, err := instanceClients(ctx, stack.RedisURL, stack, redisTimeout, s.pings)
	if err != nil {
		return nil, closers, err
	}
	lc := p.Limiter(a)
	lc.RedisTimeout, lc.Logger = redisTimeout, logger
	if s.adaptive {
		lc.Adaptive = admission.Adaptive{Enabled: true, MinRPS: adaptiveMinRPS}
	}
	lim, err := admission.New(rdb, lc)
	if err != nil {
		return nil, closers, fmt.Errorf("account %s: %w", a.Name, err)
	}
	sender, err := provider.NewClient(stack.SimURL, simToken, provider.WithTimeout(p.SendTimeout))
	if err != nil {
		return nil, closers, err
	}
	closers = append(closers, sender.CloseIdleConnections)
	var lanes []dispatch.Lane
	for _, c := range p.ClassList() {
		lanes = append(lanes, dispatch.Lane{Class: c.Name, Subscriber: ps.Subscriber(c.Subscription), Policy: p.Policy(c.Name), MaxWait: c.MaxWait,
			Outstanding: p.Outstanding(c.Name, a)})
	}
	dlq := ps.Publisher(failoverTopology.DeadLetterTopic)
	closers = append(closers, dlq.Stop)
	d, err := dispatch.New(dispatch.Config{
		SendTimeout: p.SendTimeout, MaxDeliveryAttempts: topology.MaxDeliveryAttempts,
		ReadAhead: failoverReadAhead, Logger: logger,
	}, dispatch.Deps{
		Lanes: lanes,
		Accounts: []dispatch.Account{{Name: a.Name, Classes: a.Classes, Limiter: lim, Claims: lim.Claims(),
			Sender: sender, RateUnit: a.Unit(), MaxSegments: a.MaxSegments}},
		DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: lg,
	})
	return d, closers, err
}
