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
	"smsdispatcher/provider"
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
	if cfg.ProviderURL == "" {
		return &configError{"SMS_PROVIDER_URL", "provider-url", "required to serve (try 'dispatcher demo' for a local run)"}
	}
	if cfg.RedisURL == "" {
		return &configError{"REDIS_URL", "redis-url", "required to serve: it holds the limiter state all pods share"}
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))

	rdb, err := newRedis(cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ps, err := newPubsub(ctx, cfg.ProjectID, "")
	if err != nil {
		return err
	}
	defer ps.Close()
	sender, err := provider.NewClient(cfg.ProviderURL, cfg.ProviderToken, provider.WithTimeout(cfg.SendTimeout))
	if err != nil {
		return &configError{"SMS_PROVIDER_URL", "provider-url", err.Error()}
	}
	metrics, err := telemetry.NewMetrics()
	if err != nil {
		return err
	}
	defer metrics.Shutdown(context.WithoutCancel(ctx))

	inst, err := newInstance(cfg, rdb, ps, sender, metrics, logger)
	if err != nil {
		return err
	}
	defer inst.close()

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return &configError{"HTTP_ADDR", "http-addr", err.Error()}
	}
	srv := &http.Server{Handler: inst.httpHandler(rdb, metrics.Handler()), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	logger.Info("dispatcher serving", "http_addr", ln.Addr().String(), "project", cfg.ProjectID,
		"otp_subscription", cfg.OTPSubscription, "marketing_subscription", cfg.MarketingSubscription,
		"target_rps", cfg.TargetRPS, "marketing_rps", cfg.MarketingRPS, "max_senders", cfg.MaxSenders)

	// Shutdown order: the dispatcher stops pulling, nacks what waits and
	// lets sends finish (Run returns); then the dead-letter publisher
	// flushes (inst.close); then the HTTP server stops; Redis and Pub/Sub
	// clients close last (defers).
	runErr := inst.d.Run(ctx)
	logger.Info("dispatcher stopped pulling; in-flight sends finished")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return runErr
}

// instance is one dispatcher with its own limiter, as one pod has.
type instance struct {
	d       *dispatch.Dispatcher
	limiter *admission.Limiter
	dlq     *pubsub.Publisher
}

// newInstance wires one dispatcher on the given clients.
func newInstance(cfg config, rdb redis.Scripter, ps *pubsub.Client, sender dispatch.Sender, obs dispatch.Observer, logger *slog.Logger) (*instance, error) {
	lim, err := admission.New(rdb, admission.Config{
		Account: cfg.Account, TargetRPS: cfg.TargetRPS, MarketingRPS: cfg.MarketingRPS,
		Burst: cfg.Burst, MaxSenders: cfg.MaxSenders, RedisTimeout: cfg.RedisTimeout, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	claims := admission.NewClaims(rdb, cfg.Account, 0, 0, cfg.RedisTimeout)
	dlq := ps.Publisher(cfg.DeadLetterTopic)
	otp, mkt := ps.Subscriber(cfg.OTPSubscription), ps.Subscriber(cfg.MarketingSubscription)
	d, err := dispatch.New(dispatch.Config{
		OTPMaxWait: cfg.OTPMaxWait, MarketingMaxWait: cfg.MarketingMaxWait,
		SendTimeout: cfg.SendTimeout, Grace: cfg.ShutdownGrace,
		OTPOutstanding:       outstanding(cfg.TargetRPS, cfg.OTPMaxWait, 1),
		MarketingOutstanding: outstanding(cfg.MarketingRPS, cfg.MarketingMaxWait, cfg.MaxSenders),
		Logger:               logger,
	}, dispatch.Deps{
		OTP: otp, Marketing: mkt, Limiter: lim, Claims: claims, Sender: sender,
		DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: obs,
	})
	if err != nil {
		dlq.Stop()
		return nil, err
	}
	return &instance{d: d, limiter: lim, dlq: dlq}, nil
}

// outstanding sizes a lane's flow control: no more messages in hand than
// the account could send within the class's max wait, shared among
// senders, and never fewer than 10.
func outstanding(rps float64, maxWait time.Duration, senders int) int {
	return max(10, int(math.Ceil(rps*maxWait.Seconds()/float64(senders))))
}

func (i *instance) close() { i.dlq.Stop() }

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
