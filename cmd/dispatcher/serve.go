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

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/telemetry"
)

// runServe is `dispatcher serve`: one pod of the pool.
func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	load := configFlags(fs, environ)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if err := checkProvider(cfg); err != nil {
		return err
	}
	if cfg.RedisURL == "" {
		return &configError{"REDIS_URL", "redis-url", "required to serve: it holds the limiter state all pods share"}
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))

	tel, err := newTelemetry(ctx)
	if err != nil {
		return err
	}
	defer tel.shutdown(context.WithoutCancel(ctx), logger)
	rdb, err := newRedisWithCA(cfg.RedisURL, cfg.RedisCA, cfg.RedisTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rdb.AddHook(tel.metrics.RedisHook())
	ps, err := newPubsub(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	sender, secret, err := newProvider(cfg, tel)
	if err != nil {
		return err
	}
	defer sender.CloseIdleConnections() // after the last send: keep-alives to the provider end with the process
	inst, err := newInstance(cfg, rdb, ps, environ("PUBSUB_EMULATOR_HOST") != "", sender, secret, tel, tel.metrics, logger)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		inst.close()
		return &configError{"HTTP_ADDR", "http-addr", err.Error()}
	}
	srv := &http.Server{Handler: inst.httpHandler(rdb, tel.metrics.Handler()), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	logger.Info("dispatcher serving", "http_addr", ln.Addr().String(), "project", cfg.ProjectID,
		"otp_subscription", cfg.OTPSubscription, "marketing_subscription", cfg.MarketingSubscription,
		"target_rps", cfg.TargetRPS, "marketing_rps", cfg.MarketingRPS, "max_senders", cfg.MaxSenders)

	// Shutdown order: the dispatcher stops pulling, nacks what waits and
	// lets sends finish (Run returns); the dead-letter publisher flushes
	// (inst.close); the HTTP server stops; then, deferred, the provider's
	// idle connections, Pub/Sub, Redis and telemetry close.
	runErr := inst.d.Run(ctx)
	logger.Info("dispatcher stopped pulling; sends in flight finished")
	inst.close()
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

// instance is one dispatcher with its own limiter, as one pod has.
type instance struct {
	d       *dispatch.Dispatcher
	limiter *admission.Limiter
	dlq     *pubsub.Publisher
}

// envOfField names the variable behind each admission.Config field.
var envOfField = map[string][2]string{
	"TargetRPS": {"TARGET_RPS", "target-rps"}, "MarketingRPS": {"MARKETING_RPS", "marketing-rps"},
	"Burst": {"BURST", "burst"}, "MaxSenders": {"MAX_SENDERS", "max-senders"},
	"Account": {"SMS_ACCOUNT", "account"}, "RedisTimeout": {"REDIS_TIMEOUT", "redis-timeout"},
	"MaxInFlight": {"PROVIDER_MAX_INFLIGHT", "provider-max-inflight"},
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
func newInstance(cfg config, rdb redis.Scripter, ps *pubsub.Client, emulator bool, sender dispatch.Sender, creds dispatch.Credentials, tel *telemetrySet, obs dispatch.Observer, logger *slog.Logger) (*instance, error) {
	lim, err := admission.New(rdb, admission.Config{
		Account: cfg.Account, TargetRPS: cfg.TargetRPS, MarketingRPS: cfg.MarketingRPS,
		Burst: cfg.Burst, MaxSenders: cfg.MaxSenders, RedisTimeout: cfg.RedisTimeout, Logger: logger,
		MaxInFlight: cfg.MaxInFlight, LeaseTTL: cfg.SendTimeout + 10*time.Second,
		MaxCost: maxCost(cfg),
	})
	var ce *admission.ConfigError
	if errors.As(err, &ce) {
		if v, ok := envOfField[ce.Field]; ok {
			return nil, &configError{v[0], v[1], ce.Reason}
		}
	}
	if err != nil {
		return nil, err
	}
	dlq := ps.Publisher(cfg.DeadLetterTopic)
	otp, mkt := ps.Subscriber(cfg.OTPSubscription), ps.Subscriber(cfg.MarketingSubscription)
	deps := dispatch.Deps{
		OTP: otp, Marketing: mkt, Limiter: lim, Claims: lim.Claims(), Sender: sender,
		DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: obs, Credentials: creds,
	}
	if tel != nil {
		deps.Tracer = tel.Tracing
	}
	d, err := dispatch.New(dispatch.Config{
		OTPMaxWait: cfg.OTPMaxWait, MarketingMaxWait: cfg.MarketingMaxWait,
		SendTimeout: cfg.SendTimeout, Grace: cfg.ShutdownGrace,
		MaxDeliveryAttempts:  maxDeliveryAttempts,
		OTPOutstanding:       outstanding(cfg.TargetRPS/float64(maxCost(cfg)), cfg.OTPMaxWait, 1),
		MarketingOutstanding: outstanding(cfg.MarketingRPS/float64(maxCost(cfg)), cfg.MarketingMaxWait, cfg.MaxSenders),
		ReadAhead:            readAhead(emulator),
		RateUnit:             rateUnit(cfg.RateUnit),
		MaxSegments:          cfg.MaxSegments,
		AccountPause:         cfg.AccountPause,
		Logger:               logger,
	}, deps)
	if err != nil {
		dlq.Stop()
		return nil, err
	}
	if tel != nil {
		tel.metrics.SetState(func() telemetry.State {
			penalty, fallback := lim.State()
			_, _, paused := lim.AccountPause()
			return telemetry.State{
				PenaltyActive: penalty, FallbackActive: fallback, AccountPaused: paused,
				BudgetTokens: d.BudgetTokens(), OTPWaiting: d.OTPWaiting(),
				ContractRPS: cfg.ContractRPS, TargetRPS: cfg.TargetRPS, MarketingRPS: cfg.MarketingRPS,
			}
		})
	}
	return &instance{d: d, limiter: lim, dlq: dlq}, nil
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

// maxCost is the most units one send can take: MAX_SEGMENTS when rates
// count segments.
func maxCost(cfg config) int {
	if cfg.RateUnit == "segment" {
		return cfg.MaxSegments
	}
	return 1
}

// rateUnit is the dispatch.RateUnit of a validated RATE_UNIT.
func rateUnit(s string) dispatch.RateUnit {
	if s == "segment" {
		return dispatch.PerSegment
	}
	return dispatch.PerMessage
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
		if why, left, paused := i.d.AccountPause(); paused {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: the provider refused the account (%s); sending paused for %v; redis %s\n",
				why, left.Round(time.Second), redisState)
			return
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
