package dispatch

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/suppress"
)

// The suppression list on every path a message takes to a provider, on
// real Redis and Pub/Sub: each instance keeps its own copy of the list
// (suppress.List), as a process does.

const (
	stopped = "+819011110000" // the number that said STOP
	clean   = "+819022220000" // a number on no list
)

// refusal is one status event suppressed a test's list was asked for.
type refusal struct {
	id, account, source string
	class               admission.Class
}

// testList is dispatch's Suppressions on a suppress.List of its own
// Redis client, changing the Store a test shares.
type testList struct {
	list  *suppress.List
	store *suppress.Store
	log   *refusals
}

type refusals struct {
	mu   sync.Mutex
	list []refusal
}

func (r *refusals) all() []refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]refusal(nil), r.list...)
}

func (l testList) Suppressed(number string) (string, bool) { return l.list.Suppressed(number) }

func (l testList) OptedOut(ctx context.Context, number, account string) error {
	e := suppress.Entry{Number: number, Action: suppress.ActionAdd, Source: suppress.SourceProvider, Account: account}
	l.list.Apply(e)
	_, err := l.store.Add(ctx, e)
	return err
}

func (l testList) Refused(_ context.Context, id, _ string, class admission.Class, account, source string) {
	l.log.mu.Lock()
	defer l.log.mu.Unlock()
	l.log.list = append(l.log.list, refusal{id: id, account: account, source: source, class: class})
}

// withList gives h's instances a suppression list under names of the
// test's own, and returns its Store and the refusals the instances told.
func withList(t *testing.T, h *harness) (*suppress.Store, *refusals) {
	t.Helper()
	admin := redistest.Client(t)
	names := keys.Suppressions("{sms:suppress:" + redistest.UniqueAccount(t) + "}")
	t.Cleanup(func() { admin.Del(context.Background(), names.List(), names.Log(), names.Seq()) })
	store := suppress.NewStore(admin, names, nil)
	log := &refusals{}
	h.suppressions = func(rdb *redis.Client) Suppressions {
		l := suppress.NewList(suppress.NewStore(rdb, names, nil), nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); l.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		<-l.Loaded()
		return testList{list: l, store: store, log: log}
	}
	return store, log
}

// stop puts number on store's list, through account, and waits until
// every instance of h knows it.
func stop(t *testing.T, h *harness, store *suppress.Store, number, account string) {
	t.Helper()
	if _, err := store.Add(context.Background(), suppress.Entry{Number: number, Source: suppress.SourceInbound, Account: account, Reason: "STOP"}); err != nil {
		t.Fatal(err)
	}
	h.waitUntil("every instance knows the STOP", 5*time.Second, func() bool {
		for _, d := range h.dispatchers {
			if _, ok := d.deps.Suppressions.Suppressed(number); !ok {
				return false
			}
		}
		return true
	})
}

// wantSuppressed fails unless ev is a delivery the list stopped before
// admission (no slot taken), acked, by an entry of source.
func wantSuppressed(t *testing.T, what string, ev Event, source string) {
	t.Helper()
	if ev.Outcome != nack.Suppressed || ev.Action != nack.Ack || ev.SuppressedBy != source {
		t.Fatalf("%s: %v/%v by %q (%v); want suppressed, acked, by %q", what, ev.Outcome, ev.Action, ev.SuppressedBy, ev.Err, source)
	}
	if ev.Decision.Source != "" || !ev.Admitted.IsZero() {
		t.Fatalf("%s: admission was asked (%+v): a suppressed message takes no slot", what, ev.Decision)
	}
}

