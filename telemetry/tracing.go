package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/provider"
)

// Attribute keys of this service (the rest are OTel semantic conventions).
const (
	AttrClass      = attribute.Key("sms.class")
	AttrAccount    = attribute.Key("sms.account") // the provider account that admitted the message (the class's home when none did)
	AttrSender     = attribute.Key("sms.sender")  // the sender of the account's pool it went From
	AttrOutcome    = attribute.Key("sms.outcome")
	AttrAction     = attribute.Key("sms.action")
	AttrID         = attribute.Key("sms.id") // the idempotency key: never a phone number
	AttrDecision   = attribute.Key("sms.admission.decision")
	AttrSource     = attribute.Key("sms.admission.source")
	AttrReason     = attribute.Key("sms.admission.reason")
	AttrWait       = attribute.Key("sms.admission.wait_ms")
	AttrTries      = attribute.Key("sms.admission.tries")
	AttrRetryAfter = attribute.Key("sms.admission.retry_after_ms")

	// Of the provider span, read from the answer's body by the adapter.
	AttrProviderOutcome   = attribute.Key("sms.provider.outcome")    // accepted, throttled, refused, account_failure, temporary
	AttrProviderMessageID = attribute.Key("sms.provider.message_id") // Twilio's sid, Vonage's message-id
	AttrProviderCode      = attribute.Key("sms.provider.error_code") // Twilio's code, Vonage's status
	AttrSegments          = attribute.Key("sms.segments")
	AttrSpanResendReason  = attribute.Key("sms.resend_reason") // a resend's: the original's final status and error code
	AttrSuppressedBy      = attribute.Key("sms.suppressed_by") // a suppressed message's: the source of the list's entry that stopped it
)

// Tracing owns the tracer provider and the W3C propagator. The zero value
// is not usable; a Tracing from SetupTracing is safe for concurrent use.
type Tracing struct {
	tp         *sdktrace.TracerProvider // nil when traces are off
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

var _ dispatch.Tracer = (*Tracing)(nil)

// A TracingOption configures SetupTracing.
type TracingOption func(*tracingOptions)

type tracingOptions struct {
	exporter sdktrace.SpanExporter
	sync     bool
	console  io.Writer // where OTEL_TRACES_EXPORTER=console writes; default os.Stdout
}

// WithConsole makes OTEL_TRACES_EXPORTER=console write to w.
func WithConsole(w io.Writer) TracingOption {
	return func(o *tracingOptions) { o.console = w }
}

// WithSpanExporter exports to e instead of what the environment says, each
// span as it ends (tests use an in-memory exporter).
func WithSpanExporter(e sdktrace.SpanExporter) TracingOption {
	return func(o *tracingOptions) { o.exporter, o.sync = e, true }
}

// SetupTracing builds tracing from the OpenTelemetry SDK's standard
// variables, read through getenv: OTEL_TRACES_EXPORTER (otlp, console or
// none; when unset, otlp if OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, none otherwise),
// OTEL_SERVICE_NAME (default sms-dispatcher), OTEL_RESOURCE_ATTRIBUTES and
// OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG.
func SetupTracing(ctx context.Context, getenv func(string) string, opts ...TracingOption) (*Tracing, error) {
	o := tracingOptions{console: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	t := &Tracing{
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		tracer:     noop.NewTracerProvider().Tracer(""),
	}
	if o.exporter == nil {
		var err error
		switch exp := getenv("OTEL_TRACES_EXPORTER"); {
		case exp == "none":
			return t, nil
		case exp == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "":
			return t, nil
		case exp == "console":
			// The SDK's stdout exporter, as autoexport would pick; named
			// here so that getenv (not only the process environment)
			// can choose it.
			o.exporter, err = stdouttrace.New(stdouttrace.WithWriter(o.console))
		default: // otlp, with the SDK's OTEL_EXPORTER_OTLP_* variables
			o.exporter, err = autoexport.NewSpanExporter(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("trace exporter: %w", err)
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("sms-dispatcher")),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	export := sdktrace.WithBatcher(o.exporter)
	if o.sync {
		export = sdktrace.WithSyncer(o.exporter)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER: the SDK reads it itself.
	t.tp = sdktrace.NewTracerProvider(export, sdktrace.WithResource(res))
	t.tracer = t.tp.Tracer("smsdispatcher")
	return t, nil
}

// Shutdown flushes and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Inject writes ctx's trace context into message attributes (W3C
// traceparent), as a producer does when it publishes.
func (t *Tracing) Inject(ctx context.Context, attrs map[string]string) {
	t.propagator.Inject(ctx, propagation.MapCarrier(attrs))
}

// StartPublish starts a producer span for a message to topic.
func (t *Tracing) StartPublish(ctx context.Context, topic string) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "send "+topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemGCPPubSub, semconv.MessagingDestinationName(topic),
			semconv.MessagingOperationTypeSend))
}

// Delivery starts the consumer span of one delivery. Its parent is the
// producer's span when the message carries a traceparent (and it links to
// it), so one trace shows publish, every delivery and every provider call.
func (t *Tracing) Delivery(ctx context.Context, subscription string, m *pubsub.Message, class admission.Class) (context.Context, func(dispatch.Event)) {
	producer := trace.SpanContextFromContext(t.propagator.Extract(ctx, propagation.MapCarrier(m.Attributes)))
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemGCPPubSub,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationSubscriptionName(subscription),
		semconv.MessagingMessageID(m.ID),
		AttrClass.String(class.String()),
	}
	if m.DeliveryAttempt != nil {
		attrs = append(attrs, semconv.MessagingGCPPubSubMessageDeliveryAttempt(*m.DeliveryAttempt))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if producer.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, producer)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: producer}))
	}
	ctx, span := t.tracer.Start(ctx, "process "+subscription, opts...)
	return ctx, func(ev dispatch.Event) {
		span.SetAttributes(AttrOutcome.String(ev.Outcome.String()), AttrAction.String(ev.Action.String()))
		if ev.Account != "" {
			span.SetAttributes(AttrAccount.String(ev.Account))
		}
		if ev.Sender != "" {
			span.SetAttributes(AttrSender.String(ev.Sender)) // the business's own number, never a recipient's
		}
		if ev.ID != "" {
			span.SetAttributes(AttrID.String(ev.ID))
		}
		if ev.Segments > 0 {
			span.SetAttributes(AttrSegments.Int(ev.Segments))
		}
		if ev.ProviderID != "" {
			span.SetAttributes(AttrProviderMessageID.String(ev.ProviderID))
		}
		if ev.ResendReason != "" {
			span.SetAttributes(AttrSpanResendReason.String(ev.ResendReason))
		}
		if ev.SuppressedBy != "" {
			span.SetAttributes(AttrSuppressedBy.String(ev.SuppressedBy))
		}
		if ev.Err != nil && ev.Outcome.String() != "sent" {
			span.SetStatus(codes.Error, ev.Outcome.String())
		}
		span.End()
	}
}

