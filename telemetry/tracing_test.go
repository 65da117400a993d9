package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

type eventChan chan dispatch.Event

func (c eventChan) Observe(ev dispatch.Event) { c <- ev }

// TestResendCountAppearsOnTheSecondProviderSpan sends one message through
// the real pipeline against a provider that answers 503 once: the second
// provider span carries http.request.resend_count=1, the first none; every
// span belongs to the producer's trace; no phone number or token shows.
func TestResendCountAppearsOnTheSecondProviderSpan(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tr, err := SetupTracing(ctx, func(string) string { return "" }, WithSpanExporter(spans))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(ctx)

	ps := pstest.NewServer()
	defer ps.Close()
	c, err := pubsub.NewClient(ctx, "p", option.WithEndpoint(ps.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Each lane its own topic: a message on both would race between them.
	for _, topic := range []string{"sms-otp", "sms-marketing"} {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/p/topics/" + topic}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
			Name: "projects/p/subscriptions/" + topic + "-dispatcher", Topic: "projects/p/topics/" + topic}); err != nil {
			t.Fatal(err)
		}
	}

	var answered atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answered.Add(1) == 1 { // the first attempt only
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		providertest.NewGeneric(providertest.Config{}).ServeHTTP(w, r)
	}))
	defer srv.Close()

	rdb := redistest.Client(t)
	account := redistest.UniqueAccount(t)
	lim, err := admission.New(rdb, admission.Config{Account: account, RedisTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sender, err := provider.NewClient(srv.URL, "tok-secret", provider.WithTransportWrapper(func(rt http.RoundTripper) http.RoundTripper {
		return tr.Transport(rt, nil)
	}))
	if err != nil {
		t.Fatal(err)
	}
	events := make(eventChan, 16)
	dlq := c.Publisher("sms-dead-letter")
	defer dlq.Stop()
	d, err := dispatch.New(dispatch.Config{}, dispatch.Deps{
		OTP: c.Subscriber("sms-otp-dispatcher"), Marketing: c.Subscriber("sms-marketing-dispatcher"),
		Limiter: lim, Claims: lim.Claims(), Sender: sender,
		DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: events, Tracer: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	// Publish as a producer does: inside a producer span, traceparent in
	// the attributes.
	pctx, pspan := tr.StartPublish(ctx, "sms-otp")
	attrs := map[string]string{}
	tr.Inject(pctx, attrs)
	data, _ := json.Marshal(map[string]string{"id": "login-42", "to": "+819012345678", "body": "Your code is 482913"})
	pub := c.Publisher("sms-otp")
	defer pub.Stop()
	if _, err := pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs}).Get(ctx); err != nil {
		t.Fatal(err)
	}
	pspan.End()
	traceID := pspan.SpanContext().TraceID()

	timeout := time.After(30 * time.Second)
	for sent := false; !sent; {
		select {
		case ev := <-events:
			sent = ev.Outcome == nack.Sent
		case <-timeout:
			t.Fatal("the message was not sent within 30s")
		}
	}
	stop()
	<-done

	var posts []sdktrace.ReadOnlySpan
	names := map[string]int{}
	for _, s := range spans.GetSpans().Snapshots() {
		names[s.Name()]++
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is not in the producer's trace", s.Name())
		}
		for _, a := range s.Attributes() {
			if v := a.Value.Emit(); strings.Contains(v, "9012345678") || strings.Contains(v, "tok-secret") || strings.Contains(v, "482913") {
				t.Errorf("span %q attribute %s holds a phone number, token or body: %q", s.Name(), a.Key, v)
			}
		}
		if s.Name() == "POST" {
			posts = append(posts, s)
		}
	}
	if names["process sms-otp-dispatcher"] != 2 || names["admission"] != 2 {
		t.Errorf("spans %v: want two deliveries, each with an admission span", names)
	}
	if len(posts) != 2 {
		t.Fatalf("%d provider spans, want 2 (a 503 then a 2xx)", len(posts))
	}
	if n, ok := attr(posts[0], "http.request.resend_count"); ok {
		t.Errorf("first provider span has resend_count %v, want none", n)
	}
	if n, ok := attr(posts[1], "http.request.resend_count"); !ok || n.AsInt64() != 1 {
		t.Errorf("second provider span resend_count = %v (present %v), want 1", n.Emit(), ok)
	}
	for i, want := range []int64{503, 200} {
		if v, _ := attr(posts[i], "http.response.status_code"); v.AsInt64() != want {
			t.Errorf("provider span %d status %v, want %d", i, v.Emit(), want)
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}
