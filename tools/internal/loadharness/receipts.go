package loadharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"smsdispatcher/admission"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/redisstats"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider/providertest"
)

// The receipts scenario: receiptsInstances dispatcher processes, each
// with its own Redis and Pub/Sub clients, its limiters and a
// receipts.Server of its own (Run, its own listener), behind one public
// URL that spreads the providers' connections over the three (as a load
// balancer does). Three accounts, each on its simulator and sending to
// its own destinations: generic (+1), Twilio (+44) and Vonage (+81, its
// sig with HMAC-SHA256). The run has two phases:
//
//   - send: the dispatchers send a marketing backlog sized so that its
//     receipts come to --receipt-rate over --duration; every message's
//     story (its provider id) is kept in Redis by the send's finish call;
//   - receipts: the dispatchers stopped, Redis's statistics reset, the
//     simulators post the receipts over --duration, each message's
//     drawn in that span: two intermediate statuses, then the final one
//     (receiptsDelivered of them delivered), some final receipts posted
//     twice (signed anew, or replayed byte for byte), some before their
//     intermediate ones, and a share forged (signed with a wrong key).
//
// The receipts are held until the send phase's planned end (the backlog
// at receiptsSendRate) so that Redis's own count of the commands it ran
// (INFO commandstats) is the receipts' alone; those that come before the
// dispatchers have stopped are left out of the phase's figures.
const (
	scenReceipts = "receipts"

	receiptsInstances = 3
	receiptsRate      = 500.0 // the default of --receipt-rate: receipts posted per second
	receiptsDuration  = time.Minute
	// receiptsContract is each account's contract and its simulator's
	// limit, and receiptsTarget its TARGET_RPS and MARKETING_RPS: the send
	// phase is not what the scenario measures.
	receiptsContract = 1000
	receiptsTarget   = 900
	// receiptsSendRate is the send rate the send phase is planned for, a
	// loaded 2-core machine's (200-215/s measured): the receipts are due
	// from receiptsSendSlack after the backlog would be sent at it. A
	// send phase that takes longer has its last messages' receipts come
	// while it ends (the run says so); one much shorter leaves a gap.
	receiptsSendRate  = 200.0
	receiptsSendSlack = time.Second
	// receiptsMinLatency is the least time from a message's acceptance to
	// its first receipt: the sender records its send (the provider id) in
	// the finish call after the answer, as at a real provider.
	receiptsMinLatency = 500 * time.Millisecond
	// receiptsSendBound bounds the send phase past its plan, and
	// receiptsDrain the wait for the last receipts past the run.
	receiptsSendBound = 2 * time.Minute
	receiptsDrain     = 30 * time.Second
	// receiptsReadTimeout bounds the harness's own Redis calls.
	receiptsReadTimeout = 10 * time.Second
)

// The receipts' mix, as ReceiptConfig's shares.
const (
	receiptsDelivered  = 0.9
	receiptsDuplicates = 0.1
	receiptsReplayed   = 0.05
	receiptsOutOfOrder = 0.2
	receiptsForged     = 0.02
	receiptsRetries    = 3 // a refused receipt is posted again, a forged one too
	// receiptsRetryDelay is the first retry's wait, doubled at each: a
	// limiter whose Redis call timed out refuses calls for a second
	// (answered 503), and the retries outlast that.
	receiptsRetryDelay = 500 * time.Millisecond
)

// receiptsPerMessage is what a message's receipts come to, posts of a
// forged one's retries included: two intermediate receipts and a final
// one, a duplicated final, a replayed final after each final.
const receiptsPerMessage = (2 + 1 + receiptsDuplicates) * (1 + receiptsForged*receiptsRetries) * (1 + receiptsReplayed/3)

// Credentials the simulators and the adapters share.
const (
	receiptsSecret     = "receipt-secret-loadtest"
	receiptsTwilioSID  = "AC0123456789abcdef0123456789abcdef"
	receiptsTwilioFrom = "+15005550006"
	receiptsVonageKey  = "loadtest"
	receiptsVonageFrom = "Acme"
	receiptsVonageSig  = "sha256"
	receiptsStatus     = "sms-status"
)

// receiptsAccount is one of the scenario's accounts.
type receiptsAccount struct {
	name, provider, prefix, to string
}

var receiptsAccounts = []receiptsAccount{
	{"generic", "generic", "+1", "+12025550143"},
	{"twilio", "twilio", "+44", "+447700900123"},
	{"vonage", "vonage", "+81", "+819012345678"},
}

// receiptsFlags are the flags only --scenario receipts takes.
var receiptsFlags = []string{"receipt-rate", "status-outage"}