// TestASTOPThroughOneAccountStopsEveryAccount: a number that said STOP
// through the backup account is sent nothing through the primary, in any
// class; the status event names the message's home and the entry's
// source; a START through the other account lifts it.
func TestASTOPThroughOneAccountStopsEveryAccount(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	primary, backup, _ := twoAccounts(t, h, false, nil)
	store, log := withList(t, h)
	h.start(2, Config{OTPMaxWait: 500 * time.Millisecond})
	stop(t, h, store, stopped, "backup")

	otp := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": stopped, "body": "code"})
	sale := h.publish(admission.Marketing, map[string]string{"id": "sale-1", "to": stopped, "body": "sale"})
	other := h.publish(admission.Marketing, map[string]string{"id": "sale-2", "to": clean, "body": "sale"})
	got := h.waitEnded([]string{otp, sale, other}, 10*time.Second)
	wantSuppressed(t, "the OTP", got[otp], suppress.SourceInbound)
	wantSuppressed(t, "the campaign's message", got[sale], suppress.SourceInbound)
	if ev := got[other]; ev.Outcome != nack.Sent {
		t.Fatalf("a number on no list: %v (%v), want sent", ev.Outcome, ev.Err)
	}
	if n := primary.SentCount("login-1") + primary.SentCount("sale-1") + backup.SentCount("login-1") + backup.SentCount("sale-1"); n != 0 {
		t.Fatalf("the providers were sent %d messages to a number on the list", n)
	}
	want := map[string]refusal{
		"login-1": {id: "login-1", account: "primary", source: suppress.SourceInbound, class: admission.OTP},
		"sale-1":  {id: "sale-1", account: "primary", source: suppress.SourceInbound, class: admission.Marketing},
	}
	rs := log.all()
	if len(rs) != 2 || rs[0] != want[rs[0].id] || rs[1] != want[rs[1].id] {
		t.Fatalf("status events suppressed: %+v; want one each of %+v", rs, want)
	}

	// START through the primary: the next message goes out.
	if _, err := store.Remove(context.Background(), suppress.Entry{Number: stopped, Source: suppress.SourceInbound, Account: "primary", Reason: "START"}); err != nil {
		t.Fatal(err)
	}
	h.waitUntil("every instance knows the START", 5*time.Second, func() bool {
		for _, d := range h.dispatchers {
			if _, ok := d.deps.Suppressions.Suppressed(stopped); ok {
				return false
			}
		}
		return true
	})
	again := h.publish(admission.OTP, map[string]string{"id": "login-2", "to": stopped, "body": "code"})
	if ev := h.waitEnded([]string{again}, 10*time.Second)[again]; ev.Outcome != nack.Sent {
		t.Fatalf("after START: %v (%v), want sent", ev.Outcome, ev.Err)
	}
}

// TestAClassWithoutSuppressionSendsToAListedNumber: a class whose file
// says suppression: false is not stopped by the list.
func TestAClassWithoutSuppressionSendsToAListedNumber(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	store, _ := withList(t, h)
	h.addClass(admission.OTP, 500*time.Millisecond)
	h.lanes[0].Policy = h.lanes[0].Policy.Unsuppressed()
	h.addClass(admission.Marketing, 2*time.Second)
	h.start(1, Config{})
	stop(t, h, store, stopped, "acme")
	otp := h.publish(admission.OTP, map[string]string{"id": "asked-1", "to": stopped, "body": "code"})
	sale := h.publish(admission.Marketing, map[string]string{"id": "sale-1", "to": stopped, "body": "sale"})
	got := h.waitEnded([]string{otp, sale}, 10*time.Second)
	if ev := got[otp]; ev.Outcome != nack.Sent {
		t.Fatalf("a class with suppression false: %v (%v), want sent", ev.Outcome, ev.Err)
	}
	wantSuppressed(t, "marketing", got[sale], suppress.SourceInbound)
}

