package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/pullwatch"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/status"
	"smsdispatcher/telemetry"
)

// runServe is `dispatcher serve`: one pod of the pool.
func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	load := config.Flags(fs, config.All, environ)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	setups, err := accountSetups(cfg)
	if err != nil {
		return err
	}
	if cfg.RedisURL == "" {
		return config.SettingError("REDIS_URL", "required to serve (or REDIS_URL_FILE): it holds the limiter state all pods share")
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	for _, w := range redisconn.Warnings(redisSettings(cfg, cfg.RedisTimeout)) {
		logger.Warn(w)
	}

	tel, err := newTelemetry(ctx)
	if err != nil {
		return err
	}
	defer tel.shutdown(context.WithoutCancel(ctx), logger)
	rdb, err := newRedisOf(cfg, cfg.RedisTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rdb.AddHook(tel.metrics.RedisHook())
	policyCtx, stopPolicy := context.WithCancel(ctx)
	policyDone := make(chan struct{})
	go func() {
		defer close(policyDone)
		redisconn.PolicyWatch{Client: rdb, Logger: logger, Evicting: tel.metrics.SetRedisEvicting}.Run(policyCtx)
	}()
	defer func() { stopPolicy(); <-policyDone }() // before Redis closes
	pullNames := []string{topology.SubscriptionName(cfg.ProjectID, cfg.OTPSubscription), topology.SubscriptionName(cfg.ProjectID, cfg.MarketingSubscription)}
	pulls := pullwatch.New(time.Now(), map[string]admission.Class{pullNames[0]: admission.OTP, pullNames[1]: admission.Marketing},
		func(class admission.Class, code codes.Code) { tel.metrics.PullError(class, code.String()) })
	ps, err := topology.NewClient(ctx, cfg.ProjectID, "", option.WithGRPCDialOption(pulls.DialOption()))
	if err != nil {
		return err
	}
	defer ps.Close()
	var accts []instanceAccount
	for _, s := range setups {
		sender, secret, err := newProvider(cfg.Process, s, tel)
		if err != nil {
			return err
		}
		defer sender.CloseIdleConnections() // after the last send: keep-alives to the provider end with the process
		accts = append(accts, instanceAccount{setup: s, sender: sender, creds: secret})
	}
	// After every setting is checked: a wrong one is said before Pub/Sub
	// is asked anything.
	if err := checkSubscriptions(ctx, ps, cfg, subscriptionCheckTimeout); err != nil {
		return err
	}
	inst, err := newInstance(cfg, accts, rdb, ps, environ("PUBSUB_EMULATOR_HOST") != "", tel, tel.metrics, logger)
	if err != nil {
		return err
	}
	inst.pulls, inst.pullNames, inst.stopping = pulls, pullNames, ctx.Done()
	inst.logAccounts(ctx, logger)

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		inst.close()
		return config.SettingError("HTTP_ADDR", err.Error())
	}
	srv := newHTTPServer(inst.httpHandler(rdb, tel.metrics.Handler()))
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	logger.Info("dispatcher serving", "http_addr", ln.Addr().String(), "project", cfg.ProjectID,
		"otp_subscription", cfg.OTPSubscription, "marketing_subscription", cfg.MarketingSubscription,
		"accounts", inst.d.Accounts(), "max_senders", cfg.MaxSenders)

	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		pulls.Run(watchCtx, logger)
	}()
	defer func() { stopWatch(); <-watched }()

	// Shutdown order: /readyz fails at once; the dispatcher stops pulling,
	// nacks what waits and lets sends finish (Run returns); the
	// dead-letter publisher flushes (inst.close); the HTTP server stops;
	// then, deferred, the pull watch stops, and the provider's idle
	// connections, Pub/Sub, the maxmemory-policy watch, Redis and telemetry
	// close. A Pub/Sub that
	// does not answer can hold Run (its Receive retries for ever) and the
	// flush: each is waited for a bounded time, and the process exits
	// whatever Pub/Sub does.
	var runErr error
	ran := make(chan error, 1) // Run's error, once it returns
	if !within(ctx, cfg.ShutdownGrace+stopBound, func() { ran <- inst.run(ctx) }) {
		logger.Error("pulls did not stop within SHUTDOWN_GRACE and the stop bound: exiting without them; what they held comes back when its lease runs out",
			"shutdown_grace", cfg.ShutdownGrace, "stop_bound", stopBound)
	} else {
		runErr = <-ran
		logger.Info("dispatcher stopped pulling; sends in flight finished")
	}
	if !within(ctx, stopBound, inst.close) {
		logger.Error("the dead-letter publisher did not flush within the stop bound: exiting; what it held is nacked and comes back", "stop_bound", stopBound)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http server shutdown", "err", err)
	}
	if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return runErr
}