// checkReceipts checks the receipts scenario's settings of c (set: the
// flags given) and sets its duration.
func checkReceipts(c *Config, set map[string]bool) error {
	c.receiptsDuration = receiptsDuration
	if set["duration"] {
		c.receiptsDuration = c.duration
	}
	switch {
	case c.receiptsDuration < 500*time.Millisecond || c.receiptsDuration > 30*time.Minute:
		return fmt.Errorf("--duration must be 500ms to 30m with --scenario %s, got %v", scenReceipts, c.receiptsDuration)
	case !(c.receiptRate >= 1) || c.receiptRate > 5000:
		return fmt.Errorf("--receipt-rate must be in [1, 5000], got %v", c.receiptRate)
	case c.statusOutage < 0 || c.statusOutage > c.receiptsDuration/2:
		return fmt.Errorf("--status-outage must be 0 to half of --duration, got %v", c.statusOutage)
	}
	return nil
}

// receiptsSpec is the receipts row's settings.
type receiptsSpec struct {
	rate       float64       // receipts posted per second
	duration   time.Duration // of the receipts phase
	instances  int
	retryDelay time.Duration // the simulators' first retry of a refused receipt
	sendRate   float64       // the send phase's planned rate
	// outage is how long the status topic refuses publishes from the
	// receipts' middle.
	outage time.Duration
}

// messages is how many messages the send phase sends.
func (s receiptsSpec) messages() int {
	return max(len(receiptsAccounts), int(math.Ceil(s.rate*s.duration.Seconds()/receiptsPerMessage)))
}

// runReceiptsRow runs the receipts row of cfg on the Redis at redisURL.
func runReceiptsRow(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) (*receiptsRow, error) {
	s := receiptsSpec{rate: cfg.receiptRate, duration: cfg.receiptsDuration, instances: receiptsInstances, retryDelay: receiptsRetryDelay, sendRate: receiptsSendRate,
		outage: cfg.statusOutage}
	fmt.Fprintf(progress, "loadtest: scenario receipts: %d messages, then their receipts at %g/s for %v\n", s.messages(), s.rate, s.duration)
	r, err := runReceipts(ctx, cfg, redisURL, s, progress)
	if err != nil {
		return nil, fmt.Errorf("run scenario receipts: %w", err)
	}
	return r, nil
}

// receiptsRun is what one run started: what measureReceipts reads.
type receiptsRun struct {
	spec     receiptsSpec
	accounts []string // the accounts' names, in receiptsAccounts' order
	sims     []*providertest.Simulator
	lb       *receiptsBalancer
	log      *receiptsLog
	metrics  *receiptsMetrics
	resends  *countingPublisher
	// stats are Redis's commands over the receipts phase.
	stats redisstats.CommandStats
	// sendPhase is the send phase's length; phase the receipts phase's
	// (from the reset of Redis's statistics to the last receipt).
	sendPhase, phase time.Duration
	limiters         []*admission.Limiter // one per account, for the stories
	pubsub           []*pubsubMessage
}

// pubsubMessage is one message the status topic holds.
type pubsubMessage struct {
	data []byte
	at   time.Time // when Pub/Sub took it
}