// Admission starts the admission child span.
func (t *Tracing) Admission(ctx context.Context, class admission.Class) (context.Context, func(admission.Decision, time.Duration)) {
	ctx, span := t.tracer.Start(ctx, "admission", trace.WithAttributes(AttrClass.String(class.String())))
	return ctx, func(d admission.Decision, wait time.Duration) {
		decision := "denied"
		if d.Allowed {
			decision = "allowed"
		}
		span.SetAttributes(AttrDecision.String(decision), AttrSource.String(string(d.Source)),
			AttrWait.Float64(float64(wait)/float64(time.Millisecond)), AttrTries.Int(d.Tries))
		if !d.Allowed {
			span.SetAttributes(AttrReason.String(string(d.Reason)),
				AttrRetryAfter.Float64(float64(d.RetryAfter)/float64(time.Millisecond)))
		}
		span.End()
	}
}

// Transport wraps base (http.DefaultTransport if nil) so that each provider
// request is an HTTP client span with http.request.method,
// http.response.status_code, server.address and, on a re-send,
// http.request.resend_count; it carries the W3C trace context to the
// provider and records the request duration in m (if not nil). URLs are
// recorded without query or credentials.
func (t *Tracing) Transport(base http.RoundTripper, m *Metrics) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{t: t, base: base, m: m}
}

type transport struct {
	t    *Tracing
	base http.RoundTripper
	m    *Metrics
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(req.Method),
		semconv.ServerAddress(req.URL.Hostname()),
		semconv.URLFull((&url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host, Path: req.URL.Path}).String()),
	}
	if p, err := strconv.Atoi(req.URL.Port()); err == nil {
		attrs = append(attrs, semconv.ServerPort(p))
	}
	if n, ok := provider.ResendCount(req.Context()); ok {
		attrs = append(attrs, semconv.HTTPRequestResendCount(n))
	}
	ctx, span := tr.t.tracer.Start(req.Context(), req.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	req = req.Clone(ctx)
	tr.t.propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))

	start := time.Now()
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeOther)
		span.SetStatus(codes.Error, "request failed")
		span.End()
		if tr.m != nil {
			tr.m.recordProvider(ctx, time.Since(start), 0, false)
		}
		return resp, err
	}
	// The span ends when the adapter closes the body, having read in it
	// what the answer meant (a Vonage throttle is HTTP 200).
	resp.Body = &answerBody{ReadCloser: resp.Body, end: func() {
		status := resp.StatusCode
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		throttled := false
		if rep := provider.ReportOf(req.Context()); rep != nil && rep.Filled {
			outcome := "accepted"
			if rep.Err != nil {
				outcome = rep.Err.Meaning().String()
				throttled = rep.Err.Throttled()
				if rep.Err.Code != "" {
					span.SetAttributes(AttrProviderCode.String(rep.Err.Code))
				}
			}
			span.SetAttributes(AttrProviderOutcome.String(outcome))
			if rep.Receipt.ID != "" {
				span.SetAttributes(AttrProviderMessageID.String(rep.Receipt.ID))
			}
		}
		switch {
		case throttled:
			span.SetAttributes(semconv.ErrorTypeKey.String("429"))
			span.SetStatus(codes.Error, "throttled")
		case status >= 400:
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		}
		span.End()
		if tr.m != nil {
			tr.m.recordProvider(ctx, time.Since(start), status, throttled)
		}
	}}
	return resp, nil
}

// answerBody ends the provider span once, when the answer is closed.
type answerBody struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *answerBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}
