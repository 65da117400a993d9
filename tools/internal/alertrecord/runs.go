package alertrecord

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// alertRun is one fault run: a steady load (marketing above its cap, OTP
// at 5/s unless otpRate says) on pods dispatcher processes for length,
// with events.
type alertRun struct {
	name, about string
	length      time.Duration
	pods        int
	sim         providertest.Config
	env         map[string]string // dispatcher settings beside the run's defaults
	accounts    string            // ACCOUNTS_FILE content (%q: the simulator's URL, the token file), if any
	redisFlags  []string          // flags of a redis-server of the run's own; none: the Redis every run shares
	mktRate     float64           // marketing published per second; 0: recordMktRate
	otpRate     float64           // OTP published per second; 0: recordOTPRate
	receipts    *receiptPlan      // delivery receipts counted for the accepted sends; nil: receipts off
	verified    int               // of each 5 OTP, how many have their code verified (VERIFICATIONS_TOPIC), verifyLag after; 0: none
	attackFrom  time.Duration     // OTP at attackRate to numbers all over +81, never verified, from here, if attackRate > 0
	attackRate  float64
	badFrom     time.Duration // malformed messages at badRate from here, if badRate > 0
	badRate     float64
	// optOuts are stretches of STOP replies, each from a number of its
	// own, posted signed by the simulator to the pods' inbound webhook
	// (their receipts listener, on for the run), one pod after the other
	// as a load balancer spreads them; none: the pods serve no receipts.
	optOuts []optOutSpan
	events  []runEvent
}

// optOutSpan is a stretch of a run in which recipients reply STOP at rate
// per second.
type optOutSpan struct {
	from, until time.Duration
	rate        float64
}

// runEvent is a change a run makes at a time from its start.
type runEvent struct {
	at   time.Duration
	what string
	do   func(w *runWorld)
}

// runWorld is what a run's events act on.
type runWorld struct {
	sim       *providertest.Simulator
	delay     atomic.Int64 // provider answer delay, ns
	proxy     *redistest.Proxy
	redis     *redis.Client // the run's Redis, not through the proxy
	dlOutage  atomic.Bool
	tokenFile string
	receipts  *receiptDriver // the run's receipts, if it has them
}

const (
	recordToken    = "rec-token"
	recordOTPRate  = 5.0
	recordMktRate  = 75.0 // above MARKETING_RPS 70: a campaign at its cap
	recordBadFirst = 60 * time.Second
	verifyLag      = 6 * time.Second // a person typing the code
)

