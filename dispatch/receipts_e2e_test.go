package dispatch_test

// Delivery receipts end to end: dispatchers with Config.Receipts send
// through each provider's simulator, which posts its receipts, in its own
// shape and signature, to a real receipts.Server on the accounts' own
// limiters; status events and resends go through pstest topics. The file
// is an external test package: receipts imports dispatch.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/receipts"
)

// The credentials the simulators and the adapters share.
const (
	e2eToken         = "tok-E2E-0123456789"
	e2eReceiptSecret = "receipt-E2E-secret=&x"
	e2eTwilioSID     = "AC00112233445566778899aabbccddeeff"
	e2eVonageKey     = "k3ye2e00"
)

// e2eAdapter is an adapter that sends and reads its receipts.
type e2eAdapter interface {
	provider.Sender
	provider.ReceiptReader
}

// e2eAccount is one provider account of a rig.
type e2eAccount struct {
	name         string
	classes      []admission.Class
	destinations []string
	sim          *providertest.Simulator
	// adapter returns the account's adapter for its simulator at base,
	// asking for receipts at callback.
	adapter func(t *testing.T, base, callback string) e2eAdapter
}

// genericAccount is an account on the generic API, its receipts signed
// with the receipt secret.
func genericAccount(name string, classes ...admission.Class) e2eAccount {
	return e2eAccount{
		name: name, classes: classes,
		sim: providertest.NewGeneric(providertest.Config{Token: e2eToken, Receipts: providertest.ReceiptConfig{Secret: e2eReceiptSecret}}),
		adapter: func(t *testing.T, base, callback string) e2eAdapter {
			t.Helper()
			c, err := provider.NewClient(base, e2eToken, provider.WithStatusCallback(callback),
				provider.WithReceiptSecret(provider.StaticSecret(e2eReceiptSecret)))
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
}

// statusMsg is one message of the status topic and when the test got it.
type statusMsg struct {
	ev    receipts.StatusEvent
	attrs map[string]string
	at    time.Time
}

// rig is one dispatcher sending on accounts, each with its simulator
// posting receipts to a receipts.Server that publishes to pstest's status
// topic (through a Publisher that fails while statusDown is set) and its
// resends to the OTP topic.
type rig struct {
	t        *testing.T
	pubs     map[admission.Class]*pubsub.Publisher
	limiters map[string]*admission.Limiter // by account name
	sims     map[string]*providertest.Simulator
	// statusDown makes the status Publisher fail, as a topic that is gone.
	statusDown atomic.Bool
	statusTry  atomic.Int64 // the status publishes tried
	metrics    *resendCount

	mu       sync.Mutex
	events   []dispatch.Event // guarded by mu
	statuses []statusMsg      // guarded by mu
	notify   chan struct{}
}

// rigOptions shape a rig: the dispatcher's Config (Receipts is set) and
// the receipts server's sweep.
type rigOptions struct {
	dispatch   dispatch.Config
	sweepEvery time.Duration
	owedAge    time.Duration
	// route is the accounts' route skip (admission.RouteRule); zero: its
	// defaults.
	route admission.RouteRule
}

// newRig starts a rig on accts. Everything stops at the test's end, the
// simulators' posting first.
func newRig(t *testing.T, accts []e2eAccount, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, limiters: map[string]*admission.Limiter{}, sims: map[string]*providertest.Simulator{}, notify: make(chan struct{}, 1),
		metrics: &resendCount{by: map[string]int{}}}
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	admin := r.client(ps)
	ctx := context.Background()
	for _, name := range []string{"sms-otp", "sms-marketing", "sms-dead-letter", "sms-status"} {
		if _, err := admin.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/test/topics/" + name}); err != nil {
			t.Fatal(err)
		}
	}
	for sub, topic := range map[string]string{"sms-otp-dispatcher": "sms-otp", "sms-marketing-dispatcher": "sms-marketing", "sms-status-inspect": "sms-status"} {
		if _, err := admin.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: "projects/test/subscriptions/" + sub, Topic: "projects/test/topics/" + topic, AckDeadlineSeconds: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	publisher := func(topic string) *pubsub.Publisher {
		p := admin.Publisher(topic)
		p.PublishSettings.DelayThreshold = time.Millisecond
		t.Cleanup(p.Stop)
		return p
	}
	r.pubs = map[admission.Class]*pubsub.Publisher{admission.OTP: publisher("sms-otp"), admission.Marketing: publisher("sms-marketing")}
	status := receipts.TopicPublisher{Publisher: publisher("sms-status")}

	// The receipts' listener comes first: its URL is what the adapters
	// ask for receipts at.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	publicURL := "http://" + ln.Addr().String()

	rdb := redistest.Client(t)
	prefix := redistest.UniqueAccount(t)
	var daccts []dispatch.Account
	var raccts []receipts.Account
	for _, a := range accts {
		srv := httptest.NewServer(a.sim)
		t.Cleanup(srv.Close)
		adapter := a.adapter(t, srv.URL, receipts.CallbackURL(publicURL, a.name))
		t.Cleanup(adapter.CloseIdleConnections)
		cfg := admission.Config{Account: prefix + "-" + a.name, TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 23, RedisTimeout: 2 * time.Second, Route: o.route}
		lim, err := admission.New(rdb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.limiters[a.name], r.sims[a.name] = lim, a.sim
		daccts = append(daccts, dispatch.Account{Name: a.name, Classes: a.classes, Destinations: a.destinations, Limiter: lim, Claims: lim.Claims(), Sender: adapter})
		raccts = append(raccts, receipts.Account{Name: a.name, Reader: adapter, Ledger: lim.Ledger()})
	}
	rs, err := receipts.New(receipts.Config{
		Addr: "127.0.0.1:0", PublicURL: publicURL, Accounts: raccts, Deadline: dispatch.PayloadDeadline,
		Status: publishFunc(func(ctx context.Context, data []byte, attrs map[string]string) error {
			r.statusTry.Add(1)
			r.wake()
			if r.statusDown.Load() {
				return errors.New("status topic down")
			}
			return status.Publish(ctx, data, attrs)
		}),
		Resend:     receipts.TopicPublisher{Publisher: r.pubs[admission.OTP]},
		Metrics:    r.metrics,
		SweepEvery: o.sweepEvery, OwedAge: o.owedAge,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: rs.Handler()}}
	hs.Start()
	t.Cleanup(hs.Close)

	c := r.client(ps)
	dlq := c.Publisher("sms-dead-letter")
	t.Cleanup(dlq.Stop)
	o.dispatch.Receipts = true
	d, err := dispatch.New(o.dispatch, dispatch.Deps{
		OTP: c.Subscriber("sms-otp-dispatcher"), Marketing: c.Subscriber("sms-marketing-dispatcher"),
		Accounts: daccts, DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: r,
	})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.Run(runCtx) })
	wg.Go(func() {
		if err := rs.Run(runCtx); err != nil { // its own listener: only its sweep and flush are used
			t.Errorf("receipts Run: %v", err)
		}
	})
	wg.Go(func() {
		err := admin.Subscriber("sms-status-inspect").Receive(runCtx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			var ev receipts.StatusEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Errorf("a status event that is not JSON: %q", m.Data)
			}
			r.mu.Lock()
			r.statuses = append(r.statuses, statusMsg{ev: ev, attrs: m.Attributes, at: time.Now()})
			r.mu.Unlock()
			r.wake()
		})
		if err != nil {
			t.Errorf("status Receive: %v", err)
		}
	})
	t.Cleanup(func() {
		for _, s := range r.sims {
			s.Close() // no receipt posted to a server that is going
		}
		cancel()
		wg.Wait()
	})
	return r
}

