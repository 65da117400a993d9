package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

const project = "test"

// harness is one Pub/Sub (pstest), one Redis account and one provider
// simulator, shared by the dispatcher instances a test starts.
type harness struct {
	t       *testing.T
	ps      *pstest.Server
	admin   *pubsub.Client
	sim     *providertest.Simulator
	simURL  string
	account string
	limits  admission.Config
	pubs    map[admission.Class]*pubsub.Publisher
	// lanes, if set by addClass before start, are the classes each
	// instance serves through Deps.Lanes, in priority order; default
	// Deps.OTP and Deps.Marketing.
	lanes []Lane
	// redisAddr, if set before start, is where instances reach Redis (a
	// redistest.Proxy to make it go down); default the test Redis.
	redisAddr string
	// newSender, if set before start, makes each instance's Sender and the
	// credential it watches; default the generic client without a token.
	newSender func() (Sender, Credentials)
	// accounts, if set before start, makes each instance's accounts on its
	// Redis client instead of the one account of limits and newSender.
	accounts func(rdb redis.Scripter) []Account
	// suppressions, if set before start, makes each instance's
	// suppression list on its Redis client; default none.
	suppressions func(rdb *redis.Client) Suppressions
	// deferral, if set before start, makes each instance's deferral store
	// on its Redis client, and start runs its releaser over the lanes
	// with send windows or a cap; releasers holds them.
	deferral  func(rdb redis.Scripter) *deferral.Store
	releasers []*deferral.Releaser
	// guard, if set before start, makes each instance's Guard on its
	// Redis client.
	guard func(rdb *redis.Client) Guard
	// dispatchers are the instances start ran, and limiters their limiters.
	dispatchers []*Dispatcher
	limiters    []*admission.Limiter

	mu     sync.Mutex
	events []Event          // guarded by mu
	ended  map[string]Event // Pub/Sub message ID -> its acked/dead-lettered event; guarded by mu
	notify chan struct{}
}

// newHarness starts the fakes. wrap, if not nil, wraps the simulator's
// handler; reactors change how pstest answers.
func newHarness(t *testing.T, sim providertest.Config, wrap func(http.Handler) http.Handler, reactors ...pstest.ServerReactorOption) *harness {
	t.Helper()
	h := &harness{
		t: t, ps: pstest.NewServer(reactors...), sim: providertest.NewGeneric(sim),
		account: redistest.UniqueAccount(t),
		ended:   map[string]Event{}, notify: make(chan struct{}, 1),
	}
	h.limits = admission.Config{Account: h.account, TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 23, RedisTimeout: 2 * time.Second}
	t.Cleanup(func() { h.ps.Close() })
	// Through h.sim as it is at each request: a test may replace the
	// simulator (another provider's) before it starts instances.
	var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.sim.ServeHTTP(w, r) })
	if wrap != nil {
		handler = wrap(handler)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	h.simURL = srv.URL
	h.admin = h.client()

	h.pubs = map[admission.Class]*pubsub.Publisher{}
	h.topic("sms-dead-letter", "sms-dead-letter-inspect")
	h.topic("sms-otp", "sms-otp-dispatcher")
	h.topic("sms-marketing", "sms-marketing-dispatcher")
	h.pubs[admission.OTP] = h.publisher("sms-otp")
	h.pubs[admission.Marketing] = h.publisher("sms-marketing")
	return h
}

// topic creates a topic and a subscription to it. No dead-letter policy:
// pstest's forwarding republishes forever; the tests assert on the
// dispatcher's explicit dead-lettering.
func (h *harness) topic(topic, sub string) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.admin.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/test/topics/" + topic}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.admin.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/test/subscriptions/" + sub, Topic: "projects/test/topics/" + topic, AckDeadlineSeconds: 10,
	}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) publisher(topic string) *pubsub.Publisher {
	p := h.admin.Publisher(topic)
	p.PublishSettings.DelayThreshold = time.Millisecond
	h.t.Cleanup(p.Stop)
	return p
}

