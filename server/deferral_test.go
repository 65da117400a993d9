package server

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/config/policy"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/receipts"
)

// closedForAnHour is a send window that opens an hour from now.
type closedForAnHour struct{}

func (closedForAnHour) Next(_, _ string, t time.Time) time.Time { return t.Add(time.Hour) }

// TestAServerDefersAClassOutsideItsWindow: a Server of a class with send
// windows stores a message outside them, sends nothing, and publishes its
// status event deferred with until.
func TestAServerDefersAClassOutsideItsWindow(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := config.Flags(fs, config.All, func(string) string { return "" })()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProjectID = "proj"
	class := admission.Class(strings.ToLower(strings.NewReplacer("_", "-").Replace(redistest.UniqueAccount(t))))
	class = class[:min(len(class), 32)]
	cfg.Lanes = []config.Class{
		{Name: admission.OTP, Topic: "sms-otp", Subscription: "sms-otp-dispatcher", MaxWait: time.Second},
		{Name: class, Topic: "sms-marketing", Subscription: "sms-marketing-dispatcher", MaxWait: time.Second,
			Sending: policy.Sending{Window: closedForAnHour{}}},
	}
	account := cfg.Account
	account.Name = redistest.UniqueAccount(t)
	account.Classes = []admission.Class{admission.OTP, class}
	account.ClassRPS = map[admission.Class]float64{class: 10}

	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps, err := topology.NewClient(ctx, "proj", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	top := cfg.Topology()
	top.WithoutDeadLetterPolicy = true
	if err := topology.Setup(ctx, ps, top, func(string, string, string) {}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/proj/subscriptions/test-status", Topic: "projects/proj/topics/" + cfg.StatusTopic}); err != nil {
		t.Fatal(err)
	}
	sender := &recordingSender{sent: make(chan string, 16)}
	s, err := New(cfg, []Account{{Setup: account, Sender: sender}}, redistest.Client(t), ps, Options{Emulator: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		s.Close()
	}()
	pub := ps.Publisher("sms-marketing")
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(`{"id":"night-1","to":"+819012345678","body":"sale"}`)}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	pub.Stop()

	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	var ev receipts.StatusEvent
	err = ps.Subscriber("test-status").Receive(rctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		if json.Unmarshal(m.Data, &ev) == nil && ev.ID == "night-1" {
			rcancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	until, perr := time.Parse(time.RFC3339, ev.Until)
	if ev.Status != "deferred" || ev.Class != class.String() || perr != nil || until.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("status event %+v, want deferred with until about an hour on", ev)
	}
	select {
	case id := <-sender.sent:
		t.Fatalf("%s was sent outside its window", id)
	default:
	}
}