func (r *rig) client(ps *pstest.Server) *pubsub.Client {
	r.t.Helper()
	c, err := pubsub.NewClient(context.Background(), "test", option.WithEndpoint(ps.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// publishFunc is a receipts.Publisher of a function.
type publishFunc func(ctx context.Context, data []byte, attrs map[string]string) error

func (f publishFunc) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	return f(ctx, data, attrs)
}

// resendCount is the receipts' Metrics, counting resends by account and
// reason.
type resendCount struct {
	mu sync.Mutex
	by map[string]int // "<account> <reason>" -> resends; guarded by mu
}

var _ receipts.Metrics = (*resendCount)(nil)

func (m *resendCount) Receipt(account, class, status, outcome string)  {}
func (m *resendCount) Delivery(account, class string, d time.Duration) {}
func (m *resendCount) ResendLate(account string) {
	m.mu.Lock()
	m.by[account+" late"]++
	m.mu.Unlock()
}

func (m *resendCount) Resend(account, reason string) {
	m.mu.Lock()
	m.by[account+" "+reason]++
	m.mu.Unlock()
}

func (m *resendCount) of(account, reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.by[account+" "+reason]
}

// Observe records the dispatcher's events.
func (r *rig) Observe(ev dispatch.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	r.wake()
}

func (r *rig) wake() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// publish publishes one message of class and returns when it did.
func (r *rig) publish(class admission.Class, m map[string]any) time.Time {
	r.t.Helper()
	b, _ := json.Marshal(m)
	at := time.Now()
	if _, err := r.pubs[class].Publish(context.Background(), &pubsub.Message{Data: b}).Get(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return at
}

// waitFor waits until cond holds, asked after every event and status
// message, and fails the test after timeout: a bound on a hang.
func (r *rig) waitFor(what string, timeout time.Duration, cond func() bool) {
	r.t.Helper()
	hang := time.NewTimer(timeout)
	defer hang.Stop()
	for !cond() {
		select {
		case <-r.notify:
		case <-hang.C:
			r.mu.Lock()
			var got []string
			for _, s := range r.statuses {
				got = append(got, fmt.Sprintf("%s:%s@%s", s.ev.ID, s.ev.Status, s.ev.Account))
			}
			r.mu.Unlock()
			r.t.Fatalf("%s: not within %v; status events %v", what, timeout, got)
		}
	}
}

// statusOf returns the status events of the message id, in arrival order.
func (r *rig) statusOf(id string) []statusMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []statusMsg
	for _, s := range r.statuses {
		if s.ev.ID == id {
			out = append(out, s)
		}
	}
	return out
}

// sends returns the dispatcher's events of the message id that sent it.
func (r *rig) sends(id string) []dispatch.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []dispatch.Event
	for _, ev := range r.events {
		if ev.ID == id && ev.Outcome == nack.Sent {
			out = append(out, ev)
		}
	}
	return out
}

// settle waits for every receipt the simulators planned, then a moment
// more for the events they caused to arrive: what comes after it would
// be an extra one.
func (r *rig) settle() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for name, s := range r.sims {
		if err := s.WaitReceipts(ctx); err != nil {
			r.t.Fatalf("%s's receipts: %v (%+v)", name, err, s.ReceiptStats())
		}
	}
	time.Sleep(100 * time.Millisecond)
}

