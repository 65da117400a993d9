// Package telemetry sets up OpenTelemetry metrics (exported to Prometheus on
// /metrics) and turns the dispatcher's events into them.
//
// Invariant: telemetry observes and decides nothing; no attribute or label
// ever holds a phone number, a message body or a token.
package telemetry