// TestAFailoverAndAResendRefuseASuppressedNumber: under a penalty on its
// home an OTP overflows to the backup, but not one to a number on the
// list; a resend (the receipts' republish, avoiding the primary) of one
// is refused too.
func TestAFailoverAndAResendRefuseASuppressedNumber(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	_, backup, limiters := twoAccounts(t, h, false, nil)
	store, _ := withList(t, h)
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond})
	stop(t, h, store, stopped, "primary")
	if err := limiters["primary"][0].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	over := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": clean, "body": "code"})
	if ev := h.waitEnded([]string{over}, 10*time.Second)[over]; ev.Outcome != nack.Sent || ev.Account != "backup" {
		t.Fatalf("an OTP under its home's penalty: %v on %q, want sent on backup", ev.Outcome, ev.Account)
	}
	listed := h.publish(admission.OTP, map[string]string{"id": "login-2", "to": stopped, "body": "code"})
	wantSuppressed(t, "an OTP that would fail over", h.waitEnded([]string{listed}, 10*time.Second)[listed], suppress.SourceInbound)

	resent, err := h.pubs[admission.OTP].Publish(context.Background(), &pubsub.Message{
		Data:       []byte(`{"id":"login-3","to":"` + stopped + `","body":"code"}`),
		Attributes: map[string]string{attr.ResendAvoid: "primary", attr.ResendReason: "undelivered 30007"},
	}).Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantSuppressed(t, "a resend", h.waitEnded([]string{resent}, 10*time.Second)[resent], suppress.SourceInbound)
	if n := backup.SentCount("login-2") + backup.SentCount("login-3"); n != 0 {
		t.Fatalf("the backup was sent %d messages to a number on the list", n)
	}
}