// checkEvent checks a status event's data and attributes, field by
// field: a final state of the message id, sent on account.
func checkEvent(t *testing.T, s statusMsg, id, status, code, pid, account, class string) {
	t.Helper()
	ev := s.ev
	if ev.ID != id || ev.Status != status || ev.ErrorCode != code || ev.ProviderID != pid || ev.Account != account || ev.Class != class {
		t.Errorf("status event %+v, want id %s status %s error_code %q provider_id %s account %s class %s", ev, id, status, code, pid, account, class)
	}
	sent, err1 := time.Parse(receipts.TimeLayout, ev.SentAt)
	at, err2 := time.Parse(receipts.TimeLayout, ev.StatusAt)
	if err1 != nil || err2 != nil || !strings.HasSuffix(ev.SentAt, "Z") || time.Since(sent).Abs() > time.Minute || time.Since(at).Abs() > time.Minute {
		t.Errorf("status event times sent_at %q status_at %q: want both RFC 3339 with ms, UTC, now", ev.SentAt, ev.StatusAt)
	}
	want := map[string]string{receipts.AttrID: id, receipts.AttrClass: class, receipts.AttrStatus: status}
	if len(s.attrs) != len(want) {
		t.Errorf("status event attributes %v, want %v", s.attrs, want)
	}
	for k, v := range want {
		if s.attrs[k] != v {
			t.Errorf("status event attributes %v, want %v", s.attrs, want)
		}
	}
}

// e2eProvider is one provider's account for TestReceiptsEndToEnd.
type e2eProvider struct {
	name  string
	sim   func(providertest.Config) *providertest.Simulator
	rc    providertest.ReceiptConfig
	new   func(t *testing.T, base, callback string) e2eAdapter
	parts int // the parts of the long message
}

