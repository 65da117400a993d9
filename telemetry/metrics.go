package telemetry

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
)

// Metrics owns the meter provider and the Prometheus registry behind
// /metrics. It is safe for concurrent use.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry

	messages      metric.Int64Counter
	admissionWait metric.Float64Histogram
	otpLatency    metric.Float64Histogram
}

var _ dispatch.Observer = (*Metrics)(nil)

// NewMetrics returns metrics exported on their own Prometheus registry.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	meter := mp.Meter("smsdispatcher")
	m := &Metrics{provider: mp, registry: reg}
	if m.messages, err = meter.Int64Counter("sms.messages",
		metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries handled, by class and outcome.")); err != nil {
		return nil, err
	}
	if m.admissionWait, err = meter.Float64Histogram("sms.admission.wait",
		metric.WithUnit("s"),
		metric.WithDescription("Time a message waited for a send slot."),
		metric.WithExplicitBucketBoundaries(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8)); err != nil {
		return nil, err
	}
	if m.otpLatency, err = meter.Float64Histogram("sms.otp.latency",
		metric.WithUnit("s"),
		metric.WithDescription("Time from an OTP's publication to the provider's acceptance."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)); err != nil {
		return nil, err
	}
	return m, nil
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Meter returns the meter other components register their instruments on.
func (m *Metrics) Meter() metric.Meter { return m.provider.Meter("smsdispatcher") }

// Shutdown flushes and stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// Observe records one delivery's end.
func (m *Metrics) Observe(ev dispatch.Event) {
	ctx := context.Background()
	class := attribute.String("sms.class", ev.Class.String())
	m.messages.Add(ctx, 1, metric.WithAttributes(class,
		attribute.String("sms.outcome", ev.Outcome.String()),
		attribute.String("sms.action", ev.Action.String())))
	if !ev.Admitted.IsZero() {
		m.admissionWait.Record(ctx, ev.Admitted.Sub(ev.Received).Seconds(), metric.WithAttributes(class))
	}
	if ev.Outcome == nack.Sent && ev.Class == admission.OTP && !ev.PublishTime.IsZero() {
		m.otpLatency.Record(ctx, ev.Finished.Sub(ev.PublishTime).Seconds())
	}
}