// addClass makes the instances start runs serve class as their next lane
// in priority order, on topic sms-<class> (created here unless it is one
// newHarness made). The first call replaces the default lanes.
func (h *harness) addClass(class admission.Class, maxWait time.Duration) {
	h.t.Helper()
	topic := "sms-" + string(class)
	if _, ok := h.pubs[class]; !ok {
		h.topic(topic, topic+"-dispatcher")
		h.pubs[class] = h.publisher(topic)
	}
	h.lanes = append(h.lanes, Lane{Class: class, Policy: policy.Of(class.String(), len(h.lanes)), MaxWait: maxWait})
}

func (h *harness) client() *pubsub.Client {
	h.t.Helper()
	c, err := pubsub.NewClient(context.Background(), project, option.WithEndpoint(h.ps.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// Observe records events; it is the Observer of every instance.
func (h *harness) Observe(ev Event) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	if ev.Action != nack.Nack {
		h.ended[ev.MessageID] = ev
	}
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// start runs n dispatcher instances, each with its own Pub/Sub client,
// Redis client and limiter, as n pods would. stop ends them and waits.
func (h *harness) start(n int, cfg Config) (stop func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		addr := h.redisAddr
		if addr == "" {
			addr = redistest.Addr(h.t)
		}
		rdb := redistest.ClientOf(h.t, addr)
		lim, err := admission.New(rdb, h.limits)
		if err != nil {
			h.t.Fatal(err)
		}
		var sender Sender
		var creds Credentials
		if h.newSender != nil {
			sender, creds = h.newSender()
		} else {
			c, err := provider.NewClient(h.simURL, "")
			if err != nil {
				h.t.Fatal(err)
			}
			h.t.Cleanup(c.CloseIdleConnections) // as serve does at exit
			sender = c
		}
		c := h.client()
		dlq := c.Publisher("sms-dead-letter")
		h.t.Cleanup(dlq.Stop)
		deps := Deps{
			OTP: c.Subscriber("sms-otp-dispatcher"), Marketing: c.Subscriber("sms-marketing-dispatcher"),
			Limiter: lim, Claims: lim.Claims(), Sender: sender, Credentials: creds,
			DeadLetter: DeadLetterTopic{Publisher: dlq}, Observer: h,
		}
		for _, l := range h.lanes {
			l.Subscriber = c.Subscriber("sms-" + string(l.Class) + "-dispatcher")
			deps.Lanes = append(deps.Lanes, l)
		}
		if h.accounts != nil {
			deps.Accounts = h.accounts(rdb)
		}
		if h.suppressions != nil {
			deps.Suppressions = h.suppressions(rdb)
		}
		var rel *deferral.Releaser
		if h.deferral != nil {
			deps.Deferral = h.deferral(rdb)
			rel = &deferral.Releaser{Store: deps.Deferral, Token: fmt.Sprintf("p%d", len(h.dispatchers)), Logger: discardLogger(), Every: 100 * time.Millisecond}
			for _, l := range h.lanes {
				if l.Policy.Sending != (policy.Sending{}) {
					p := c.Publisher("sms-" + string(l.Class))
					h.t.Cleanup(p.Stop)
					rel.Lanes = append(rel.Lanes, deferral.Lane{Class: l.Class.String(), Publisher: p})
				}
			}
			h.releasers = append(h.releasers, rel)
		}
		if h.guard != nil {
			deps.Guard = h.guard(rdb)
		}
		d, err := New(cfg, deps)
		if err != nil {
			h.t.Fatal(err)
		}
		if rel != nil {
			wg.Go(func() { rel.Run(ctx) })
		}
		h.dispatchers = append(h.dispatchers, d)
		h.limiters = append(h.limiters, lim)
		wg.Go(func() { d.Run(ctx) })
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	h.t.Cleanup(stop)
	return stop
}

// publish publishes one message of class and returns its Pub/Sub ID.
func (h *harness) publish(class admission.Class, m map[string]string) string {
	h.t.Helper()
	b, _ := json.Marshal(m)
	return h.publishRaw(class, b)
}

func (h *harness) publishRaw(class admission.Class, data []byte) string {
	h.t.Helper()
	id, err := h.pubs[class].Publish(context.Background(), &pubsub.Message{Data: data}).Get(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// flood publishes n marketing messages with ids prefix-0..n-1 and returns
// their Pub/Sub IDs.
func (h *harness) flood(prefix string, n int) []string {
	h.t.Helper()
	return h.floodClass(admission.Marketing, prefix, n)
}

// floodClass publishes n messages of class with ids prefix-0..n-1 and
// returns their Pub/Sub IDs.
func (h *harness) floodClass(class admission.Class, prefix string, n int) []string {
	h.t.Helper()
	rs := make([]*pubsub.PublishResult, n)
	for i := range n {
		b, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("%s-%d", prefix, i), "to": "+819012345678", "body": "sale"})
		rs[i] = h.pubs[class].Publish(context.Background(), &pubsub.Message{Data: b})
	}
	ids := make([]string, n)
	for i, r := range rs {
		id, err := r.Get(context.Background())
		if err != nil {
			h.t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// waitEnded waits until every Pub/Sub ID reached an end (acked or
// dead-lettered) and returns those events. It fails the test after
// timeout: a bound on a hang, not a speed claim.
func (h *harness) waitEnded(ids []string, timeout time.Duration) map[string]Event {
	h.t.Helper()
	return h.waitEndedUnless(ids, timeout, nil)
}

// waitEndedUnless is waitEnded that fails as soon as broken, asked after
// every event, names a promise broken on the way: a test that a mutant
// breaks then ends at the first sign, not at its timeout.
func (h *harness) waitEndedUnless(ids []string, timeout time.Duration, broken func() string) map[string]Event {
	h.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if broken != nil {
			if why := broken(); why != "" {
				h.t.Fatalf("before every message reached an end: %s", why)
			}
		}
		h.mu.Lock()
		missing := 0
		for _, id := range ids {
			if _, ok := h.ended[id]; !ok {
				missing++
			}
		}
		h.mu.Unlock()
		if missing == 0 {
			break
		}
		select {
		case <-h.notify:
		case <-deadline.C:
			h.mu.Lock()
			var lost []string
			for _, id := range ids {
				if _, ok := h.ended[id]; !ok && len(lost) < 5 {
					var evs []string
					for _, ev := range h.events {
						if ev.MessageID == id {
							evs = append(evs, fmt.Sprintf("%v/%v(%v)", ev.Outcome, ev.Action, ev.Err))
						}
					}
					lost = append(lost, fmt.Sprintf("%s: %v", id, evs))
				}
			}
			h.mu.Unlock()
			h.t.Fatalf("%d of %d messages did not reach an end within %v; first: %v", missing, len(ids), timeout, lost)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Event{}
	for _, id := range ids {
		out[id] = h.ended[id]
	}
	return out
}

// waitUntil waits until cond holds, checking it after each event and
// every 10 ms (cond may turn on what no event announces: a provider's
// handler ending, an account's health), and fails the test after
// timeout: a bound on a hang, not a speed claim.
func (h *harness) waitUntil(what string, timeout time.Duration, cond func() bool) {
	h.t.Helper()
	hang := time.NewTimer(timeout)
	defer hang.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-h.notify:
		case <-poll.C:
		case <-hang.C:
			h.t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}

// endedCount returns how many messages reached an end.
func (h *harness) endedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ended)
}

// eventsOf returns every event of the Pub/Sub ID, oldest first.
func (h *harness) eventsOf(id string) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var evs []Event
	for _, ev := range h.events {
		if ev.MessageID == id {
			evs = append(evs, ev)
		}
	}
	return evs
}

// deadLetters pulls n messages from the dead-letter inspect subscription.
func (h *harness) deadLetters(n int) []*pubsub.Message {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []*pubsub.Message
	err := h.admin.Subscriber("sms-dead-letter-inspect").Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		mu.Lock()
		got = append(got, m)
		if len(got) == n {
			cancel()
		}
		mu.Unlock()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		h.t.Fatalf("dead-letter topic has %d messages, want %d", len(got), n)
	}
	return got
}