func e2eProviders() []e2eProvider {
	return []e2eProvider{
		{name: "generic", parts: 1,
			sim: func(c providertest.Config) *providertest.Simulator { return providertest.NewGeneric(c) },
			rc:  providertest.ReceiptConfig{Secret: e2eReceiptSecret, Intermediate: []string{"sent"}},
			new: genericAccount("").adapter},
		{name: "twilio", parts: 1,
			sim: func(c providertest.Config) *providertest.Simulator { return providertest.NewTwilio(c, e2eTwilioSID) },
			rc:  providertest.ReceiptConfig{Intermediate: []string{"sent"}},
			new: func(t *testing.T, base, callback string) e2eAdapter {
				t.Helper()
				tw, err := provider.NewTwilio(provider.TwilioConfig{AccountSID: e2eTwilioSID, AuthToken: provider.StaticSecret(e2eToken),
					From: "+15005550006", BaseURL: base}, provider.WithStatusCallback(callback))
				if err != nil {
					t.Fatal(err)
				}
				return tw
			}},
		{name: "vonage", parts: 2,
			sim: func(c providertest.Config) *providertest.Simulator { return providertest.NewVonage(c, e2eVonageKey) },
			rc:  providertest.ReceiptConfig{Secret: e2eReceiptSecret, SignatureMethod: "sha256", Intermediate: []string{"accepted"}},
			new: func(t *testing.T, base, callback string) e2eAdapter {
				t.Helper()
				v, err := provider.NewVonage(provider.VonageConfig{APIKey: e2eVonageKey, APISecret: provider.StaticSecret(e2eToken),
					From: "AcmeInc", BaseURL: base, SignatureSecret: provider.StaticSecret(e2eReceiptSecret), SignatureMethod: "sha256"},
					provider.WithStatusCallback(callback))
				if err != nil {
					t.Fatal(err)
				}
				return v
			}},
	}
}

// Receipts end to end with each provider's simulator, its request shape
// and its signature: every message sent (a Vonage one of 2 parts) has
// exactly one status event, delivered, however many duplicated,
// reordered and replayed receipts the simulator posts, and its story in
// Redis says so; forged receipts are answered 403 and change nothing.
func TestReceiptsEndToEnd(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Your code is 482913. ", 10) // 210 GSM-7 characters
	for _, p := range e2eProviders() {
		t.Run(p.name, func(t *testing.T) {
			rc := p.rc
			rc.Duplicates, rc.OutOfOrder, rc.Replayed = 0.5, 0.5, 0.5
			rc.MinLatency, rc.MaxLatency, rc.Retries = 100*time.Millisecond, 200*time.Millisecond, -1
			sim := p.sim(providertest.Config{Token: e2eToken, Receipts: rc})
			r := newRig(t, []e2eAccount{{name: "acct", classes: []admission.Class{admission.OTP, admission.Marketing}, sim: sim, adapter: p.new}},
				rigOptions{dispatch: dispatch.Config{OTPMaxWait: 500 * time.Millisecond}})
			lim := r.limiters["acct"]

			type msg struct {
				id    string
				class admission.Class
				parts int
			}
			msgs := []msg{{"login-0", admission.OTP, 1}, {"login-1", admission.OTP, 1}, {"login-long", admission.OTP, p.parts},
				{"login-3", admission.OTP, 1}, {"sale-0", admission.Marketing, 1}}
			for _, m := range msgs {
				body := "Your code is 482913"
				if m.parts > 1 || m.id == "login-long" {
					body = long
				}
				r.publish(m.class, map[string]any{"id": m.id, "to": "+819012345678", "body": body})
			}
			r.waitFor("a status event per message", 10*time.Second, func() bool {
				for _, m := range msgs {
					if len(r.statusOf(m.id)) == 0 {
						return false
					}
				}
				return true
			})
			r.settle()
			if st := sim.ReceiptStats(); st.Duplicated == 0 || st.Reordered == 0 || st.Replayed == 0 || st.Forged != 0 || st.Failed != 0 {
				t.Fatalf("receipt stats %+v: want duplicated, reordered and replayed receipts, all taken", st)
			}
			if err := lim.Ledger().FlushPublished(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				sent := r.sends(m.id)
				if len(sent) != 1 {
					t.Fatalf("%s sent %d times, want once", m.id, len(sent))
				}
				evs := r.statusOf(m.id)
				if len(evs) != 1 {
					t.Fatalf("%s: %d status events, want exactly 1 whatever the duplicates and replays", m.id, len(evs))
				}
				checkEvent(t, evs[0], m.id, "delivered", "", sent[0].ProviderID, "acct", m.class.String())
				s, ok, err := lim.Ledger().Story(context.Background(), m.id)
				if err != nil || !ok {
					t.Fatalf("Story(%s): %v, %v", m.id, ok, err)
				}
				if s.Record != "sent" || s.Status != "delivered" || s.ErrorCode != "" || s.Owed || s.Resent ||
					len(s.ProviderIDs) != m.parts || s.ProviderIDs[0] != sent[0].ProviderID || s.StatusAt.IsZero() || s.Class != m.class.String() {
					t.Fatalf("Story(%s) = %+v, want sent, delivered in %d parts, its event published", m.id, s, m.parts)
				}
				for pid, st := range s.Parts {
					if st != "delivered" {
						t.Fatalf("Story(%s): part %s %q, want delivered", m.id, pid, st)
					}
				}
			}

			// Forged receipts: refused, nothing folded, no event.
			sim.UpdateReceipts(func(c *providertest.ReceiptConfig) { c.Duplicates, c.OutOfOrder, c.Replayed, c.Forged = 0, 0, 0, 1 })
			forgedIDs := []string{"forged-0", "forged-1"}
			for _, id := range forgedIDs {
				r.publish(admission.OTP, map[string]any{"id": id, "to": "+819012345678", "body": "Your code is 482913"})
			}
			r.waitFor("the forged messages sent", 10*time.Second, func() bool {
				return len(r.sends(forgedIDs[0])) == 1 && len(r.sends(forgedIDs[1])) == 1
			})
			r.settle()
			forged := 0
			for _, pr := range sim.PostedReceipts() {
				if pr.Forged {
					forged++
					if pr.Answer != http.StatusForbidden {
						t.Fatalf("a forged receipt answered %d, want 403", pr.Answer)
					}
				}
			}
			if forged == 0 {
				t.Fatal("the simulator posted no forged receipt")
			}
			for _, id := range forgedIDs {
				if evs := r.statusOf(id); len(evs) != 0 {
					t.Fatalf("%s: status events %+v from forged receipts", id, evs)
				}
				s, ok, err := lim.Ledger().Story(context.Background(), id)
				if err != nil || !ok || s.Record != "sent" || s.Status != "" || s.Owed {
					t.Fatalf("Story(%s) = %+v, %v, %v: want sent, no receipt state", id, s, ok, err)
				}
				for pid, st := range s.Parts {
					if st != "" {
						t.Fatalf("Story(%s): part %s %q after forged receipts, want none", id, pid, st)
					}
				}
			}
		})
	}
}

