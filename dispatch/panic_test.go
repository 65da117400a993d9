package dispatch

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

// answerParser is a Sender whose reading of the provider's answer has a
// bug: it indexes past the end of what it parsed.
type answerParser struct{ parsed []string }

var _ Sender = (*answerParser)(nil)

func (s *answerParser) Send(context.Context, provider.Message) (provider.Receipt, error) {
	return provider.Receipt{ID: s.parsed[len(s.parsed)]}, nil
}

// TestAPanicEndsTheDeliveryNotTheProcess: a panic while handling a message
// is recovered: the delivery is nacked and counted, the stack logged once
// with the message's Pub/Sub ID and nothing of its data, and on its third
// panicking delivery the message is dead-lettered (invalid:
// handler_panic) instead of coming back for ever. Each redelivery finds
// the id's flight landed, not held by the panicked one.
func TestAPanicEndsTheDeliveryNotTheProcess(t *testing.T) {
	var logs syncBuffer
	lim := &fakeLimiter{dec: admission.Decision{Allowed: true, Source: admission.SourceRedis}}
	dlq, obs := &fakeDLQ{}, &eventLog{}
	d := unitDispatcher(t, Config{MaxHandlerPanics: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Deps{Limiter: lim, Claims: &fakeClaims{}, Sender: &answerParser{}, DeadLetter: dlq, Observer: obs})
	data := []byte(`{"id":"login-1","to":"+819012345678","body":"code 482913"}`)
	for range 3 {
		d.handle(context.Background(), admission.OTP, "sub", &pubsub.Message{ID: "m1", Data: data})
	}

	var got []string
	for _, ev := range obs.evs {
		if !ev.Panicked {
			t.Errorf("event %v/%v not marked Panicked", ev.Outcome, ev.Action)
		}
		got = append(got, ev.Outcome.String()+"/"+ev.Action.String())
	}
	if want := []string{"panicked/nack", "panicked/nack", "invalid/dead_letter"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries ended %q, want %q", got, want)
	}
	if want := []string{"invalid: handler_panic: the handler panicked on 3 deliveries"}; !slices.Equal(dlq.reasons, want) {
		t.Errorf("dead letters %q, want %q", dlq.reasons, want)
	}
	log := logs.String()
	if n := strings.Count(log, "level=ERROR"); n != 3 {
		t.Errorf("%d error lines, want one a panic:\n%s", n, log)
	}
	if n := strings.Count(log, "[running]"); n != 1 {
		t.Errorf("%d stacks logged, want the first panic's only:\n%s", n, log)
	}
	if n := strings.Count(log, "message_id=m1"); n != 3 {
		t.Errorf("%d lines name the message, want 3:\n%s", n, log)
	}
	for _, secret := range []string{"9012345678", "482913", "login-1"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds %q, of the message's data:\n%s", secret, log)
		}
	}

	// Once it reached an end, the message's count starts again.
	d.handle(context.Background(), admission.OTP, "sub", &pubsub.Message{ID: "m1", Data: data})
	if ev := obs.evs[len(obs.evs)-1]; ev.Outcome != nack.Panicked {
		t.Errorf("after the dead letter, a delivery of the same message ended %v, want panicked (count 1)", ev.Outcome)
	}
}

// panickyLimiter is a Limiter whose Admit panics for OTP.
type panickyLimiter struct{ fakeLimiter }

func (l *panickyLimiter) Admit(ctx context.Context, class admission.Class, cost int, maxWait time.Duration, claim admission.Claim) (admission.Decision, error) {
	if class == admission.OTP {
		panic("admit")
	}
	return l.fakeLimiter.Admit(ctx, class, cost, maxWait, claim)
}

// TestAPanicWhileAnOTPWaitsLeavesMarketingFree: an OTP waiting for its
// slot holds marketing back; a panic in that wait must let go, or
// marketing would be held for good by an OTP that no longer waits.
func TestAPanicWhileAnOTPWaitsLeavesMarketingFree(t *testing.T) {
	lim := &panickyLimiter{fakeLimiter{dec: admission.Decision{Allowed: true, Source: admission.SourceRedis}}}
	obs := &eventLog{}
	d := unitDispatcher(t, Config{MarketingMaxWait: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)},
		Deps{Limiter: lim, Claims: &fakeClaims{}, Sender: &fakeSender{}, DeadLetter: &fakeDLQ{}, Observer: obs})
	d.handle(context.Background(), admission.OTP, "sub", &pubsub.Message{ID: "m1", Data: []byte(`{"id":"login-1","to":"+819012345678","body":"code 482913"}`)})
	d.handle(context.Background(), admission.Marketing, "sub", &pubsub.Message{ID: "m2", Data: []byte(`{"id":"promo-1","to":"+819012345678","body":"sale"}`)})
	if len(obs.evs) != 2 || obs.evs[0].Outcome != nack.Panicked || obs.evs[1].Outcome != nack.Sent {
		var got []string
		for _, ev := range obs.evs {
			got = append(got, ev.Outcome.String())
		}
		t.Fatalf("outcomes %q, want the OTP panicked and the marketing message sent", got)
	}
}