// runReceipts runs one row and measures it. Everything it starts is
// stopped and waited for before it returns.
func runReceipts(ctx context.Context, cfg *Config, redisURL string, s receiptsSpec, progress io.Writer) (*receiptsRow, error) {
	ns, logger := newRun(cfg)
	n := s.messages()
	begin := time.Now()
	receiptsFrom := begin.Add(time.Duration(float64(n)/s.sendRate*float64(time.Second)) + receiptsSendSlack)
	simCfg := providertest.Config{Token: simToken, Limit: receiptsContract, Window: time.Second, SuspendAfter: -1,
		Receipts: receiptsMix(receiptsFrom, s.duration, s.retryDelay)}

	down := &statusDown{topic: topicName(receiptsStatus)}
	stack, err := localstack.Start(localstack.Options{
		Project:    failoverProject,
		NackDelays: map[string]time.Duration{failoverTopology.MarketingSubscription: topology.MinimumBackoff("marketing")},
		Reactors:   []pstest.ServerReactorOption{{FuncName: "Publish", Reactor: down}},
		Sim:        withIntermediate(simCfg, "accepted", "sent"),
		RedisURL:   redisURL,
	})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	run := &receiptsRun{spec: s, log: newReceiptsLog(), metrics: newReceiptsMetrics(), resends: &countingPublisher{}}
	twilio := providertest.NewTwilio(withIntermediate(simCfg, "queued", "sent"), receiptsTwilioSID)
	vonageCfg := withIntermediate(simCfg, "accepted", "buffered")
	vonageCfg.Receipts.Secret, vonageCfg.Receipts.SignatureMethod = receiptsSecret, receiptsVonageSig
	vonage := providertest.NewVonage(vonageCfg, receiptsVonageKey)
	run.sims = []*providertest.Simulator{stack.Sim, twilio, vonage}
	simURLs := []string{stack.SimURL}
	for _, sim := range run.sims[1:] {
		srv := httptest.NewServer(sim)
		defer srv.Close()
		simURLs = append(simURLs, srv.URL)
	}
	for _, sim := range run.sims {
		defer sim.Close() // before the servers: it stops posting
	}
	for _, a := range receiptsAccounts {
		run.accounts = append(run.accounts, ns+"-"+a.name)
	}

	admin, err := topology.NewClient(ctx, failoverProject, stack.Pubsub.Addr)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if err := topology.Setup(ctx, admin, failoverTopology, func(string, string, string) {}); err != nil {
		return nil, fmt.Errorf("pubsub setup: %w", err)
	}
	if _, err := admin.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicName(receiptsStatus)}); err != nil {
		return nil, fmt.Errorf("create the status topic: %w", err)
	}
	if err := publishReceiptsBacklog(ctx, admin, n); err != nil {
		return nil, err
	}

	addrs, err := freeAddrs(s.instances)
	if err != nil {
		return nil, err
	}
	run.lb = newReceiptsBalancer(addrs)
	lbSrv := httptest.NewServer(run.lb)
	defer lbSrv.Close()
	defer run.lb.close()
	publicURL := lbSrv.URL

	// Two contexts: the dispatchers stop after the send phase, the
	// receipts servers after the receipts phase.
	sendCtx, stopSend := context.WithCancel(context.WithoutCancel(ctx))
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	var sending, serving sync.WaitGroup
	var closers []func()
	var serveErrs []error
	var serveMu sync.Mutex
	defer func() {
		stopSend()
		sending.Wait()
		stopServe()
		serving.Wait()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	for i := range s.instances {
		inst, closeAll, err := newReceiptsInstance(ctx, ns, redisURL, stack, simURLs, publicURL, addrs[i], run, logger.With("instance", i), cfg.redisTO)
		closers = append(closers, closeAll...)
		if err != nil {
			return nil, err
		}
		serving.Go(func() {
			if err := inst.receipts.Run(serveCtx); err != nil {
				serveMu.Lock()
				serveErrs = append(serveErrs, err)
				serveMu.Unlock()
			}
		})
		sending.Go(func() { inst.dispatcher.Run(sendCtx) })
	}
	if err := waitListening(ctx, addrs); err != nil {
		return nil, err
	}

	if !run.log.waitSent(ctx, n, time.Until(receiptsFrom)+receiptsSendBound) {
		return nil, fmt.Errorf("the send phase sent %d of %d messages", run.log.sentCount(), n)
	}
	stopSend()
	sending.Wait()
	run.sendPhase = time.Since(begin)
	if late := time.Since(receiptsFrom); late > 0 {
		fmt.Fprintf(progress, "loadtest: the send phase ended %v after the receipts began: some came before Redis's statistics were reset\n", late.Round(time.Millisecond))
	}
	fmt.Fprintf(progress, "loadtest: %d messages sent in %v; receipts from %v\n", n, run.sendPhase.Round(time.Millisecond), receiptsFrom.Sub(begin).Round(time.Millisecond))

	// The harness's own client, for the statistics and the stories, with
	// room for a loaded machine's Redis.
	stats, err := redisconn.New(redisconn.Settings{URL: redisURL, CallTimeout: receiptsReadTimeout})
	if err != nil {
		return nil, err
	}
	defer stats.Close()
	p, configs := receiptsSettings(ns)
	for _, a := range configs {
		lim, err := receiptsLimiter(stats, p, a, receiptsReadTimeout, logger)
		if err != nil {
			return nil, err
		}
		run.limiters = append(run.limiters, lim)
	}
	if err := redisstats.Reset(ctx, stats); err != nil {
		return nil, err
	}
	phaseStart := time.Now()
	run.lb.startPhase()
	if s.outage > 0 {
		// Its middle, on the receipts' own clock: they began at
		// receiptsFrom, whenever the phase did.
		from := receiptsFrom.Add(s.duration/2 - s.outage/2)
		t1 := time.AfterFunc(time.Until(from), func() { down.down.Store(true) })
		t2 := time.AfterFunc(time.Until(from.Add(s.outage)), func() { down.down.Store(false) })
		defer t1.Stop()
		defer t2.Stop()
	}
	if err := waitReceipts(ctx, run.sims, n, receiptsFrom.Add(s.duration+receiptsDrain)); err != nil {
		return nil, err
	}
	run.phase = time.Since(phaseStart)
	// The balancer's connections closed first: a server's shutdown waits
	// for a connection that has not sent a request for 5 s.
	run.lb.close()
	stopServe()
	serving.Wait()
	if err := errors.Join(serveErrs...); err != nil {
		return nil, err
	}
	if run.stats, err = redisstats.Read(ctx, stats); err != nil {
		return nil, err
	}
	for _, m := range stack.Pubsub.Messages() {
		if m.Topic == topicName(receiptsStatus) {
			run.pubsub = append(run.pubsub, &pubsubMessage{data: m.Data, at: m.PublishTime})
		}
	}
	return measureReceipts(ctx, run)
}