func alertRuns() []alertRun {
	return []alertRun{
		{name: "healthy", length: 150 * time.Second,
			about: "nothing wrong: a campaign at the marketing cap (75/s published, 70/s allowed) and OTP at 5/s"},
		{name: "receipts-healthy", length: 150 * time.Second, receipts: &receiptPlan{failEvery: 50},
			about: "nothing wrong, receipts on: the healthy run's traffic, 49 in 50 messages delivered"},
		{name: "receipts-delivered-low", length: 360 * time.Second, otpRate: 0.1, receipts: &receiptPlan{failEvery: 50, failMarketing: true},
			about: "a quiet hour's OTP (one every 10 s) beside the campaign; from 60 s a carrier filters 1 in 3 OTP (undelivered, Twilio's 30007): the OTP delivered ratio falls under 0.9 at once, and the 10-minute window holds 20 final receipts from about 200 s; the campaign's sender is not registered for marketing (Twilio's 30034): every marketing message is undelivered from the start",
			events: []runEvent{{60 * time.Second, "1 in 3 OTP receipts say undelivered (a filtered route)", func(w *runWorld) {
				w.receipts.failOTP.Store(3)
			}}}},
		{name: "receipts-missing", length: 240 * time.Second, receipts: &receiptPlan{failEvery: 50},
			about: "receipts flow until 60 s; then every receipt fails verification (counted forged): the URL the providers sign no longer matches RECEIPTS_PUBLIC_URL, as behind a proxy that rewrites the path; the sends go on",
			events: []runEvent{{60 * time.Second, "every receipt fails verification", func(w *runWorld) {
				w.receipts.forged.Store(true)
			}}}},
		{name: "provider-429", length: 150 * time.Second,
			about: "the provider answers 429 (Retry-After 1 s) to every request for 10 s, as when something else sends on the account",
			events: []runEvent{{60 * time.Second, "the provider answers 429 to everything for 10 s", func(w *runWorld) {
				w.sim.FailFor(http.StatusTooManyRequests, 10*time.Second)
			}}}},
		{name: "account-suspended", length: 210 * time.Second,
			sim:   providertest.Config{SuspendAfter: 5, SuspendFor: 90 * time.Second},
			about: "429s push the account over the provider's suspension threshold (5 answers here, 300 in 10 minutes in production): suspended for 90 s, every answer 429 with the time left as Retry-After",
			events: []runEvent{{60 * time.Second, "the provider answers 429 (Retry-After 1 s) to the next 6 requests: the account is suspended for 90 s at the 6th", func(w *runWorld) {
				w.sim.ThrottleNext(6, time.Second)
			}}}},
		{name: "redis-down", length: 210 * time.Second,
			about: "Redis is unreachable (connections refused) for 90 s: every pod decides alone on its share",
			events: []runEvent{
				{60 * time.Second, "Redis refuses connections", func(w *runWorld) { w.proxy.SetMode(redistest.Refuse) }},
				{150 * time.Second, "Redis is back", func(w *runWorld) { w.proxy.SetMode(redistest.Up) }},
			}},
		{name: "redis-evicting", length: 450 * time.Second,
			redisFlags: []string{"--maxmemory", "1gb", "--maxmemory-policy", "volatile-lru"},
			about:      "Redis runs with maxmemory-policy volatile-lru (Memorystore's default), far from its maxmemory (nothing is evicted yet); the pods read the policy at start and every minute; the operator sets noeviction at 360 s",
			events: []runEvent{{360 * time.Second, "the operator sets maxmemory-policy noeviction (CONFIG SET)", func(w *runWorld) {
				if err := w.redis.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
					panic(err)
				}
			}}}},
		{name: "target-near-contract", length: 150 * time.Second, mktRate: 200,
			env:   map[string]string{"TARGET_RPS": "98", "MARKETING_RPS": "93", "BURST": "1", "PROVIDER_ARRIVAL_JITTER": "0"},
			about: "TARGET_RPS 98 on a contract of 100 (BURST 1, PROVIDER_ARRIVAL_JITTER 0: what the start-up check allows at the edge) and a campaign published at 200/s: the pods send at 98/s"},
		{name: "provider-5xx", length: 240 * time.Second,
			about: "the provider answers 503 to every request from 60 s to the end",
			events: []runEvent{{60 * time.Second, "the provider answers 503 to everything", func(w *runWorld) {
				w.sim.FailFor(http.StatusServiceUnavailable, time.Hour)
			}}}},
		{name: "account-degraded", length: 240 * time.Second,
			about: "the provider answers 503 to every request from 60 s to 180 s: the account is degraded (probes only) until its probes succeed again",
			events: []runEvent{{60 * time.Second, "the provider answers 503 to everything for 120 s", func(w *runWorld) {
				w.sim.FailFor(http.StatusServiceUnavailable, 120*time.Second)
			}}}},
		{name: "provider-slow", length: 240 * time.Second,
			about: "the provider takes 1.5 s to answer each request from 60 s to the end",
			events: []runEvent{{60 * time.Second, "the provider answers after 1.5 s", func(w *runWorld) {
				w.delay.Store(int64(1500 * time.Millisecond))
			}}}},
		{name: "account-failure", length: 210 * time.Second,
			about: "the provider revokes the credential at 60 s (401 to every request); the Secret is updated with the new one at 150 s",
			events: []runEvent{
				{60 * time.Second, "the provider revokes the credential", func(w *runWorld) { w.sim.SetToken("rotated") }},
				{150 * time.Second, "the Secret (the token file) holds the new credential", func(w *runWorld) {
					if err := os.WriteFile(w.tokenFile, []byte("rotated\n"), 0o600); err != nil {
						panic(err)
					}
				}},
			}},
		{name: "dead-letters", length: 210 * time.Second, badFrom: recordBadFirst, badRate: 2,
			about: "a producer publishes malformed messages (2/s) from 60 s to the end: each is dead-lettered"},
		{name: "dead-letter-outage", length: 210 * time.Second, badFrom: 30 * time.Second, badRate: 2,
			about: "malformed messages (2/s) from 30 s; the dead-letter topic refuses publishes from 60 s to 150 s: each is nacked and comes back",
			events: []runEvent{
				{60 * time.Second, "the dead-letter topic refuses publishes", func(w *runWorld) { w.dlOutage.Store(true) }},
				{150 * time.Second, "the dead-letter topic accepts publishes again", func(w *runWorld) { w.dlOutage.Store(false) }},
			}},
		{name: "deferred-stuck", length: 1080 * time.Second,
			redisFlags: []string{"--maxmemory-policy", "noeviction"},
			about:      "marketing capped at 1 message per minute to a number (on_cap: defer) and every message to one number: the first is sent, the next ones deferred until the first's place leaves the minute (due at about 61 s); at 30 s Redis is full (maxmemory set under what it holds, noeviction): it refuses the releasers' claims (OOM), while the reads go on; the deferred messages are overdue (due more than 15 min ago) from about 961 s; at 1020 s the operator gives Redis room again (maxmemory 0): the releasers claim and release them",
			events: []runEvent{{30 * time.Second, "Redis is full: the operator's CONFIG SET maxmemory 1 (noeviction refuses writes that take memory)", func(w *runWorld) {
				if err := w.redis.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
					panic(err)
				}
			}}, {1020 * time.Second, "Redis has room again: the operator's CONFIG SET maxmemory 0", func(w *runWorld) {
				if err := w.redis.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
					panic(err)
				}
			}}},
			accounts: `classes:
  - name: otp
  - name: marketing
    max_per_recipient: {count: 1, per: 1m, on_cap: defer}
accounts:
  - name: deferred-stuck
    provider: generic
    generic: {url: %q, token_file: %q}
    classes: [otp, marketing]
`},
		{name: "learned-rate", length: 240 * time.Second,
			sim:   providertest.Config{Limit: 60},
			about: "the provider allows 60/s where the account's target is 90; the learned limit on (adaptive.enabled), its search step 10 s",
			accounts: `accounts:
  - name: learned-rate
    provider: generic
    generic: {url: %q, token_file: %q}
    classes: [otp, marketing]
    adaptive: {enabled: true, min_rps: 10}
`},
		{name: "pumping", length: 150 * time.Second,
			about: "the OTP at 5/s all go to one range (+819012, a range of 6 digits) under the pumping guard's max_per_prefix of 300 in 10 minutes: the range is blocked at about 60 s, and every OTP after is acked blocked",
			accounts: `classes:
  - name: otp
    max_per_prefix: {digits: 6, count: 300, per: 10m, block_for: 1h}
  - name: marketing
accounts:
  - name: pumping
    provider: generic
    generic: {url: %q, token_file: %q}
    classes: [otp, marketing]
`},
		{name: "opt-outs", length: 300 * time.Second, mktRate: 10, otpRate: 1,
			optOuts: []optOutSpan{{5 * time.Second, 7 * time.Second, 1}, {30 * time.Second, 60 * time.Second, 0.5},
				{150 * time.Second, 210 * time.Second, 0.2}, {210 * time.Second, 300 * time.Second, 1}},
			about: "a campaign at 10/s (under its cap) and OTP at 1/s, 11 sends a second; recipients reply STOP (each a number of its own) through the account's inbound webhook: one through each pod at 5 s, 0.5/s from 30 s to 60 s (a few, over 2% of the sends so far), 0.2/s from 150 s to 210 s (over 20 since the start, under 2% of the sends), 1/s from 210 s to the end (over 2% from about 240 s)"},
		{name: "conversion", length: 150 * time.Second, verified: 4, attackFrom: 90 * time.Second, attackRate: 40,
			about: "the OTP at 5/s go to one range under the pumping guard's min_conversion (ratio 0.2, min_sends 50 in 30 minutes, a range of 7 digits, grace 10s); 4 codes in 5 are verified 6 s after their publish, so the range converts and is never blocked; from 90 s an attack requests 40 OTP/s to random mobile numbers all over +8190 (a thousand ranges of 7 digits, too few sends each for the range rules), none verified",
			accounts: `classes:
  - name: otp
    min_conversion: {ratio: 0.2, min_sends: 50, per: 30m, digits: 7, grace: 10s, block_for: 1h}
  - name: marketing
accounts:
  - name: conversion
    provider: generic
    generic: {url: %q, token_file: %q}
    classes: [otp, marketing]
`},
	}
}

// Names are the names of the runs, in the order Record runs them.
func Names() []string {
	var names []string
	for _, r := range alertRuns() {
		names = append(names, r.name)
	}
	return names
}
