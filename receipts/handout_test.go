package receipts

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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
	"smsdispatcher/internal/attr"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/ledger"
)

// payloadDeadline is Config.Deadline as the dispatcher hands it in.
var payloadDeadline = dispatch.PayloadDeadline

// The resend's hand-out on a real limiter (redis-server) and pstest: once
// whatever becomes of the status event, and never past its window.

// handOutRig is a Server of one account "acct" on a real limiter, its
// resends published to pstest's topic sms-otp, its status events to
// pstest's sms-status, which exists only when the rig says so. Its sweep
// is run by the test.
type handOutRig struct {
	t       *testing.T
	srv     *Server
	acct    *account
	lim     *admission.Limiter
	ps      *pstest.Server
	reader  *testReader
	metrics *testMetrics
	// resendUp and statusUp let the topics' publishes through; down, a
	// publish fails as in a Pub/Sub outage.
	resendUp, statusUp atomic.Bool
}

// switched is a Publisher that publishes through pub while up holds.
type switched struct {
	pub Publisher
	up  *atomic.Bool
}

func (s switched) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	if !s.up.Load() {
		return errors.New("pubsub: unavailable")
	}
	return s.pub.Publish(ctx, data, attrs)
}

func newHandOutRig(t *testing.T, statusTopic bool) *handOutRig {
	t.Helper()
	r := &handOutRig{t: t, ps: pstest.NewServer(), reader: &testReader{secret: "s3cret"}, metrics: &testMetrics{}}
	t.Cleanup(func() { r.ps.Close() })
	ctx := context.Background()
	c, err := pubsub.NewClient(ctx, "test", option.WithEndpoint(r.ps.Addr),
		option.WithoutAuthentication(), option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	topics := []string{"sms-otp"}
	if statusTopic {
		topics = append(topics, "sms-status")
	}
	for _, name := range topics {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/test/topics/" + name}); err != nil {
			t.Fatal(err)
		}
	}
	publisher := func(topic string) TopicPublisher {
		p := c.Publisher(topic)
		p.PublishSettings.DelayThreshold = time.Millisecond
		t.Cleanup(p.Stop)
		return TopicPublisher{Publisher: p}
	}
	r.lim, err = admission.New(redistest.Client(t), admission.Config{Account: redistest.UniqueAccount(t),
		TargetRPS: 90, MarketingRPS: 70, Burst: 5, MaxSenders: 23, RedisTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.resendUp.Store(true)
	r.statusUp.Store(true)
	r.srv, err = New(Config{
		PublicURL: testPublicURL,
		Accounts:  []Account{{Name: "acct", Reader: r.reader, Ledger: r.lim.Ledger()}},
		Status:    switched{publisher("sms-status"), &r.statusUp},
		Resend:    switched{publisher("sms-otp"), &r.resendUp},
		Deadline:  payloadDeadline,
		Metrics:   r.metrics,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OwedAge:   time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.srv.publishBound = 100 * time.Millisecond
	r.acct = r.srv.accounts["acct"]
	return r
}

// send records on the limiter a first-class message id sent as pid, its
// resend payload kept until until, as the dispatcher does.
func (r *handOutRig) send(id, pid string, payload []byte, until time.Time) {
	r.t.Helper()
	ctx := context.Background()
	d, err := r.lim.Admit(ctx, admission.OTP, 1, time.Second, admission.Claim{ID: id, Token: "tok-" + id})
	if err != nil || !d.Allowed {
		r.t.Fatalf("Admit(%s): %+v, %v", id, d, err)
	}
	s := ledger.Story{ID: id, Class: "otp", ProviderIDs: []string{pid}, Resend: payload, ResendUntil: until}
	if err := r.lim.Settle(ctx, d, ledger.SentRecord(pid), admission.ResultNone, s); err != nil {
		r.t.Fatalf("Settle(%s): %v", id, err)
	}
}

// post posts a signed receipt of pid with status and code.
func (r *handOutRig) post(pid, status, code string) {
	r.t.Helper()
	body := strings.TrimSpace(pid + " " + status + " " + code)
	req := httptest.NewRequest(http.MethodPost, "http://10.0.0.7:8081/v1/receipts/acct", strings.NewReader(body))
	req.Header.Set("X-Test-Signature", testSign(r.reader.secret, CallbackURL(testPublicURL, "acct"), []byte(body)))
	w := httptest.NewRecorder()
	r.srv.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		r.t.Fatalf("receipt %q answered %d", body, w.Code)
	}
}

// published returns the messages published to topic.
func (r *handOutRig) published(topic string) []*pstest.Message {
	var out []*pstest.Message
	for _, m := range r.ps.Messages() {
		if m.Topic == "projects/test/topics/"+topic {
			out = append(out, m)
		}
	}
	return out
}

// TestAResendIsPublishedOnceWhileItsStatusEventFails: an OTP without an
// id (its data as a producer published it, as a story kept before the
// dispatcher wrote the id into it) fails; the status topic does not
// exist, so its event stays owed through three sweeps and three retries
// of the events the process holds. Its resend is published once, not once
// per sweep or retry: one copy, hence one send-once
// record on the next account, where every copy would have been another
// message (its own Pub/Sub id standing in for the id).
func TestAResendIsPublishedOnceWhileItsStatusEventFails(t *testing.T) {
	r := newHandOutRig(t, false)
	ctx := context.Background()
	data := []byte(`{"to":"+6281234567890","body":"Your code is 482913"}`)
	r.send("ps-1", "SM1", data, time.Now().Add(attr.ResendWithin))

	r.post("SM1", "undelivered", "30007")
	for range 3 {
		r.srv.publishHeld(ctx, false)
		r.srv.sweep(ctx, r.acct)
	}

	resends := r.published("sms-otp")
	backup := admission.NewClaims(redistest.Client(t), redistest.UniqueAccount(t), 0, 0, 0, nil)
	records := 0
	for _, m := range resends {
		msg, err := dispatch.Decode(m.Data, m.ID)
		if err != nil {
			t.Fatalf("a resend that does not decode: %q: %v", m.Data, err)
		}
		rec, err := backup.Claim(ctx, ledger.ResendID(msg.ID), "tok-"+m.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State == ledger.Claimed {
			records++
		}
	}
	if len(resends) != 1 || records != 1 {
		t.Fatalf("%d resends published, %d send-once records on the next account: want 1 and 1", len(resends), records)
	}
	if got := r.metrics.get(); strings.Count(strings.Join(got, "\n"), "resend acct undelivered") != 1 {
		t.Errorf("metrics %q: want one resend counted", got)
	}
	if s, _, err := r.lim.Ledger().Story(ctx, "ps-1"); err != nil || !s.Owed || !s.Resent {
		t.Errorf("the story: %+v, %v; want its event still owed, resent", s, err)
	}
}

// TestASweptEventIsNotPublishedAgainByTheRetry: a receipt's event that
// could not be published is held by its process for the retry; a sweep
// publishes it first (another process's, or this one's), and the retry
// that follows publishes nothing: one event, not two.
func TestASweptEventIsNotPublishedAgainByTheRetry(t *testing.T) {
	r := newHandOutRig(t, true)
	ctx := context.Background()
	r.send("login-1", "SM1", nil, time.Time{})
	r.statusUp.Store(false)
	r.post("SM1", "delivered", "")

	r.statusUp.Store(true)
	r.srv.sweep(ctx, r.acct)
	r.srv.publishHeld(ctx, false)
	r.srv.sweep(ctx, r.acct)
	if events := r.published("sms-status"); len(events) != 1 {
		t.Fatalf("%d status events published, want 1", len(events))
	}
}

// TestAResendPastItsWindowIsDropped: Pub/Sub is down when OTPs fail, so
// their resends are given back; when it is back, a sweep within the
// window hands the resend out once, while one past its window (the
// deadline the dispatcher wrote into its data, or 5 minutes from its
// acceptance for data without one) drops it, counted, and the status
// event goes out either way.
func TestAResendPastItsWindowIsDropped(t *testing.T) {
	for _, tt := range []struct {
		name     string
		deadline bool          // the payload holds the deadline (dispatch.WithID)
		later    time.Duration // the sweep's time after the failure
		resent   bool
	}{
		{"within its deadline", true, time.Minute, true},
		{"past its deadline", true, 6 * time.Minute, false},
		{"within 5 minutes of its acceptance", false, time.Minute, true},
		{"past 5 minutes of its acceptance", false, 6 * time.Minute, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newHandOutRig(t, true)
			ctx := context.Background()
			until := time.Now().Add(attr.ResendWithin)
			data := []byte(`{"id":"login-1","to":"+6281234567890","body":"Your code is 482913"}`)
			if tt.deadline {
				data = dispatch.WithID(data, "login-1", until)
			}
			r.send("login-1", "SM1", data, until)
			r.resendUp.Store(false)
			r.statusUp.Store(false)
			r.post("SM1", "failed", "")

			r.resendUp.Store(true)
			r.statusUp.Store(true)
			r.srv.now = func() time.Time { return time.Now().Add(tt.later) }
			r.srv.sweep(ctx, r.acct)
			r.srv.sweep(ctx, r.acct)

			resends, events := r.published("sms-otp"), r.published("sms-status")
			if want := map[bool]int{true: 1, false: 0}[tt.resent]; len(resends) != want || len(events) != 1 {
				t.Fatalf("%d resends and %d status events published, want %d and 1", len(resends), len(events), want)
			}
			late := strings.Count(strings.Join(r.metrics.get(), "\n"), "resend_late acct")
			if want := map[bool]int{true: 0, false: 1}[tt.resent]; late != want {
				t.Errorf("%d resends counted late, want %d (metrics %q)", late, want, r.metrics.get())
			}
			if s, _, err := r.lim.Ledger().Story(ctx, "login-1"); err != nil || s.Owed {
				t.Errorf("the story: %+v, %v; want its event published", s, err)
			}
		})
	}
}
