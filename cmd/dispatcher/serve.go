package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/pullwatch"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/topology"
	"smsdispatcher/server"
)

// stopBound is serve's server.Options.StopBound (a variable for the
// tests).
var stopBound = server.DefaultStopBound

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
	routing, err := accountSetups(cfg)
	if err != nil {
		return err
	}
	setups := routing.Accounts
	cfg.Lanes = routing.Classes
	if cfg.RedisURL == "" {
		return config.SettingError("REDIS_URL", "required to serve (or REDIS_URL_FILE): it holds the limiter state all pods share")
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	for _, w := range redisconn.Warnings(redisSettings(cfg, cfg.RedisTimeout)) {
		logger.Warn(w)
	}

	// Closed, deferred, once Serve has stopped (and the pull watch with
	// it): the provider's idle connections, Pub/Sub, the maxmemory-policy
	// watch, Redis and telemetry, in that order.
	tel, err := server.NewTelemetry(ctx, environ)
	if err != nil {
		return err
	}
	defer tel.Shutdown(context.WithoutCancel(ctx), logger)
	rdb, err := newRedisOf(cfg, cfg.RedisTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rdb.AddHook(tel.Metrics.RedisHook())
	policyCtx, stopPolicy := context.WithCancel(ctx)
	policyDone := make(chan struct{})
	go func() {
		defer close(policyDone)
		redisconn.PolicyWatch{Client: rdb, Logger: logger, Evicting: tel.Metrics.SetRedisEvicting}.Run(policyCtx)
	}()
	defer func() { stopPolicy(); <-policyDone }() // before Redis closes
	var pullNames []string
	pullClasses := map[string]admission.Class{}
	for _, c := range cfg.ClassList() {
		name := topology.SubscriptionName(cfg.ProjectID, c.Subscription)
		pullNames = append(pullNames, name)
		pullClasses[name] = c.Name
	}
	pulls := pullwatch.New(time.Now(), pullClasses,
		func(class admission.Class, code codes.Code) { tel.Metrics.PullError(class, code.String()) })
	ps, err := topology.NewClient(ctx, cfg.ProjectID, "", option.WithGRPCDialOption(pulls.DialOption()))
	if err != nil {
		return err
	}
	defer ps.Close()
	var accts []server.Account
	for _, s := range setups {
		sender, secret, err := s.Sender(cfg.SendTimeout, append(tel.ProviderOptions(), cfg.ReceiptOptions(s)...)...)
		if err != nil {
			return err
		}
		defer sender.CloseIdleConnections() // after the last send: keep-alives to the provider end with the process
		accts = append(accts, server.Account{Setup: s, Sender: sender, Credentials: secret})
	}
	// After every setting is checked: a wrong one is said before Pub/Sub
	// is asked anything.
	if err := checkSubscriptions(ctx, ps, cfg, subscriptionCheckTimeout); err != nil {
		return err
	}
	if err := checkTopics(ctx, ps, cfg, subscriptionCheckTimeout); err != nil {
		return err
	}
	srv, err := server.New(cfg, accts, rdb, ps, server.Options{
		Version: version, Emulator: environ("PUBSUB_EMULATOR_HOST") != "",
		Telemetry: tel, Observer: tel.Metrics, Logger: logger,
		Pulls: pulls, Subscriptions: pullNames, StopBound: stopBound, Route: routing.Route,
	})
	if err != nil {
		return err
	}
	return srv.Serve(ctx)
}

// accountSetups returns the accounts cfg describes and their route, for
// sending: ACCOUNTS_FILE's, or the one account of the single-account
// variables, whose provider settings must then be complete.
func accountSetups(cfg config.Settings) (config.Routing, error) {
	if cfg.AccountsFile == "" {
		if err := cfg.CheckProvider(); err != nil {
			return config.Routing{}, err
		}
	}
	return cfg.Routing()
}
