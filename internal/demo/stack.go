package demo

import (
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// localStack is the demo's local stack (package localstack), set up from
// the dispatcher's settings.
type localStack struct{ *localstack.Stack }

// startLocal starts the stack with the simulator of cfg.Provider, whose
// subscriptions (each class's) hold a nacked message for their retry
// policy's minimum backoff; Close stops it.
func startLocal(cfg config.Settings, sim providertest.Config) (localStack, error) {
	sim.CountSegments = cfg.RateUnit == "segment"
	delays := map[string]time.Duration{}
	for i, c := range cfg.ClassList() {
		delays[c.Subscription] = topology.MinimumBackoff(retryClass(i))
	}
	s, err := localstack.Start(localstack.Options{
		Project:    cfg.ProjectID,
		NackDelays: delays,
		Provider:   cfg.Provider,
		Sim:        sim,
		RedisURL:   cfg.RedisURL,
	})
	return localStack{s}, err
}

// providerConfig returns cfg pointed at the stack's simulator, with the
// credentials it expects.
func (s localStack) providerConfig(cfg config.Settings) config.Settings {
	cfg.ProviderURL, cfg.TwilioAPIURL, cfg.VonageAPIURL = s.SimURL, s.SimURL, s.SimURL
	cfg.ForgetFiles()
	cfg.ProviderToken = localstack.Token
	cfg.TwilioAccountSID, cfg.TwilioAuthToken, cfg.TwilioAuthTokenFile = localstack.TwilioSID, localstack.Token, ""
	if cfg.TwilioServiceSID == "" {
		cfg.TwilioFrom = localstack.From
	}
	cfg.VonageAPIKey, cfg.VonageAPISecret, cfg.VonageAPISecretFile, cfg.VonageFrom = localstack.VonageKey, localstack.Token, "", "SMSDEMO"
	// The simulator signs receipts with the token (Twilio's auth token
	// as Twilio does; the generic receipt and Vonage signature secrets).
	cfg.UseReceiptSecret(provider.StaticSecret(localstack.Token))
	return cfg
}

// newRedis returns a new client of the stack's Redis: one per dispatcher
// instance, as separate pods would have.
func (s localStack) newRedis() (redis.UniversalClient, error) {
	rdb, err := redisconn.New(redisconn.Settings{URL: s.RedisURL})
	if err == nil {
		s.Adapt(rdb)
	}
	return rdb, err
}