// primaryAndBackup are two generic accounts serving both classes to +62
// and +81, primary first.
func primaryAndBackup() []e2eAccount {
	both := []admission.Class{admission.OTP, admission.Marketing}
	primary, backup := genericAccount("primary", both...), genericAccount("backup", both...)
	primary.destinations, backup.destinations = []string{"+62", "+81"}, []string{"+62", "+81"}
	return []e2eAccount{primary, backup}
}

// checkSends checks that id was sent on the accounts of want, in order,
// the first not a resend and the others resent for reason.
func checkSends(t *testing.T, r *rig, id, reason string, want ...string) []dispatch.Event {
	t.Helper()
	sent := r.sends(id)
	var got []string
	for _, ev := range sent {
		got = append(got, ev.Account)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s sent on %v, want %v", id, got, want)
	}
	for i, ev := range sent {
		if w := map[bool]string{true: "", false: reason}[i == 0]; ev.ResendReason != w {
			t.Fatalf("%s's send %d on %s: resend reason %q, want %q", id, i, ev.Account, ev.ResendReason, w)
		}
	}
	return sent
}

// checkStatuses checks id's status events, one per send of sent, in any
// order: each from its send's account with its provider id, status and
// code from want ("status code" per send, "status" without a code).
func checkStatuses(t *testing.T, r *rig, id, class string, sent []dispatch.Event, want ...string) {
	t.Helper()
	evs := r.statusOf(id)
	if len(evs) != len(want) {
		t.Fatalf("%s: %d status events, want %d", id, len(evs), len(want))
	}
	for i, w := range want {
		status, code, _ := strings.Cut(w, " ")
		var match *statusMsg
		for j := range evs {
			if evs[j].ev.Account == sent[i].Account {
				match = &evs[j]
			}
		}
		if match == nil {
			t.Fatalf("%s: no status event from %s", id, sent[i].Account)
		}
		checkEvent(t, *match, id, status, code, sent[i].ProviderID, sent[i].Account, class)
	}
}

