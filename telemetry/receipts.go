package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"smsdispatcher/receipts"
)

var _ receipts.Metrics = (*Metrics)(nil)

// Names of the delivery receipts' instruments (Prometheus forms beside
// them) and their attributes.
const (
	MetricReceipts        = "sms.receipts"             // sms_receipts_total
	MetricDelivery        = "sms.delivery"             // sms_delivery_seconds
	MetricReceiptResends  = "sms.receipt_resends"      // sms_receipt_resends_total
	MetricResendsLate     = "sms.receipt_resends_late" // sms_receipt_resends_late_total
	MetricReceiptsEnabled = "sms.receipts.enabled"     // sms_receipts_enabled

	// AttrReceiptStatus is the delivery status a receipt left its message
	// in (one of provider.DeliveryStatus's names); "" when the receipt
	// was not read (forged, malformed, too large).
	AttrReceiptStatus = attribute.Key("status")
	// AttrReceiptOutcome is what handling a receipt came to: ok,
	// duplicate, unknown, forged, malformed, too_large, error.
	AttrReceiptOutcome = attribute.Key("outcome")
	// AttrResendReason is the final status that made a first-class
	// message be sent once more (undelivered, failed, expired, rejected).
	AttrResendReason = attribute.Key("reason")
)

// deliveryBounds are sms_delivery_seconds's buckets: a receipt comes
// half a second to an hour after the provider took the message (carriers
// hold a message for an unreachable phone for hours; past an hour only
// the count matters).
var deliveryBounds = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600}

// receiptInstruments are the receipts' instruments, part of Metrics.
type receiptInstruments struct {
	receipts metric.Int64Counter
	delivery metric.Float64Histogram
	resends  metric.Int64Counter
	late     metric.Int64Counter
}

// newReceiptInstruments creates the receipts' instruments on meter.
func newReceiptInstruments(meter metric.Meter) (receiptInstruments, error) {
	var ri receiptInstruments
	var err error
	if ri.receipts, err = meter.Int64Counter(MetricReceipts, metric.WithUnit("{receipt}"),
		metric.WithDescription("Delivery receipts received, by account, class, the status they left the message in and the outcome (ok, duplicate, unknown, forged, malformed, too_large, error).")); err != nil {
		return ri, err
	}
	if ri.delivery, err = meter.Float64Histogram(MetricDelivery, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(deliveryBounds...),
		metric.WithDescription("Time from the provider's acceptance of a message to its final receipt, by account and class.")); err != nil {
		return ri, err
	}
	ri.resends, err = meter.Int64Counter(MetricReceiptResends, metric.WithUnit("{message}"),
		metric.WithDescription("First-class messages sent once more through the next account after a final receipt said they did not arrive, by the account that failed and the status (reason)."))
	if err != nil {
		return ri, err
	}
	ri.late, err = meter.Int64Counter(MetricResendsLate, metric.WithUnit("{message}"),
		metric.WithDescription("Resends dropped unsent, by the account that failed: their window (the message's deadline, or 5 minutes from its acceptance) had passed when they were handed out."))
	return ri, err
}

// Receipt counts one delivery receipt of account: the class of its
// message ("" when unknown), the status it left the message in ("" when
// unread) and the outcome of its handling.
func (m *Metrics) Receipt(account, class, status, outcome string) {
	m.receipts.Add(context.Background(), 1, metric.WithAttributes(AttrAccount.String(account), AttrClass.String(class),
		AttrReceiptStatus.String(status), AttrReceiptOutcome.String(outcome)))
}

// Delivery records the time from the provider's acceptance of a message
// of class on account to its final receipt.
func (m *Metrics) Delivery(account, class string, d time.Duration) {
	m.delivery.Record(context.Background(), max(d, 0).Seconds(), metric.WithAttributes(AttrAccount.String(account), AttrClass.String(class)))
}

// Resend counts a first-class message sent once more because its final
// receipt on account said reason (the final status).
func (m *Metrics) Resend(account, reason string) {
	m.resends.Add(context.Background(), 1, metric.WithAttributes(AttrAccount.String(account), AttrResendReason.String(reason)))
}

// ResendLate counts a resend of a message that account failed to deliver,
// dropped because its window had passed.
func (m *Metrics) ResendLate(account string) {
	m.late.Add(context.Background(), 1, metric.WithAttributes(AttrAccount.String(account)))
}
