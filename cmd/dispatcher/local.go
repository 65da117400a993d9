//go:build !nodemo

package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/provider"
)

// localStack is everything a dispatcher needs, on this machine: an
// in-process Pub/Sub (pstest), Redis (miniredis, unless REDIS_URL names a
// real one) and the provider simulator behind an HTTP server.
type localStack struct {
	Pubsub   *pstest.Server
	Sim      *provider.Simulator
	SimURL   string
	redisURL string // a real Redis, or the embedded one's

	simSrv *httptest.Server
	mr     *miniredis.Miniredis
	stopMR context.CancelFunc
	wg     sync.WaitGroup
}

// The credentials the local stack's simulators expect.
const (
	demoToken     = "demo-token"
	demoTwilioSID = "AC00000000000000000000000000000000"
	demoVonageKey = "demo-key"
	demoFrom      = "+15005550006"
)

// startLocal starts the stack with the simulator of cfg.Provider (Twilio's
// and Vonage's count segments, as those providers do); close stops it.
func startLocal(cfg config.Settings, sim provider.SimConfig) (*localStack, error) {
	sim.Token = demoToken
	var ps *provider.Simulator
	switch cfg.Provider {
	case "twilio":
		sim.CountSegments = true
		ps = provider.NewTwilioSimulator(sim, demoTwilioSID)
	case "vonage":
		sim.CountSegments = true
		ps = provider.NewVonageSimulator(sim, demoVonageKey)
	default:
		sim.CountSegments = cfg.RateUnit == "segment"
		ps = provider.NewSimulator(sim)
	}
	s := &localStack{Pubsub: pstest.NewServer(nackBackoff(cfg)), Sim: ps, redisURL: cfg.RedisURL}
	s.simSrv = httptest.NewServer(s.Sim)
	s.SimURL = s.simSrv.URL
	if s.redisURL == "" {
		mr, err := miniredis.Run()
		if err != nil {
			s.close()
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		s.mr = mr
		s.redisURL = "redis://" + mr.Addr()
		// miniredis runs TTLs down only when told to: tell it in real
		// time, so penalties and claims expire as they would on Redis.
		ctx, cancel := context.WithCancel(context.Background())
		s.stopMR = cancel
		s.wg.Go(func() {
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			last := time.Now()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					mr.FastForward(now.Sub(last))
					last = now
				}
			}
		})
	}
	return s, nil
}

// nackBackoff makes pstest hold a nacked message of a dispatcher
// subscription for its retry policy's minimum backoff before redelivering
// it, as Pub/Sub does; pstest ignores RetryPolicy and redelivers a nack
// within 10ms, which turns every denial (Redis down, say) into a loop of
// deliveries the real service does not make.
func nackBackoff(cfg config.Settings) pstest.ServerReactorOption {
	n := nackDelay{}
	for class, sub := range map[string]string{"otp": cfg.OTPSubscription, "marketing": cfg.MarketingSubscription} {
		name := fmt.Sprintf("projects/%s/subscriptions/%s", cfg.ProjectID, sub)
		n[name] = int32(retryPolicies[class].MinimumBackoff.AsDuration() / time.Second)
	}
	return pstest.ServerReactorOption{FuncName: "ModifyAckDeadline", Reactor: n}
}

// nackDelay is the minimum backoff in seconds of each subscription.
type nackDelay map[string]int32

// React turns a nack (a new ack deadline of 0) into a deadline of the
// subscription's minimum backoff, then lets pstest handle the request.
// It runs under pstest's lock: it must not call the server.
func (n nackDelay) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.ModifyAckDeadlineRequest); ok && r.AckDeadlineSeconds == 0 {
		r.AckDeadlineSeconds = n[r.Subscription]
	}
	return false, nil, nil
}

// providerConfig returns cfg pointed at the stack's simulator, with the
// credentials it expects.
func (s *localStack) providerConfig(cfg config.Settings) config.Settings {
	cfg.ProviderURL, cfg.TwilioAPIURL, cfg.VonageAPIURL = s.SimURL, s.SimURL, s.SimURL
	cfg.ForgetFiles()
	cfg.ProviderToken = demoToken
	cfg.TwilioAccountSID, cfg.TwilioAuthToken, cfg.TwilioAuthTokenFile = demoTwilioSID, demoToken, ""
	if cfg.TwilioServiceSID == "" {
		cfg.TwilioFrom = demoFrom
	}
	cfg.VonageAPIKey, cfg.VonageAPISecret, cfg.VonageAPISecretFile, cfg.VonageFrom = demoVonageKey, demoToken, "", "SMSDEMO"
	return cfg
}

// newRedis returns a new client of the stack's Redis: one per dispatcher
// instance, as separate pods would have.
func (s *localStack) newRedis() (redis.UniversalClient, error) {
	rdb, err := newRedis(s.redisURL)
	if err == nil && s.mr != nil {
		rdb.AddHook(miniredisScripts{})
	}
	return rdb, err
}

// miniredisScripts is a go-redis hook for the embedded Redis. miniredis's
// Lua does not read the "#!lua" first line by which Redis 7 takes a
// script's flags (admission/scripts.go): EVAL gives it the script with that
// line left blank, and EVALSHA asks for the script by the SHA-1 of what
// miniredis was given.
type miniredisScripts struct{}

// flagless maps the SHA-1 of a script with its "#!lua" line to that of the
// script miniredis was given.
var flagless sync.Map

func (miniredisScripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (miniredisScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		withoutFlags(cmd.Args())
		return next(ctx, cmd)
	}
}
func (miniredisScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			withoutFlags(cmd.Args())
		}
		return next(ctx, cmds)
	}
}

// withoutFlags rewrites, in place, the arguments of an EVAL of a script
// with a "#!lua" line and of an EVALSHA of such a script.
func withoutFlags(args []any) {
	if len(args) < 2 {
		return
	}
	name, _ := args[0].(string)
	ref, _ := args[1].(string)
	switch strings.ToLower(name) {
	case "eval", "eval_ro":
		if _, rest, ok := strings.Cut(ref, "\n"); ok && strings.HasPrefix(ref, "#!") {
			args[1] = "\n" + rest // the same line numbers in errors
			flagless.Store(sha1Hex(ref), sha1Hex(args[1].(string)))
		}
	case "evalsha", "evalsha_ro":
		if sha, ok := flagless.Load(ref); ok {
			args[1] = sha
		}
	}
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (s *localStack) embeddedRedis() bool { return s.mr != nil }

func (s *localStack) close() {
	if s.stopMR != nil {
		s.stopMR()
		s.wg.Wait()
	}
	if s.mr != nil {
		s.mr.Close()
	}
	if s.simSrv != nil {
		s.simSrv.Close()
	}
	s.Pubsub.Close()
}
