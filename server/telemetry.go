package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"smsdispatcher/provider"
	"smsdispatcher/telemetry"
)

// Telemetry is a process's tracing and metrics.
type Telemetry struct {
	Tracing *telemetry.Tracing
	Metrics *telemetry.Metrics
}

// NewTelemetry sets up the tracing the OTEL_* variables of getenv ask for
// and the metrics; Shutdown flushes and stops both.
func NewTelemetry(ctx context.Context, getenv func(string) string) (*Telemetry, error) {
	tr, err := telemetry.SetupTracing(ctx, getenv)
	if err != nil {
		return nil, err
	}
	m, err := telemetry.NewMetrics()
	if err != nil {
		tr.Shutdown(ctx)
		return nil, err
	}
	return &Telemetry{Tracing: tr, Metrics: m}, nil
}

// Shutdown flushes the traces and stops the metrics, waiting 5 s at most,
// and logs what failed.
func (t *Telemetry) Shutdown(ctx context.Context, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := t.Tracing.Shutdown(ctx); err != nil {
		logger.Warn("trace exporter shutdown", "err", err)
	}
	if err := t.Metrics.Shutdown(ctx); err != nil {
		logger.Warn("metrics shutdown", "err", err)
	}
}

// ProviderOptions are the options of a provider adapter whose requests t
// traces and counts (config.Account.Sender); none when t is nil.
func (t *Telemetry) ProviderOptions() []provider.Option {
	if t == nil {
		return nil
	}
	return []provider.Option{provider.WithTransportWrapper(func(rt http.RoundTripper) http.RoundTripper {
		return t.Tracing.Transport(rt, t.Metrics)
	})}
}