// TestAChangeWhileWaitingForASlotStopsTheSend: a message that was waiting
// for its slot when its number was put on the list is not sent once
// admitted (no send admitted a second after the STOP's answer).
func TestAChangeWhileWaitingForASlotStopsTheSend(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	store, _ := withList(t, h)
	h.start(1, Config{MarketingMaxWait: 10 * time.Second})
	if err := h.limiters[0].ReportThrottled(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	sale := h.publish(admission.Marketing, map[string]string{"id": "sale-1", "to": stopped, "body": "sale"})
	h.waitUntil("the message waits for its slot", 5*time.Second, func() bool {
		return h.dispatchers[0].Waiting()[admission.Marketing] > 0
	})
	stop(t, h, store, stopped, "acme")
	ev := h.waitEnded([]string{sale}, 20*time.Second)[sale]
	if ev.Outcome != nack.Suppressed || ev.Action != nack.Ack || ev.Admitted.IsZero() {
		t.Fatalf("admitted after the STOP: %v/%v admitted at %v (%v); want suppressed and acked after its admission", ev.Outcome, ev.Action, ev.Admitted, ev.Err)
	}
	if n := h.sim.SentCount("sale-1"); n != 0 {
		t.Fatalf("the provider was sent it %d times", n)
	}
}

// TestAStoppedOverflowNamesItsHome: an OTP that overflowed past its home
// and was stopped by a STOP that came while it waited for the other
// account's slot is its home's: its event and status event name the
// home, not the account that admitted it (docs/contract.md, section 7).
func TestAStoppedOverflowNamesItsHome(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	_, backup, limiters := twoAccounts(t, h, false, nil)
	store, log := withList(t, h)
	h.start(1, Config{OTPMaxWait: 10 * time.Second})
	if err := limiters["primary"][0].ReportThrottled(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := limiters["backup"][0].ReportThrottled(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	otp := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": stopped, "body": "code"})
	h.waitUntil("the OTP waits for the backup's slot", 5*time.Second, func() bool {
		return h.dispatchers[0].Waiting()[admission.OTP] > 0
	})
	stop(t, h, store, stopped, "backup")
	ev := h.waitEnded([]string{otp}, 20*time.Second)[otp]
	if ev.Outcome != nack.Suppressed || ev.Action != nack.Ack || ev.Admitted.IsZero() || ev.Account != "primary" {
		t.Fatalf("an overflow stopped after its admission: %v/%v admitted at %v on %q (%v); want suppressed, acked, its home primary", ev.Outcome, ev.Action, ev.Admitted, ev.Account, ev.Err)
	}
	if rs := log.all(); len(rs) != 1 || rs[0].account != "primary" {
		t.Fatalf("status events suppressed: %+v; want one, naming the home primary", rs)
	}
	if n := backup.SentCount("login-1"); n != 0 {
		t.Fatalf("the backup was sent it %d times", n)
	}
}

// TestTwilio21610SuppressesEverywhere: a send answered 21610 (the
// recipient replied STOP to that sender) puts the number on the list for
// every account, source provider; the message is acked, not failed over,
// not dead-lettered, and the next message to the number, in any class,
// is stopped before admission.
func TestTwilio21610SuppressesEverywhere(t *testing.T) {
	h := newHarness(t, providertest.Config{}, nil)
	sims := map[string]*providertest.Simulator{}
	urls := map[string]string{}
	for _, n := range []string{"primary", "backup"} {
		sim := providertest.NewTwilio(providertest.Config{Token: goodSecret}, twilioSID)
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		sims[n], urls[n] = sim, srv.URL
	}
	sims["primary"].OptOut(stopped)
	prefix := redistest.UniqueAccount(t)
	h.accounts = func(rdb redis.Scripter) []Account {
		var accts []Account
		for _, n := range []string{"primary", "backup"} {
			cfg := h.limits
			cfg.Account = prefix + "-" + n
			lim, err := admission.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tw, err := provider.NewTwilio(provider.TwilioConfig{AccountSID: twilioSID, AuthToken: provider.StaticSecret(goodSecret), From: "+15005550006", BaseURL: urls[n]})
			if err != nil {
				t.Fatal(err)
			}
			accts = append(accts, Account{Name: n, Classes: []admission.Class{admission.OTP, admission.Marketing}, Limiter: lim, Claims: lim.Claims(), Sender: tw})
		}
		return accts
	}
	store, log := withList(t, h)
	h.start(1, Config{OTPMaxWait: 500 * time.Millisecond})

	otp := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": stopped, "body": "code"})
	ev := h.waitEnded([]string{otp}, 10*time.Second)[otp]
	if ev.Outcome != nack.Suppressed || ev.Action != nack.Ack || ev.SuppressedBy != suppress.SourceProvider || ev.Account != "primary" {
		t.Fatalf("a send answered 21610: %v/%v by %q on %q (%v); want suppressed and acked on primary, by the provider", ev.Outcome, ev.Action, ev.SuppressedBy, ev.Account, ev.Err)
	}
	e, ok, err := store.Get(context.Background(), stopped)
	if err != nil || !ok || e.Source != suppress.SourceProvider || e.Account != "primary" {
		t.Fatalf("the list's entry after 21610: %+v, %v, %v; want source provider through primary", e, ok, err)
	}
	if n := sims["backup"].Stats().Accepted + sims["backup"].Stats().Rejected; n != 0 {
		t.Fatalf("the backup was asked %d times: a 21610 must not fail over", n)
	}
	if rs := log.all(); len(rs) != 1 || rs[0].id != "login-1" || rs[0].source != suppress.SourceProvider {
		t.Fatalf("status events suppressed: %+v; want login-1's, source provider", rs)
	}

	asked := sims["primary"].Stats().Rejected
	sale := h.publish(admission.Marketing, map[string]string{"id": "sale-1", "to": stopped, "body": "sale"})
	wantSuppressed(t, "the next message", h.waitEnded([]string{sale}, 10*time.Second)[sale], suppress.SourceProvider)
	if n := sims["primary"].Stats().Rejected - asked + sims["backup"].Stats().Rejected; n != 0 {
		t.Fatalf("the providers were asked %d more times for a number on the list", n)
	}
	// Redelivered (the ack lost), the message is stopped by the list:
	// never dead-lettered.
	dup := h.publish(admission.OTP, map[string]string{"id": "login-1", "to": stopped, "body": "code"})
	wantSuppressed(t, "the message again", h.waitEnded([]string{dup}, 10*time.Second)[dup], suppress.SourceProvider)
}
