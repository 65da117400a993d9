package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// subscribers returns a Pub/Sub client's subscribers on a pstest server,
// one per name.
func subscribers(t *testing.T, names ...string) []*pubsub.Subscriber {
	t.Helper()
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	c, err := pubsub.NewClient(context.Background(), project, option.WithEndpoint(srv.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	subs := make([]*pubsub.Subscriber, len(names))
	for i, n := range names {
		subs[i] = c.Subscriber(n)
	}
	return subs
}

// laneDispatcher is unitDispatcher with a lane for each of the three
// classes.
func laneDispatcher(t *testing.T, deps Deps) *Dispatcher {
	t.Helper()
	subs := subscribers(t, "a", "b", "c")
	for i, c := range threeClasses {
		deps.Lanes = append(deps.Lanes, Lane{Class: c, Subscriber: subs[i], Policy: policy.Of(c.String(), i)})
	}
	d, err := New(Config{}, deps)
	if err != nil {
		t.Fatal(err)
	}
	d.hard = context.Background() // Run's, which these tests do not call
	return d
}

// heldLimiter is a fakeLimiter whose Admit tells entered of each call and
// then, for a class with a channel in hold, waits until it is closed.
type heldLimiter struct {
	*fakeLimiter
	hold    map[admission.Class]chan struct{}
	entered chan admission.Class
}

func (l *heldLimiter) Admit(ctx context.Context, class admission.Class, cost int, maxWait time.Duration, claim admission.Claim) (admission.Decision, error) {
	l.entered <- class
	if h := l.hold[class]; h != nil {
		<-h
	}
	return l.fakeLimiter.Admit(ctx, class, cost, maxWait, claim)
}

// TestOnlyTheFirstClassHoldsTheOthersAtTheGate: while a first-class
// message of the process waits for its slot, neither later class goes to
// admission; once it has its slot both do. A transactional message
// waiting for its slot (its own ceiling, say) holds marketing back in no
// process: Redis orders the later classes among themselves.
func TestOnlyTheFirstClassHoldsTheOthersAtTheGate(t *testing.T) {
	lim := &heldLimiter{
		fakeLimiter: &fakeLimiter{dec: admission.Decision{Allowed: true, Source: admission.SourceRedis}},
		hold:        map[admission.Class]chan struct{}{admission.OTP: make(chan struct{}), transactional: make(chan struct{})},
		entered:     make(chan admission.Class, 8),
	}
	d := laneDispatcher(t, Deps{Limiter: lim, Claims: &fakeClaims{}, Sender: &fakeSender{}, DeadLetter: &fakeDLQ{}, Observer: &eventLog{}})
	release := map[admission.Class]func(){}
	for c, h := range lim.hold {
		release[c] = sync.OnceFunc(func() { close(h) })
	}
	var handled sync.WaitGroup
	defer func() {
		for _, r := range release {
			r() // a failed test's handlers end too
		}
		handled.Wait()
	}()
	handle := func(class admission.Class, n int) {
		handled.Go(func() {
			id := fmt.Sprintf("%s-%d", class, n)
			d.handle(context.Background(), class, "sub", &pubsub.Message{ID: id, Data: []byte(`{"id":"` + id + `","to":"+819012345678","body":"hi"}`)})
		})
	}
	// next returns the next class to go to admission; within a bound on
	// a hang, not a speed claim.
	next := func(what string) admission.Class {
		t.Helper()
		select {
		case c := <-lim.entered:
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing went to admission", what)
			return ""
		}
	}

	handle(admission.OTP, 0)
	if c := next("otp"); c != admission.OTP {
		t.Fatalf("%s went to admission first, want otp", c)
	}
	if n := d.OTPWaiting(); n != 1 {
		t.Fatalf("OTPWaiting() = %d with an otp waiting for its slot, want 1", n)
	}
	handle(transactional, 0)
	handle(admission.Marketing, 0)
	// Nothing to wait for but a mistake: a later class that reaches
	// admission does so well within this.
	select {
	case c := <-lim.entered:
		t.Fatalf("%s went to admission while an otp waited for its slot", c)
	case <-time.After(50 * time.Millisecond):
	}
	release[admission.OTP]()
	got := []admission.Class{next("after the otp's slot"), next("after the otp's slot")}
	if !slices.Contains(got, transactional) || !slices.Contains(got, admission.Marketing) {
		t.Fatalf("after the otp's slot, %v went to admission, want transactional and marketing", got)
	}

	// The transactional still waits for its slot; marketing goes on.
	handle(admission.Marketing, 1)
	if c := next("marketing with a transactional waiting for its slot"); c != admission.Marketing {
		t.Fatalf("%s went to admission, want marketing", c)
	}
}

// TestNewRefusesLanesItCannotServe: a lane whose class no account serves,
// a class listed twice and a lane without a subscription are refused at
// New, with the class named.
func TestNewRefusesLanesItCannotServe(t *testing.T) {
	subs := subscribers(t, "a", "b", "c")
	lim := &fakeLimiter{}
	account := func(classes ...admission.Class) []Account {
		return []Account{{Name: "main", Classes: classes, Limiter: lim, Claims: &fakeClaims{}, Sender: &fakeSender{}}}
	}
	first, later := policy.Default("otp"), policy.Default("marketing")
	tests := []struct {
		name     string
		lanes    []Lane
		accounts []Account
		want     string
	}{
		{
			name:     "a class no account serves",
			lanes:    []Lane{{Class: admission.OTP, Subscriber: subs[0], Policy: first}, {Class: transactional, Subscriber: subs[1], Policy: later}, {Class: admission.Marketing, Subscriber: subs[2], Policy: later}},
			accounts: account(admission.OTP, admission.Marketing),
			want:     "no account serves transactional",
		},
		{
			name:     "a class listed twice",
			lanes:    []Lane{{Class: admission.OTP, Subscriber: subs[0], Policy: first}, {Class: admission.OTP, Subscriber: subs[1], Policy: first}},
			accounts: account(admission.OTP),
			want:     `lane "otp" is listed twice`,
		},
		{
			name:     "a lane without a subscription",
			lanes:    []Lane{{Class: admission.OTP, Subscriber: subs[0], Policy: first}, {Class: transactional, Policy: later}},
			accounts: account(admission.OTP, transactional),
			want:     `lane "transactional" has no Subscriber`,
		},
		{
			name:     "a lane without its policy",
			lanes:    []Lane{{Class: admission.OTP, Subscriber: subs[0], Policy: first}, {Class: transactional, Subscriber: subs[1]}},
			accounts: account(admission.OTP, transactional),
			want:     `lane "transactional" has no Policy`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Config{}, Deps{Lanes: tt.lanes, Accounts: tt.accounts, DeadLetter: &fakeDLQ{}, Observer: &eventLog{}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestLanesDefaultsAndReadiness: with three lanes the Dispatcher's classes
// are theirs in priority order, the first lane's max wait defaults to
// OTP's and the others' to marketing's, and it is ready only while every
// lane receives.
func TestLanesDefaultsAndReadiness(t *testing.T) {
	subs := subscribers(t, "a", "b", "c")
	lim := &fakeLimiter{}
	d, err := New(Config{}, Deps{
		Lanes: []Lane{
			{Class: admission.OTP, Subscriber: subs[0], Policy: policy.Of("otp", 0)},
			{Class: transactional, Subscriber: subs[1], Policy: policy.Of("transactional", 1), MaxWait: 4 * time.Second},
			{Class: admission.Marketing, Subscriber: subs[2], Policy: policy.Of("marketing", 2)},
		},
		Limiter: lim, Claims: &fakeClaims{}, Sender: &fakeSender{}, DeadLetter: &fakeDLQ{}, Observer: &eventLog{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Classes(); !slices.Equal(got, threeClasses) {
		t.Fatalf("Classes() = %v, want %v", got, threeClasses)
	}
	for class, want := range map[admission.Class]time.Duration{admission.OTP: DefaultOTPMaxWait, transactional: 4 * time.Second, admission.Marketing: DefaultMarketingMaxWait} {
		if got := d.maxWait(class); got != want {
			t.Errorf("max wait of %s = %v, want %v", class, got, want)
		}
	}
	// The single account of Limiter serves every lane's class.
	for _, class := range threeClasses {
		if r := d.route[class]; len(r) != 1 {
			t.Errorf("class %s has a route of %d accounts, want the one", class, len(r))
		}
	}

	for _, l := range d.lanes {
		l.receiving.Store(true)
	}
	if !d.Ready() {
		t.Fatal("not ready with every lane receiving")
	}
	for _, l := range d.lanes {
		l.receiving.Store(false)
		if d.Ready() {
			t.Errorf("ready while the %s lane does not receive", l.class)
		}
		l.receiving.Store(true)
	}
}

// TestThreeLanesPullEachSubscriptionAndRouteByClass: one process with a
// lane per class pulls all three subscriptions; an account serving only
// some classes gets only those: otp and transactional go out on "first",
// marketing on "bulk".
func TestThreeLanesPullEachSubscriptionAndRouteByClass(t *testing.T) {
	h := newHarness(t, strict, nil)
	for _, c := range threeClasses {
		h.addClass(c, 0)
	}
	names := map[string]string{"first": redistest.UniqueAccount(t) + "-first", "bulk": redistest.UniqueAccount(t) + "-bulk"}
	h.accounts = func(rdb redis.Scripter) []Account {
		var accts []Account
		for _, a := range []struct {
			name    string
			classes []admission.ClassLimit
		}{
			{"first", []admission.ClassLimit{{Name: admission.OTP, Reserve: 30}, {Name: transactional, RPS: 50}}},
			{"bulk", []admission.ClassLimit{{Name: admission.Marketing}}},
		} {
			cfg := h.limits
			cfg.Account, cfg.Classes = names[a.name], a.classes
			lim, err := admission.New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, err := provider.NewClient(h.simURL, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.CloseIdleConnections)
			classes := make([]admission.Class, len(a.classes))
			for i, k := range a.classes {
				classes[i] = k.Name
			}
			accts = append(accts, Account{Name: a.name, Classes: classes, Limiter: lim, Claims: lim.Claims(), Sender: c})
		}
		return accts
	}
	want := map[string]string{} // Pub/Sub ID -> account
	var ids []string
	for i := range 3 {
		for _, c := range threeClasses {
			id := h.publish(c, map[string]string{"id": fmt.Sprintf("%s-%d", c, i), "to": "+819012345678", "body": "hello"})
			ids, want[id] = append(ids, id), map[admission.Class]string{admission.OTP: "first", transactional: "first", admission.Marketing: "bulk"}[c]
		}
	}
	h.start(1, Config{})
	if got := h.dispatchers[0].Classes(); !slices.Equal(got, threeClasses) {
		t.Fatalf("Classes() = %v, want %v", got, threeClasses)
	}
	for id, ev := range h.waitEnded(ids, 30*time.Second) {
		if ev.Outcome != nack.Sent || ev.Account != want[id] || ev.Class != classOf(ev.ID) {
			t.Errorf("%s (%s): %v on %q as %s, want sent on %q as %s", ev.ID, id, ev.Outcome, ev.Account, ev.Class, want[id], classOf(ev.ID))
		}
	}
}
