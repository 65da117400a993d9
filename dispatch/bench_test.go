package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/ledger"
	"smsdispatcher/provider"
)

// In-memory stand-ins: the benchmark measures the dispatcher's own CPU per
// message (decode, validation, send-once bookkeeping, priority gate,
// outcome table, observer), not the network.
type (
	openLimiter struct{}
	memClaims   struct{}
	nullSender  struct{}
	nullDLQ     struct{}
	nullObs     struct{}
)

var (
	_ Limiter      = openLimiter{}
	_ Claimer      = memClaims{}
	_ Sender       = nullSender{}
	_ DeadLetterer = nullDLQ{}
	_ Observer     = nullObs{}
)

func (openLimiter) Admit(context.Context, admission.Class, int, time.Duration, admission.Claim) (admission.Decision, error) {
	return admission.Decision{Allowed: true, Source: admission.SourceRedis, Tries: 1, Claimed: true}, nil
}
func (openLimiter) Settle(context.Context, admission.Decision, string, admission.SendResult, ledger.Story) error {
	return nil
}
func (openLimiter) Health() admission.Health                             { return admission.Healthy }
func (openLimiter) ReportThrottled(context.Context, time.Duration) error { return nil }
func (openLimiter) ReportAccountFailure(context.Context, time.Duration, string) error {
	return nil
}
func (openLimiter) ResumeAccount(context.Context) error { return nil }
func (openLimiter) CheckPause(context.Context) (string, time.Duration, bool) {
	return "", 0, false
}
func (openLimiter) AccountPause() (string, time.Duration, bool) {
	return "", 0, false
}
func (memClaims) Finish(context.Context, string, string) error { return nil }
func (memClaims) Claim(context.Context, string, string, time.Duration) (ledger.Record, error) {
	return ledger.Record{}, nil
}
func (memClaims) Refuse(context.Context, string, string) error  { return nil }
func (memClaims) Release(context.Context, string, string) error { return nil }
func (nullSender) Send(context.Context, provider.Message) (provider.Receipt, error) {
	return provider.Receipt{}, nil
}
func (nullDLQ) DeadLetter(context.Context, *pubsub.Message, admission.Class, string) error {
	return nil
}
func (nullObs) Observe(Event) {}

// BenchmarkHandle is the per-message CPU cost of the pipeline without the
// network (Redis, provider and Pub/Sub are in-memory stand-ins):
//
//	go test -run '^$' -bench Handle -benchmem ./dispatch/
func BenchmarkHandle(b *testing.B) {
	for _, class := range []admission.Class{admission.OTP, admission.Marketing} {
		b.Run(class.String(), func(b *testing.B) {
			d, err := New(Config{}, Deps{
				OTP: &pubsub.Subscriber{}, Marketing: &pubsub.Subscriber{},
				Limiter: openLimiter{}, Claims: memClaims{}, Sender: nullSender{},
				DeadLetter: nullDLQ{}, Observer: nullObs{},
			})
			if err != nil {
				b.Fatal(err)
			}
			d.hard = context.Background()
			datas := make([][]byte, 1024)
			for i := range datas {
				datas[i] = fmt.Appendf(nil, `{"id":"login-%d","to":"+819012345678","body":"Your code is %06d","deadline":"2099-01-01T00:00:00Z"}`, i, i)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				d.handle(ctx, class, "sub", &pubsub.Message{ID: "m", Data: datas[i%len(datas)]})
			}
		})
	}
}
