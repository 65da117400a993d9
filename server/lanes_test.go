package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
)

// recordingSender accepts every message and hands its id on.
type recordingSender struct {
	sent chan string
}

func (r *recordingSender) Send(_ context.Context, m provider.Message) (provider.Receipt, error) {
	select {
	case r.sent <- m.ID:
	default: // the test has what it waits for: a redelivery never blocks a send
	}
	return provider.Receipt{ID: "p-" + m.ID}, nil
}

// TestNewWiresALanePerClass: a Server of settings whose Process.Lanes name
// three classes, on an account serving them with its ceilings and
// reserves, pulls each class's subscription in priority order and sends
// what is published to each class's topic.
func TestNewWiresALanePerClass(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg, err := config.Flags(fs, config.All, func(string) string { return "" })()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProjectID = "proj"
	cfg.Lanes = []config.Class{
		{Name: admission.OTP, Topic: "sms-otp", Subscription: "sms-otp-dispatcher", MaxWait: time.Second},
		{Name: "transactional", Topic: "sms-transactional", Subscription: "sms-transactional-dispatcher", MaxWait: 4 * time.Second},
		{Name: admission.Marketing, Topic: "sms-marketing", Subscription: "sms-marketing-dispatcher", MaxWait: 8 * time.Second},
	}
	account := cfg.Account
	account.Name = redistest.UniqueAccount(t)
	account.Classes = []admission.Class{admission.OTP, "transactional", admission.Marketing}
	account.ClassRPS = map[admission.Class]float64{"transactional": 30, admission.Marketing: 60}
	account.ReserveRPS = map[admission.Class]float64{admission.OTP: 20}

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
	sender := &recordingSender{sent: make(chan string, 16)}
	s, err := New(cfg, []Account{{Setup: account, Sender: sender}}, redistest.Client(t), ps, Options{Emulator: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.d.Classes(), []admission.Class{admission.OTP, "transactional", admission.Marketing}; !reflect.DeepEqual(got, want) {
		t.Fatalf("lanes %v, want %v", got, want)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		s.Close()
	}()
	for _, c := range cfg.Lanes {
		pub := ps.Publisher(c.Topic)
		data := fmt.Sprintf(`{"id":"m-%s","to":"+819012345678","body":"hi"}`, c.Name)
		if _, err := pub.Publish(ctx, &pubsub.Message{Data: []byte(data)}).Get(ctx); err != nil {
			t.Fatal(err)
		}
		pub.Stop()
	}
	want := map[string]bool{}
	for _, c := range cfg.Lanes {
		want["m-"+c.Name.String()] = true
	}
	timeout := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case id := <-sender.sent:
			delete(want, id)
		case <-timeout:
			t.Fatalf("not sent: %v", want)
		}
	}
}