// receiptsMix is the simulators' receipts, due from from: each message's
// final receipt at a time drawn uniformly in [from + (from - a), from + d]
// for a message accepted at a (at least d/4 wide), so that its
// intermediate ones, halfway from its acceptance (ReceiptConfig), come
// after from too; its first receipt no sooner than receiptsMinLatency
// after a. A refused receipt is posted again after retryDelay, then twice
// that, and so on.
func receiptsMix(from time.Time, d, retryDelay time.Duration) providertest.ReceiptConfig {
	return providertest.ReceiptConfig{
		Delivered:  []providertest.Delivery{{Share: receiptsDelivered}},
		Duplicates: receiptsDuplicates, Replayed: receiptsReplayed, OutOfOrder: receiptsOutOfOrder, Forged: receiptsForged,
		Retries: receiptsRetries, RetryDelay: retryDelay, Workers: 32,
		Latency: func() time.Duration {
			now := time.Now()
			lo, hi := from.Add(max(from.Sub(now), 0)), from.Add(d)
			if hi.Sub(lo) < d/4 { // a send phase far shorter than planned: spread, do not bunch
				hi = lo.Add(d / 4)
			}
			final := lo.Add(rand.N(hi.Sub(lo) + 1))
			// Intermediate receipts come halfway.
			return max(final.Sub(now), 2*receiptsMinLatency)
		},
	}
}

// withIntermediate is cfg with its receipts' intermediate statuses, in the
// provider's words.
func withIntermediate(cfg providertest.Config, statuses ...string) providertest.Config {
	cfg.Receipts.Intermediate = statuses
	if cfg.Receipts.Secret == "" {
		cfg.Receipts.Secret = receiptsSecret
	}
	return cfg
}

// publishReceiptsBacklog publishes n marketing messages, one to each
// account's destination in turn, and waits until Pub/Sub has them all.
func publishReceiptsBacklog(ctx context.Context, admin *pubsub.Client, n int) error {
	mkt := admin.Publisher(failoverTopology.MarketingTopic)
	defer mkt.Stop()
	rs := make([]*pubsub.PublishResult, n)
	for i := range rs {
		to := receiptsAccounts[i%len(receiptsAccounts)].to
		rs[i] = mkt.Publish(ctx, &pubsub.Message{Data: receiptsMessage(receiptsID(i), to)})
	}
	for _, r := range rs {
		if _, err := r.Get(ctx); err != nil {
			return fmt.Errorf("publish the marketing backlog: %w", err)
		}
	}
	return nil
}

// freeAddrs returns n loopback addresses free a moment ago, for the
// receipts servers' Run to listen on.
func freeAddrs(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// waitListening waits until every one of addrs accepts connections.
func waitListening(ctx context.Context, addrs []string) error {
	deadline := time.Now().Add(5 * time.Second)
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("a receipts server does not listen on %s: %w", addr, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// waitReceipts waits until the simulators have planned the receipts of
// the n messages and are done with them all, or until deadline.
func waitReceipts(ctx context.Context, sims []*providertest.Simulator, n int, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// A simulator plans a message's receipts just after its answer has
	// left: the last send may have returned before.
	for {
		planned := 0
		for _, sim := range sims {
			planned += sim.ReceiptStats().Messages
		}
		if planned >= n {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("receipts planned for %d of %d messages", planned, n)
		}
		time.Sleep(time.Millisecond)
	}
	for _, sim := range sims {
		if err := sim.WaitReceipts(ctx); err != nil {
			return fmt.Errorf("the receipts were not all posted by %v: %w", deadline.Format(time.TimeOnly), err)
		}
	}
	return nil
}

// statusDown is a pstest reactor that refuses the publishes to topic while
// down is set, as a topic whose publisher role was taken away does
// (PermissionDenied: the client does not retry it on its own).
type statusDown struct {
	topic string
	down  atomic.Bool
}

// React runs under pstest's lock: it must not call the server.
func (s *statusDown) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.PublishRequest); ok && r.Topic == s.topic && s.down.Load() {
		return true, nil, status.Error(codes.PermissionDenied, "the status topic refuses publishes")
	}
	return false, nil, nil
}