// stopBound is how long serve waits, after SHUTDOWN_GRACE, for the pulls
// to stop, and again for the dead-letter publisher to flush, before it
// exits without them (a variable for the tests). With the HTTP server's
// and telemetry's 5 s each, a stop takes at most SHUTDOWN_GRACE + 20 s:
// within terminationGracePeriodSeconds.
var stopBound = 5 * time.Second

// within runs f and returns true once it has returned, or false once ctx
// has ended and bound has passed since, leaving f running: the process
// is exiting.
func within(ctx context.Context, bound time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// telemetrySet is the process's tracing and metrics.
type telemetrySet struct {
	*telemetry.Tracing
	metrics *telemetry.Metrics
}

func newTelemetry(ctx context.Context) (*telemetrySet, error) {
	tr, err := telemetry.SetupTracing(ctx, environ)
	if err != nil {
		return nil, err
	}
	m, err := telemetry.NewMetrics()
	if err != nil {
		tr.Shutdown(ctx)
		return nil, err
	}
	return &telemetrySet{Tracing: tr, metrics: m}, nil
}

func (t *telemetrySet) shutdown(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := t.Tracing.Shutdown(ctx); err != nil {
		logger.Warn("trace exporter shutdown", "err", err)
	}
	if err := t.metrics.Shutdown(ctx); err != nil {
		logger.Warn("metrics shutdown", "err", err)
	}
}

// instance is one dispatcher with its own limiters, as one pod has.
type instance struct {
	id       string // the process's name in its heartbeats: host and a random suffix
	d        *dispatch.Dispatcher
	accounts []instanceAccount
	limiters []*admission.Limiter // by account
	dlq      *pubsub.Publisher

	// Set by serve before the HTTP server starts; nil in the demo.
	pulls     *pullwatch.Watch // the pull streams, for /readyz
	pullNames []string         // the subscriptions' full names, OTP first
	stopping  <-chan struct{}  // closed at SIGTERM
}

// instanceAccount is one account of an instance: its settings and its
// provider adapter, with the credential the dispatcher watches (may be
// nil).
type instanceAccount struct {
	setup  config.Account
	sender dispatch.Sender
	creds  dispatch.Credentials
}

// accountSetups returns the accounts cfg describes, for sending:
// ACCOUNTS_FILE's, or the one account of the single-account variables,
// whose provider settings must then be complete.
func accountSetups(cfg config.Settings) ([]config.Account, error) {
	if cfg.AccountsFile == "" {
		if err := cfg.CheckProvider(); err != nil {
			return nil, err
		}
	}
	return cfg.Accounts()
}

// limiterConfig is the admission.Config of account s under the global
// settings of cfg.
func limiterConfig(cfg config.Settings, s config.Account, logger *slog.Logger) admission.Config {
	c := cfg.Limiter(s)
	c.Logger = logger
	return c
}

// routes is dispatch.Route for each class (indexed by admission.Class).
func routes(accounts []config.Account) [2][]int {
	served := config.Served(accounts)
	return [2][]int{admission.OTP: dispatch.Route(served, admission.OTP), admission.Marketing: dispatch.Route(served, admission.Marketing)}
}

// newProvider returns the adapter of account a, instrumented when tel is
// set, and the credential it reads at each send (config.Account.Sender).
func newProvider(p config.Process, a config.Account, tel *telemetrySet) (provider.Sender, *provider.Secret, error) {
	var opts []provider.Option
	if tel != nil {
		opts = append(opts, provider.WithTransportWrapper(func(rt http.RoundTripper) http.RoundTripper {
			return tel.Transport(rt, tel.metrics)
		}))
	}
	return a.Sender(p.SendTimeout, opts...)
}

// logAccounts logs each account's rates at start, the unit they count
// (with segments, the longest body), and the learned rate of those that
// learn (read from Redis; a Redis down at start says so).
func (i *instance) logAccounts(ctx context.Context, logger *slog.Logger) {
	for n, a := range i.accounts {
		c := a.setup
		attrs := []any{"account", c.Name, "provider", c.Provider, "classes", a.setup.Classes,
			"contract_rps", c.ContractRPS, "target_rps", c.TargetRPS, "marketing_rps", c.MarketingRPS,
			"burst", c.Burst, "rate_unit", c.RateUnit, "senders", len(a.setup.Senders), "adaptive", a.setup.Adaptive.Enabled}
		if c.RateUnit == "segment" {
			attrs = append(attrs, "max_segments", c.MaxSegments)
		}
		if a.setup.Adaptive.Enabled {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := i.limiters[n].Learned(lctx)
			cancel()
			switch {
			case err != nil:
				attrs = append(attrs, "learned_rps", "unknown: "+err.Error())
			case st.RPS == 0:
				attrs = append(attrs, "learned_rps", "none: the target holds")
			default:
				attrs = append(attrs, "learned_rps", st.RPS, "learned_mode", st.Mode)
			}
		}
		logger.Info("account", attrs...)
	}
}

// emulatorReadAhead is how many messages of each class a process reads
// from a Pub/Sub emulator (the library's default). An emulator (pstest,
// gcloud's) ignores the flow control the client asks for and sends a
// whole backlog at once: what the client has not read waits in the stream
// on the stream's 10s lease, runs out and is delivered again, however
// soon this process would have sent it. Read, it is leased and extended
// until the lane has a slot for it (newLane).
const emulatorReadAhead = 1000

// readAhead is dispatch.Config.ReadAhead: emulatorReadAhead against an
// emulator, none against Pub/Sub, which applies the flow control itself.
func readAhead(emulator bool) int {
	if emulator {
		return emulatorReadAhead
	}
	return 0
}

// newInstance wires one dispatcher on the given clients; it watches creds
// (the provider's credential) for changes. emulator says ps talks to an
// emulator. creds, tel and obs may be nil.
func newInstance(cfg config.Settings, accts []instanceAccount, rdb redis.Scripter, ps *pubsub.Client, emulator bool, tel *telemetrySet, obs dispatch.Observer, logger *slog.Logger) (*instance, error) {
	inst := &instance{accounts: accts, id: status.ProcessID()}
	var daccts []dispatch.Account
	// One view of Redis's health for the process: a Redis that is down is
	// down for every account, and asked once, not once per account.
	circuit := admission.NewCircuit(admission.DefaultRedisRetryAfter, logger)
	for _, a := range accts {
		lim, err := admission.New(rdb, limiterConfig(cfg, a.setup, logger), admission.WithCircuit(circuit))
		if err != nil && cfg.AccountsFile == "" {
			return nil, config.LimiterError(err)
		}
		if err != nil {
			return nil, err
		}
		inst.limiters = append(inst.limiters, lim)
		daccts = append(daccts, dispatch.Account{
			Name: a.setup.Name, Classes: a.setup.Classes,
			Limiter: lim, Claims: lim.Claims(), Sender: a.sender, Credentials: a.creds,
			RateUnit: rateUnit(a.setup.RateUnit), MaxSegments: a.setup.MaxSegments,
		})
	}
	// The lanes' flow control follows each class's home account.
	home := func(class admission.Class) config.Account { return accts[routes(setupsOf(accts))[class][0]].setup }
	otpHome, mktHome := home(admission.OTP), home(admission.Marketing)
	dlq := ps.Publisher(cfg.DeadLetterTopic)
	otp, mkt := ps.Subscriber(cfg.OTPSubscription), ps.Subscriber(cfg.MarketingSubscription)
	deps := dispatch.Deps{
		OTP: otp, Marketing: mkt, Accounts: daccts,
		DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: obs,
	}
	if tel != nil {
		deps.Tracer = tel.Tracing
	}
	d, err := dispatch.New(dispatch.Config{
		OTPMaxWait: cfg.OTPMaxWait, MarketingMaxWait: cfg.MarketingMaxWait,
		SendTimeout: cfg.SendTimeout, Grace: cfg.ShutdownGrace,
		MaxDeliveryAttempts:  topology.MaxDeliveryAttempts,
		OTPOutstanding:       outstanding(otpHome.TargetRPS/float64(otpHome.MaxCost()), cfg.OTPMaxWait, 1),
		MarketingOutstanding: outstanding(mktHome.MarketingRPS/float64(mktHome.MaxCost()), cfg.MarketingMaxWait, cfg.MaxSenders),
		ReadAhead:            readAhead(emulator),
		AccountPause:         cfg.AccountPause,
		Logger:               logger,
	}, deps)
	if err != nil {
		dlq.Stop()
		return nil, err
	}
	inst.d, inst.dlq = d, dlq
	if tel != nil {
		tel.metrics.SetState(inst.state)
	}
	return inst, nil
}

// state is what the gauges show: the process's, and each account's.
func (i *instance) state() telemetry.State {
	s := telemetry.State{BudgetTokens: i.d.BudgetTokens(), OTPWaiting: i.d.OTPWaiting()}
	for n, lim := range i.limiters {
		penalty, fallback := lim.State()
		_, _, paused := lim.AccountPause()
		c := i.accounts[n].setup
		s.Accounts = append(s.Accounts, telemetry.AccountState{
			Name: c.Name, PenaltyActive: penalty, FallbackActive: fallback, Paused: paused,
			ContractRPS: c.ContractRPS, TargetRPS: c.TargetRPS, MarketingRPS: c.MarketingRPS, LearnedRPS: lim.LearnedRPS(),
		})
	}
	return s
}

// run runs the dispatcher until ctx ends and it has stopped, beating on
// each account meanwhile.
func (i *instance) run(ctx context.Context) error {
	hctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		status.Heartbeats(hctx, i.id, version, i.limiters)
	}()
	err := i.d.Run(ctx)
	stop()
	<-done
	return err
}