// The primary's carrier starts filtering OTP to +62 (undelivered 30007):
// from then on every such OTP, with time left, is delivered through the
// backup, once, its resend's reason on its trace, within 10 s of its
// publication at p99; OTP to +81 stays on the primary; marketing and an
// OTP with resend_on_failure false are not resent; and a resend that the
// backup fails too is never resent again.
func TestAFailedOTPIsDeliveredThroughTheBackup(t *testing.T) {
	t.Parallel()
	// The route skip off: every OTP to +62 fails on the primary, as the
	// first ones do before the primary's route to +62 is skipped
	// (TestAnOTPToASkippedRouteFailsOverAndOthersStayHome).
	r := newRig(t, primaryAndBackup(), rigOptions{dispatch: dispatch.Config{OTPMaxWait: 500 * time.Millisecond},
		route: admission.RouteRule{MinDeliveredRatio: -1}})
	primary, backup := r.sims["primary"], r.sims["backup"]
	const to62, to81, to6299 = "+6281234567890", "+819012345678", "+6299123456789"
	otp := func(id, to string, more map[string]any) time.Time {
		m := map[string]any{"id": id, "to": to, "body": "Your code is 482913", "deadline": time.Now().Add(30 * time.Second).Format(time.RFC3339Nano)}
		for k, v := range more {
			m[k] = v
		}
		return r.publish(admission.OTP, m)
	}

	// Before: OTP to +62 is delivered on the primary.
	otp("before", to62, nil)
	r.waitFor("the first OTP's status event", 10*time.Second, func() bool { return len(r.statusOf("before")) == 1 })
	checkStatuses(t, r, "before", "otp", checkSends(t, r, "before", "", "primary"), "delivered")

	primary.SetDelivered("+62", 0, "30007")
	backup.SetDelivered("+6299", 0, "30008")
	published := map[string]time.Time{}
	var ids62 []string
	for i := range 20 {
		id := fmt.Sprintf("otp62-%d", i)
		ids62 = append(ids62, id)
		published[id] = otp(id, to62, nil)
	}
	var ids81 []string
	for i := range 5 {
		id := fmt.Sprintf("otp81-%d", i)
		ids81 = append(ids81, id)
		otp(id, to81, nil)
	}
	var sales []string
	for i := range 3 {
		id := fmt.Sprintf("sale62-%d", i)
		sales = append(sales, id)
		r.publish(admission.Marketing, map[string]any{"id": id, "to": to62, "body": "sale"})
	}
	otp("opt-out", to62, map[string]any{"resend_on_failure": false})
	otp("twice", to6299, nil)

	delivered := func(id string) (time.Time, bool) {
		for _, s := range r.statusOf(id) {
			if s.ev.Status == "delivered" {
				return s.at, true
			}
		}
		return time.Time{}, false
	}
	r.waitFor("every status event", 15*time.Second, func() bool {
		for _, id := range append(slices.Clone(ids62), ids81...) {
			if _, ok := delivered(id); !ok {
				return false
			}
		}
		for _, id := range append(slices.Clone(sales), "opt-out") {
			if len(r.statusOf(id)) == 0 {
				return false
			}
		}
		return len(r.statusOf("twice")) == 2
	})
	r.settle()

	var took []time.Duration
	for _, id := range ids62 {
		sent := checkSends(t, r, id, "undelivered 30007", "primary", "backup")
		checkStatuses(t, r, id, "otp", sent, "undelivered 30007", "delivered")
		at, _ := delivered(id)
		took = append(took, at.Sub(published[id]))
	}
	slices.Sort(took)
	p99 := took[(len(took)*99+99)/100-1]
	t.Logf("publish to delivered event through the backup: p50 %v, p99 %v (%d OTPs)", took[len(took)/2], p99, len(took))
	if p99 > 10*time.Second {
		t.Fatalf("p99 publish to delivered event %v, want at most 10s", p99)
	}
	for _, id := range ids81 {
		checkStatuses(t, r, id, "otp", checkSends(t, r, id, "", "primary"), "delivered")
	}
	for _, id := range sales {
		checkStatuses(t, r, id, "marketing", checkSends(t, r, id, "", "primary"), "undelivered 30007")
	}
	checkStatuses(t, r, "opt-out", "otp", checkSends(t, r, "opt-out", "", "primary"), "undelivered 30007")
	checkStatuses(t, r, "twice", "otp", checkSends(t, r, "twice", "undelivered 30007", "primary", "backup"),
		"undelivered 30007", "undelivered 30008")
	if n, want := backup.Stats().Accepted, len(ids62)+1; n != want {
		t.Fatalf("the backup accepted %d messages, want %d: the +62 OTPs and one resend that failed", n, want)
	}
	if n, want := r.metrics.of("primary", "undelivered"), len(ids62)+1; n != want || r.metrics.of("backup", "undelivered") != 0 {
		t.Fatalf("resends counted: primary %d, backup %d; want %d, 0", n, r.metrics.of("backup", "undelivered"), want)
	}

	// The story on each account: the original's on the primary, resent;
	// the resend's on the backup, its record its own.
	ctx := context.Background()
	if s, ok, err := r.limiters["primary"].Ledger().Story(ctx, "otp62-0"); err != nil || !ok || s.Record != "sent" || s.Status != "undelivered" || s.ErrorCode != "30007" || !s.Resent {
		t.Fatalf("otp62-0's story on the primary: %+v, %v, %v; want sent, undelivered 30007, resent", s, ok, err)
	}
	if s, ok, err := r.limiters["backup"].Ledger().Story(ctx, "otp62-0"); err != nil || !ok || s.Status != "delivered" || s.Resent {
		t.Fatalf("otp62-0's story on the backup: %+v, %v, %v; want delivered", s, ok, err)
	}
	if s, ok, err := r.limiters["backup"].Ledger().Story(ctx, "otp62-0/resend"); err != nil || !ok || s.Record != "sent" {
		t.Fatalf("the resend's record on the backup: %+v, %v, %v; want sent", s, ok, err)
	}
}

