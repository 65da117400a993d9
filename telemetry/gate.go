package telemetry

// The counters of what decides whether a message may go at all: the
// suppression list and its inbound replies, the send windows' deferral
// store, and the pumping guard. Their instruments are made in NewMetrics
// with the others.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"smsdispatcher/dispatch"
)

// Expired counts a deferred message of class whose deadline came before
// its release (deferral.Store.Expired).
func (m *Metrics) Expired(class string) {
	m.expired.Add(context.Background(), 1, metric.WithAttributes(AttrClass.String(class)))
}

// Verification counts one verification read (guard.VerificationCounts):
// known in class, or unknown when class is "".
func (m *Metrics) Verification(class string) {
	if class == "" {
		m.verifications.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", "unknown")))
		return
	}
	m.verifications.Add(context.Background(), 1, metric.WithAttributes(attribute.String("result", "known"), AttrClass.String(class)))
}

// GuardSent counts a send of class to number to that the guard counted in
// its ranges (guard.Options.Counted): by its country code, never the
// number.
func (m *Metrics) GuardSent(class, to string) {
	m.guardSends.Add(context.Background(), 1, metric.WithAttributes(AttrClass.String(class), AttrCountry.String(dispatch.CountryCode(to))))
}

// SuppressionChange counts a change this process made to the
// suppression list, through account (the account the reply came to, or
// whose send the provider refused): the account is what joins an opt-out
// to the sends it answers (SMSOptOutSpike), a STOP naming no message.
func (m *Metrics) SuppressionChange(source, action, account string) {
	m.listChanges.Add(context.Background(), 1, metric.WithAttributes(AttrListSource.String(source), AttrListAction.String(action), AttrAccount.String(account)))
}

// Suppressed counts a message of class the suppression list stopped
// after its send: a receipt that said its recipient opted out (Vonage's
// err-code 9) settled it suppressed. Those stopped before the send are
// counted with their delivery (Observe).
func (m *Metrics) Suppressed(class, source string) {
	m.suppressed.Add(context.Background(), 1, metric.WithAttributes(AttrClass.String(class), AttrListSource.String(source)))
}

// Inbound counts a verified inbound reply through account.
func (m *Metrics) Inbound(account, keyword, outcome string) {
	m.inbound.Add(context.Background(), 1, metric.WithAttributes(AttrAccount.String(account), AttrInboundKeyword.String(keyword), AttrInboundOutcome.String(outcome)))
}