// setupsOf returns the setups of accts.
func setupsOf(accts []instanceAccount) []config.Account {
	var s []config.Account
	for _, a := range accts {
		s = append(s, a.setup)
	}
	return s
}

// outstanding sizes a lane's flow control: no more messages in hand than
// the account could send within the class's max wait, shared among
// senders, and never fewer than 10. rps is in messages: with rates in
// segments, the rate over the longest message's segments, so that a
// backlog of long messages is not pulled faster than it can go (it would
// be nacked, or its leases run out while it waits).
func outstanding(rps float64, maxWait time.Duration, senders int) int {
	return max(10, int(math.Ceil(rps*maxWait.Seconds()/float64(senders))))
}

func (i *instance) close() { i.dlq.Stop() }

// rateUnit is the dispatch.RateUnit of a validated RATE_UNIT.
func rateUnit(s string) dispatch.RateUnit {
	if s == "segment" {
		return dispatch.PerSegment
	}
	return dispatch.PerMessage
}

// Limits of the HTTP server. Its answers are small and come from memory
// (a Redis PING of at most a second for /readyz), so a client that takes
// longer than these to send a request, read an answer or use its
// keep-alive connection again is a stuck or hostile one, and its
// connection is closed rather than held for ever.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second // the whole request, headers and body
	httpWriteTimeout      = 15 * time.Second // from the request's headers to the answer's end: a /metrics scrape
	httpIdleTimeout       = 60 * time.Second // a keep-alive connection between requests; Prometheus scrapes every 15s
	httpMaxHeaderBytes    = 16 << 10         // a probe's or a scrape's headers take a few hundred bytes
)

