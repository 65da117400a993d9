package loadharness

// The receipts scenario's processes: a dispatcher and a receipts server
// sharing their limiters and adapters.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/receipts"
)

// receiptsInstance is one dispatcher process of the scenario.
type receiptsInstance struct {
	dispatcher *dispatch.Dispatcher
	receipts   *receipts.Server
}

// newReceiptsInstance builds one process on clients of its own: Redis,
// Pub/Sub, and per account a limiter and an adapter (which asks for
// receipts at publicURL and reads them), shared by its dispatcher and its
// receipts server listening on addr. The closers release what it opened,
// also on an error.
func newReceiptsInstance(ctx context.Context, ns, redisURL string, stack *localstack.Stack, simURLs []string, publicURL, addr string,
	run *receiptsRun, logger *slog.Logger, redisTimeout time.Duration) (*receiptsInstance, []func(), error) {
	rdb, ps, closers, err := instanceClients(ctx, redisURL, stack, redisTimeout, false)
	if err != nil {
		return nil, closers, err
	}

	p, configs := receiptsSettings(ns)
	home := configs[0]
	inst := &receiptsInstance{}
	var accounts []dispatch.Account
	var served []receipts.Account
	for i, ra := range receiptsAccounts {
		a := configs[i]
		lim, err := receiptsLimiter(rdb, p, a, redisTimeout, logger)
		if err != nil {
			return nil, closers, err
		}
		adapter, err := receiptsAdapter(ra.provider, simURLs[i], receipts.CallbackURL(publicURL, a.Name))
		if err != nil {
			return nil, closers, fmt.Errorf("account %s: %w", a.Name, err)
		}
		closers = append(closers, adapter.CloseIdleConnections)
		// The dispatcher needs an account for each class; no OTP is
		// published.
		classes := []admission.Class{admission.Marketing}
		if i == 0 {
			classes = append(classes, admission.OTP)
		}
		accounts = append(accounts, dispatch.Account{Name: a.Name, Classes: classes, Destinations: []string{ra.prefix},
			Limiter: lim, Claims: lim.Claims(), Sender: adapter, RateUnit: a.Unit(), MaxSegments: a.MaxSegments})
		served = append(served, receipts.Account{Name: a.Name, Reader: adapter, Ledger: lim.Ledger()})
	}
	status := ps.Publisher(receiptsStatus)
	status.PublishSettings.DelayThreshold = time.Millisecond
	closers = append(closers, status.Stop)
	if inst.receipts, err = receipts.New(receipts.Config{
		Addr: addr, PublicURL: publicURL, Accounts: served,
		Status: receipts.TopicPublisher{Publisher: status}, Resend: run.resends,
		Metrics: run.metrics, Logger: logger, Deadline: dispatch.PayloadDeadline,
	}); err != nil {
		return nil, closers, err
	}
	dlq := ps.Publisher(failoverTopology.DeadLetterTopic)
	closers = append(closers, dlq.Stop)
	inst.dispatcher, err = dispatch.New(dispatch.Config{
		OTPMaxWait: p.OTPMaxWait, MarketingMaxWait: p.MarketingMaxWait, SendTimeout: p.SendTimeout,
		MaxDeliveryAttempts:  topology.MaxDeliveryAttempts,
		OTPOutstanding:       p.Outstanding(admission.OTP, home),
		MarketingOutstanding: p.Outstanding(admission.Marketing, home),
		ReadAhead:            failoverReadAhead,
		Receipts:             true,
		Logger:               logger,
	}, dispatch.Deps{
		OTP: ps.Subscriber(failoverTopology.OTPSubscription), Marketing: ps.Subscriber(failoverTopology.MarketingSubscription),
		Accounts: accounts, DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: run.log,
	})
	return inst, closers, err
}

// receiptsSettings are the scenario's process settings, the dispatcher's
// defaults, and its accounts' (in receiptsAccounts' order), whose names
// are of the run ns.
func receiptsSettings(ns string) (config.Process, []config.Account) {
	p := config.Process{
		MaxSenders: admission.DefaultMaxSenders, OTPMaxWait: dispatch.DefaultOTPMaxWait, MarketingMaxWait: dispatch.DefaultMarketingMaxWait,
		SendTimeout: dispatch.DefaultSendTimeout, ShutdownGrace: dispatch.DefaultGrace,
	}
	var out []config.Account
	for _, ra := range receiptsAccounts {
		out = append(out, config.Account{Name: ns + "-" + ra.name, Provider: ra.provider, RateUnit: "message", MaxSegments: 1,
			ContractRPS: receiptsContract, TargetRPS: receiptsTarget, MarketingRPS: receiptsTarget, Burst: admission.DefaultBurst})
	}
	return p, out
}

// receiptsLimiter is account a's limiter on rdb, as serve builds it, its
// Redis calls bounded by timeout.
func receiptsLimiter(rdb redis.UniversalClient, p config.Process, a config.Account, timeout time.Duration, logger *slog.Logger) (*admission.Limiter, error) {
	lc := p.Limiter(a)
	lc.RedisTimeout, lc.Logger = timeout, logger
	lim, err := admission.New(rdb, lc)
	if err != nil {
		return nil, fmt.Errorf("account %s: %w", a.Name, err)
	}
	return lim, nil
}

// receiptAdapter is an adapter that sends and reads its receipts.
type receiptAdapter interface {
	dispatch.Sender
	provider.ReceiptReader
	CloseIdleConnections()
}

// receiptsAdapter returns the adapter of kind for the simulator at base,
// asking for receipts at callback.
func receiptsAdapter(kind, base, callback string) (receiptAdapter, error) {
	opts := []provider.Option{provider.WithTimeout(dispatch.DefaultSendTimeout), provider.WithStatusCallback(callback)}
	secret := provider.StaticSecret(receiptsSecret)
	switch kind {
	case "twilio":
		return provider.NewTwilio(provider.TwilioConfig{AccountSID: receiptsTwilioSID, AuthToken: provider.StaticSecret(simToken),
			From: receiptsTwilioFrom, BaseURL: base}, opts...)
	case "vonage":
		return provider.NewVonage(provider.VonageConfig{APIKey: receiptsVonageKey, APISecret: provider.StaticSecret(simToken),
			From: receiptsVonageFrom, BaseURL: base, SignatureSecret: secret, SignatureMethod: receiptsVonageSig}, opts...)
	}
	return provider.NewClient(base, simToken, append(opts, provider.WithReceiptSecret(secret))...)
}