// An OTP that overflowed to the backup (its home, the primary, under a
// penalty) and whose receipt says the backup failed to deliver it is
// resent through the primary, where its record says sent: the resend
// claims a record of its own and goes out.
func TestAnOverflowedOTPThatFailsIsResentThroughItsHome(t *testing.T) {
	t.Parallel()
	r := newRig(t, primaryAndBackup(), rigOptions{dispatch: dispatch.Config{OTPMaxWait: 500 * time.Millisecond}})
	ctx := context.Background()
	r.sims["backup"].SetDelivered("+62", 0, "30007")
	// Time to lift the penalty between the overflow's send and its receipt.
	r.sims["backup"].UpdateReceipts(func(c *providertest.ReceiptConfig) {
		c.MinLatency, c.MaxLatency = 300*time.Millisecond, 400*time.Millisecond
	})
	if err := r.limiters["primary"].ReportThrottled(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.publish(admission.OTP, map[string]any{"id": "over", "to": "+6281234567890", "body": "Your code is 482913",
		"deadline": time.Now().Add(30 * time.Second).Format(time.RFC3339Nano)})
	r.waitFor("the overflow's send", 10*time.Second, func() bool { return len(r.sends("over")) == 1 })
	if _, err := r.limiters["primary"].ClearPenalty(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the resend's delivered event", 10*time.Second, func() bool { return len(r.statusOf("over")) == 2 })
	r.settle()

	sent := checkSends(t, r, "over", "undelivered 30007", "backup", "primary")
	checkStatuses(t, r, "over", "otp", sent, "undelivered 30007", "delivered")
	if s, ok, err := r.limiters["primary"].Ledger().Story(ctx, "over"); err != nil || !ok || s.Record != "sent" || s.Status != "delivered" {
		t.Fatalf("the primary's story of the overflowed OTP: %+v, %v, %v; want its record sent (the overflow's), delivered", s, ok, err)
	}
	if s, ok, err := r.limiters["primary"].Ledger().Story(ctx, "over/resend"); err != nil || !ok || s.Record != "sent" {
		t.Fatalf("the resend's record on the primary: %+v, %v, %v; want sent", s, ok, err)
	}
	if s, ok, err := r.limiters["backup"].Ledger().Story(ctx, "over"); err != nil || !ok || s.Status != "undelivered" || !s.Resent {
		t.Fatalf("the backup's story of the overflowed OTP: %+v, %v, %v; want undelivered, resent", s, ok, err)
	}
	if n := r.sims["primary"].Stats().Accepted; n != 1 {
		t.Fatalf("the primary accepted %d messages, want the resend", n)
	}
}

// A delivered receipt whose status event cannot be published (the status
// topic is down for longer than the receipt's own retries) keeps its
// state in Redis and its event owed; once the topic is back, the sweep
// publishes the event, once.
func TestAnOwedStatusEventOutlivesTheTopicsOutage(t *testing.T) {
	t.Parallel()
	acct := genericAccount("acct", admission.OTP, admission.Marketing)
	r := newRig(t, []e2eAccount{acct}, rigOptions{
		dispatch:   dispatch.Config{OTPMaxWait: 500 * time.Millisecond},
		sweepEvery: 100 * time.Millisecond, owedAge: time.Millisecond,
	})
	ctx := context.Background()
	lim := r.limiters["acct"]
	r.statusDown.Store(true)
	r.publish(admission.OTP, map[string]any{"id": "login-1", "to": "+819012345678", "body": "Your code is 482913"})
	r.waitFor("the send", 10*time.Second, func() bool { return len(r.sends("login-1")) == 1 })
	r.waitFor("a status publish tried", 10*time.Second, func() bool { return r.statusTry.Load() > 0 })
	// The receipt is answered once its publish has given up.
	r.settle()
	if s, ok, err := lim.Ledger().Story(ctx, "login-1"); err != nil || !ok || s.Status != "delivered" || !s.Owed {
		t.Fatalf("the story while the topic is down: %+v, %v, %v; want delivered, its event owed", s, ok, err)
	}
	if evs := r.statusOf("login-1"); len(evs) != 0 {
		t.Fatalf("status events %+v while the topic is down", evs)
	}

	tried := r.statusTry.Load()
	r.statusDown.Store(false)
	r.waitFor("the owed event published", 10*time.Second, func() bool { return len(r.statusOf("login-1")) == 1 })
	time.Sleep(300 * time.Millisecond) // three sweeps more, which must not publish it again
	evs := r.statusOf("login-1")
	if len(evs) != 1 {
		t.Fatalf("%d status events once the topic is back, want 1", len(evs))
	}
	checkEvent(t, evs[0], "login-1", "delivered", "", r.sends("login-1")[0].ProviderID, "acct", "otp")
	if s, _, err := lim.Ledger().Story(ctx, "login-1"); err != nil || s.Owed || s.Status != "delivered" {
		t.Fatalf("the story after the sweep: %+v, %v; want delivered, nothing owed", s, err)
	}
	t.Logf("status publishes tried during the outage: %d", tried)
}

// An OTP without an id fails on the primary while the status topic is
// down, so its event stays owed through the sweeps that follow: its
// resend goes out once, under the original's id (the Pub/Sub message ID
// that stood in for it, written into the resend's data), and the backup
// sends it once. Every sweep used to publish another copy, each its own
// message: the backup sent the code again every sweep.
func TestAnOTPWithoutAnIDIsResentOnceWhileTheStatusTopicIsDown(t *testing.T) {
	t.Parallel()
	r := newRig(t, primaryAndBackup(), rigOptions{dispatch: dispatch.Config{OTPMaxWait: 500 * time.Millisecond},
		sweepEvery: 100 * time.Millisecond, owedAge: time.Millisecond, route: admission.RouteRule{MinDeliveredRatio: -1}})
	primary, backup := r.sims["primary"], r.sims["backup"]
	primary.SetDelivered("+62", 0, "30007")
	r.statusDown.Store(true)
	r.publish(admission.OTP, map[string]any{"to": "+6281234567890", "body": "Your code is 482913"})
	r.waitFor("the backup's send", 15*time.Second, func() bool { return backup.Stats().Accepted >= 1 })
	// Two sweeps at least after the resend was out: each tries the two
	// accounts' events until their publishes give up, a few tries each.
	tried := r.statusTry.Load()
	r.waitFor("two more sweeps", 30*time.Second, func() bool { return r.statusTry.Load() >= tried+20 })

	var id string
	r.mu.Lock()
	for _, ev := range r.events {
		if ev.Outcome == nack.Sent && ev.Account == "primary" {
			id = ev.ID
		}
	}
	r.mu.Unlock()
	checkSends(t, r, id, "undelivered 30007", "primary", "backup")
	if n := backup.Stats().Accepted; n != 1 {
		t.Fatalf("the backup accepted %d messages, want the resend once", n)
	}
	if n := r.metrics.of("primary", "undelivered"); n != 1 {
		t.Fatalf("%d resends counted, want 1", n)
	}
}