// newHTTPServer returns the server of /healthz, /readyz and /metrics,
// with the limits above.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// httpHandler serves /healthz, /readyz and /metrics.
func (i *instance) httpHandler(rdb redis.UniversalClient, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		// Redis down is not "not ready": the limiter falls back. Only lanes
		// that are not receiving make the pod unready.
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		redisState := "reachable"
		if err := rdb.Ping(ctx).Err(); err != nil {
			redisState = "unreachable (limiter in fallback)"
		}
		select {
		case <-i.stopping:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: shutting down (pulls stopping, sends in flight finishing); redis %s\n", redisState)
			return
		default:
		}
		if why, left, paused := i.d.AccountPause(); paused {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: the provider refused the account (%s); sending paused for %v; redis %s\n",
				why, left.Round(time.Second), redisState)
			return
		}
		for _, name := range i.pullNames {
			if d, silent := i.pulls.Silent(name, time.Now()); silent {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: no answer from Pub/Sub on %s for %v; redis %s\n", name, d.Round(time.Second), redisState)
				return
			}
		}
		if !i.d.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: subscriptions not receiving; redis %s\n", redisState)
			return
		}
		fmt.Fprintf(w, "ready; redis %s\n", redisState)
	})
	mux.Handle("GET /metrics", metrics)
	return mux
}
