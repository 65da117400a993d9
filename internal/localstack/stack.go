package localstack

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"smsdispatcher/provider/providertest"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// The credentials the stack's simulators expect, unless Options.Sim.Token
// names another token.
const (
	Token     = "demo-token"
	TwilioSID = "AC00000000000000000000000000000000"
	VonageKey = "demo-key"
	From      = "+15005550006"
)

// Options configure a Stack. The zero value is a stack of the generic
// provider API in project "" whose nacks pstest redelivers at once.
type Options struct {
	// Project is the Pub/Sub project of the subscriptions in NackDelays.
	Project string
	// NackDelays maps a subscription's ID to how long a nacked message of
	// it is held before redelivery (its RetryPolicy's minimum backoff, in
	// whole seconds). pstest ignores RetryPolicy and redelivers a nack
	// within 10 ms, which turns every denial (Redis down, say) into a loop
	// of deliveries the real service does not make. A subscription not in
	// the map keeps pstest's behaviour.
	NackDelays map[string]time.Duration
	// Reactors are pstest reactors to install beside the nack delay's (a
	// topic refusing publishes, say).
	Reactors []pstest.ServerReactorOption
	// Provider is the simulator's API: "twilio", "vonage", or anything
	// else for the generic one. Twilio's and Vonage's count segments, as
	// those providers do; the generic one does if Sim.CountSegments.
	Provider string
	// Sim configures the simulator. If Sim.Token is empty, it expects Token.
	Sim providertest.Config
	// Wrap, if not nil, wraps the simulator's handler before it is served
	// (to delay its answers, say).
	Wrap func(http.Handler) http.Handler
	// RedisURL names a real Redis. If empty, the stack embeds miniredis.
	RedisURL string
}

// Stack is a running local stack. Its methods are safe for concurrent use,
// except Close, which ends it.
type Stack struct {
	Pubsub   *pstest.Server
	Sim      *providertest.Simulator
	SimURL   string // the simulator's base URL
	RedisURL string // the real Redis of Options, or the embedded one's

	simSrv *httptest.Server
	mr     *miniredis.Miniredis
	stopMR context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts the stack o describes; Close stops it.
func Start(o Options) (*Stack, error) {
	sim := o.Sim
	sim.Token = cmp.Or(sim.Token, Token)
	var ps *providertest.Simulator
	switch o.Provider {
	case "twilio":
		sim.CountSegments = true
		ps = providertest.NewTwilio(sim, TwilioSID)
	case "vonage":
		sim.CountSegments = true
		ps = providertest.NewVonage(sim, VonageKey)
	default:
		ps = providertest.NewGeneric(sim)
	}
	reactors := append([]pstest.ServerReactorOption{nackDelayReactor(o.Project, o.NackDelays)}, o.Reactors...)
	s := &Stack{Pubsub: pstest.NewServer(reactors...), Sim: ps, RedisURL: o.RedisURL}
	var h http.Handler = ps
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	s.simSrv = httptest.NewServer(h)
	s.SimURL = s.simSrv.URL
	if s.RedisURL == "" {
		mr, err := miniredis.Run()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		s.mr = mr
		s.RedisURL = "redis://" + mr.Addr()
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

// Embedded reports whether the stack's Redis is the embedded miniredis.
func (s *Stack) Embedded() bool { return s.mr != nil }

// Adapt readies rdb, a client of s.RedisURL, for the stack's Redis: on the
// embedded one it adds the hook that hands miniredis scripts without their
// "#!lua" line (miniredisScripts); on a real Redis it does nothing.
func (s *Stack) Adapt(rdb redis.UniversalClient) {
	if s.mr != nil {
		rdb.AddHook(miniredisScripts{})
	}
}

// Close stops the stack: the embedded Redis and its clock, the simulator's
// server and its receipts, and the Pub/Sub server.
func (s *Stack) Close() {
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
	s.Sim.Close() // its receipts still being posted
	s.Pubsub.Close()
}
