package receipts

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// statusDown is a pstest reactor that refuses every publish while down is
// set, as a topic without the publisher's role does (PermissionDenied:
// the client does not retry it on its own).
type statusDown struct{ down atomic.Bool }

func (s *statusDown) React(req any) (bool, any, error) {
	if _, ok := req.(*pubsubpb.PublishRequest); ok && s.down.Load() {
		return true, nil, status.Error(codes.PermissionDenied, "no role on the topic")
	}
	return false, nil, nil
}

// realRig is a Server of one account "acct" on a real Limiter (Redis)
// and a status topic on pstest, whose publishes fail while down is set;
// Run serves on a loopback port until stop is called, which waits for
// Run and returns its error.
type realRig struct {
	srv  *Server
	lim  *admission.Limiter
	ps   *pstest.Server
	down *statusDown
	url  string // the receipts' URL of "acct"
	stop func() error
}

// newRealRig starts a realRig whose ledger is wrap(lim's) (nil: lim's).
func newRealRig(t *testing.T, wrap func(*ledger.Ledger) Ledger) *realRig {
	t.Helper()
	r := &realRig{down: &statusDown{}}
	var pubs []TopicPublisher
	r.ps, pubs = pstestTopicsWith(t, []pstest.ServerReactorOption{{FuncName: "Publish", Reactor: r.down}}, "sms-status", "sms-otp")
	lim, err := admission.New(redistest.Client(t), admission.Config{Account: redistest.UniqueAccount(t), TargetRPS: 90, MarketingRPS: 70, Burst: 5,
		MaxSenders: 23, RedisTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.lim = lim
	var l Ledger = lim.Ledger()
	if wrap != nil {
		l = wrap(lim.Ledger())
	}
	r.srv, err = New(Config{
		PublicURL: testPublicURL, Accounts: []Account{{Name: "acct", Reader: &testReader{secret: "s3cret"}, Ledger: l}},
		Status: pubs[0], Resend: pubs[1], Deadline: payloadDeadline, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SweepEvery: time.Hour, OwedAge: time.Hour, // no sweep: what is published is the process's own doing
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String() + "/v1/receipts/acct"
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.srv.serve(ctx, ln) }()
	stopped := false
	r.stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		http.DefaultClient.CloseIdleConnections()
		return <-ran
	}
	t.Cleanup(func() { r.stop() })
	return r
}

// sent keeps the story of marketing message id, sent as providerID, as
// the call after its send does.
func (r *realRig) sent(t *testing.T, id, providerID string) {
	t.Helper()
	ctx := context.Background()
	d, err := r.lim.Admit(ctx, admission.Marketing, 1, time.Second, admission.Claim{ID: id, Token: "t-" + id})
	if err != nil || !d.Allowed {
		t.Fatalf("Admit(%s): %+v %v", id, d, err)
	}
	if err := r.lim.Settle(ctx, d, ledger.SentRecord(providerID), admission.ResultNone,
		ledger.Story{ID: id, Class: admission.Marketing.String(), ProviderIDs: []string{providerID}}); err != nil {
		t.Fatalf("Settle(%s): %v", id, err)
	}
}

// post posts a signed receipt and returns the answer's status.
func (r *realRig) post(t *testing.T, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	req.Header.Set("X-Test-Signature", testSign("s3cret", CallbackURL(testPublicURL, "acct"), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// events returns the ids of the status events on the topic.
func (r *realRig) events() []string {
	var ids []string
	for _, m := range r.ps.Messages() {
		if strings.HasSuffix(m.Topic, "/sms-status") {
			ids = append(ids, m.Attributes[AttrID])
		}
	}
	return ids
}

// owed returns the ids whose event is owed in Redis.
func (r *realRig) owed(t *testing.T) []string {
	t.Helper()
	folds, err := r.lim.Ledger().Owed(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range folds {
		ids = append(ids, f.ID)
	}
	return ids
}

// TestAStoppingProcessPublishesTheEventsItOwes: a final receipt whose
// event could not be published (the status topic refused it) is answered
// 200 and its event stays owed; when the process stops, Pub/Sub back, it
// publishes the event before Run returns and clears it in Redis, rather
// than leave it to another process's sweep (none, when the pool stops).
func TestAStoppingProcessPublishesTheEventsItOwes(t *testing.T) {
	r := newRealRig(t, nil)
	r.srv.publishBound = 300 * time.Millisecond
	r.sent(t, "m1", "SM1")
	r.down.down.Store(true)
	if code := r.post(t, "SM1 delivered"); code != http.StatusOK {
		t.Fatalf("the receipt: %d, want 200", code)
	}
	if ev, owed := r.events(), r.owed(t); len(ev) != 0 || len(owed) != 1 {
		t.Fatalf("with the topic refusing: events %q, owed %q; want none published, m1 owed", ev, owed)
	}
	r.down.down.Store(false)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Once or twice: a publish whose wait ran out may still go out from
	// the client's queue once the topic is back, besides the stop's own
	// (docs/contract.md: an event may come twice).
	if ev := r.events(); len(ev) == 0 || len(ev) > 2 || slices.ContainsFunc(ev, func(id string) bool { return id != "m1" }) {
		t.Fatalf("events once the process stopped: %q, want m1's", ev)
	}
	if owed := r.owed(t); len(owed) != 0 {
		t.Errorf("owed once the process stopped: %q, want none", owed)
	}
}

// TestAnEventNotPublishedAtItsReceiptIsPublishedWithinASecond: the
// status topic refuses a final receipt's event; once it takes publishes
// again, the process publishes the event itself within about retryEvery,
// with no sweep (an hour away here) and no other receipt.
func TestAnEventNotPublishedAtItsReceiptIsPublishedWithinASecond(t *testing.T) {
	r := newRealRig(t, nil)
	r.srv.publishBound = 300 * time.Millisecond
	r.sent(t, "m1", "SM1")
	r.down.down.Store(true)
	if code := r.post(t, "SM1 failed 30008"); code != http.StatusOK {
		t.Fatalf("the receipt: %d, want 200", code)
	}
	r.down.down.Store(false)
	// A bound for a loaded machine, not a figure: the retry comes each
	// second; without it, nothing comes before the sweep.
	deadline := time.Now().Add(20 * retryEvery)
	for len(r.events()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if ev := r.events(); len(ev) != 1 || ev[0] != "m1" {
		t.Fatalf("events %q, want m1's, published by the process's retry", ev)
	}
}

// lostAnswer is a Ledger whose first Receipt call is run in Redis but
// answers an error, as a call whose reply came after its timeout.
type lostAnswer struct {
	*ledger.Ledger
	lost atomic.Bool
}

func (l *lostAnswer) Receipt(ctx context.Context, rep ledger.Report) (ledger.Fold, error) {
	f, err := l.Ledger.Receipt(ctx, rep)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		return ledger.Fold{}, errors.New("receipt eval: context deadline exceeded")
	}
	return f, err
}

// TestTheRetryOfAFoldAnswered503PublishesItsEvent: a final receipt's fold
// runs in Redis but its answer is lost, so the receipt is answered 503;
// the provider posts it again, and that fold, which changes nothing,
// publishes the event still owed, at once rather than at the sweep.
func TestTheRetryOfAFoldAnswered503PublishesItsEvent(t *testing.T) {
	r := newRealRig(t, func(g *ledger.Ledger) Ledger { return &lostAnswer{Ledger: g} })
	r.sent(t, "m1", "SM1")
	if code := r.post(t, "SM1 delivered"); code != http.StatusServiceUnavailable {
		t.Fatalf("the receipt whose fold's answer was lost: %d, want 503", code)
	}
	if ev := r.events(); len(ev) != 0 {
		t.Fatalf("events %q before the retry, want none", ev)
	}
	// The provider posts the refused receipt again, at once (the
	// simulators 50 ms on): sooner than a duplicate is taken for one
	// whose fold is publishing its event, but this process knows it
	// answered 503.
	if code := r.post(t, "SM1 delivered"); code != http.StatusOK {
		t.Fatalf("the provider's retry: %d, want 200", code)
	}
	if ev := r.events(); len(ev) != 1 || ev[0] != "m1" {
		t.Fatalf("events after the retry: %q, want m1's", ev)
	}
}

// TestAStoppingProcessWritesTheDeliveryCountsItKept: the delivery counts
// a Limiter keeps up to a second (admission's counts.go) are written when
// the process stops, whatever it published (here nothing: the status
// topic refuses): another process's status reads them once it is gone.
func TestAStoppingProcessWritesTheDeliveryCountsItKept(t *testing.T) {
	r := newRealRig(t, nil)
	r.srv.publishBound = 300 * time.Millisecond
	r.sent(t, "m1", "SM1")
	r.down.down.Store(true)
	if code := r.post(t, "SM1 delivered"); code != http.StatusOK {
		t.Fatalf("the receipt: %d, want 200", code)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	reader, err := admission.New(redistest.Client(t), admission.Config{Account: r.lim.Account(), TargetRPS: 90, MarketingRPS: 70, Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	st, err := reader.Ledger().DeliveryStats(context.Background(), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if m := st[admission.Marketing.String()]; m.Finals != 1 || m.Delivered != 1 {
		t.Fatalf("marketing once the process stopped: %+v, want its final delivered", m)
	}
}
