package status

import (
	"fmt"
	"text/tabwriter"
	"time"
)

// DeliveryWindow is how far back the report's delivery part reads the
// final receipts.
const DeliveryWindow = 5 * time.Minute

// Delivery is an account's final receipts of one class over the last
// DeliveryWindow (part of the `status --json` contract).
type Delivery struct {
	Finals    int64 `json:"finals"`
	Delivered int64 `json:"delivered"`
	// DeliveredRatio is Delivered / Finals; null with no finals.
	DeliveredRatio *float64 `json:"delivered_ratio"`
	// P50Seconds and P99Seconds are the quantiles of the time from the
	// send (its admitted slot) to the delivered receipt's arrival, over the
	// delivered messages, each the upper bound of its bucket
	// (admission.DeliveryBuckets); 0 with none delivered.
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// deliveryOf is the Delivery of finals final receipts, delivered of them
// delivered, taking p50 and p99.
func deliveryOf(finals, delivered int64, p50, p99 time.Duration) *Delivery {
	d := &Delivery{Finals: finals, Delivered: delivered, P50Seconds: p50.Seconds(), P99Seconds: p99.Seconds()}
	if finals > 0 {
		ratio := float64(delivered) / float64(finals)
		d.DeliveredRatio = &ratio
	}
	return d
}

// text says d in a line.
func (d *Delivery) text() string {
	if d.DeliveredRatio == nil {
		return "no final receipts"
	}
	return fmt.Sprintf("%d finals, %.1f%% delivered, p50 %.1f s, p99 %.1f s", d.Finals, 100**d.DeliveredRatio, d.P50Seconds, d.P99Seconds)
}

// writeDelivery prints a's delivery part, when the report read one.
func (a Account) writeDelivery(tw *tabwriter.Writer) {
	if a.Delivery == nil {
		return
	}
	for _, class := range a.Classes {
		if d, ok := a.Delivery[class]; ok {
			fmt.Fprintf(tw, "  delivery %s (last %s)\t%s\n", class, shortMinutes(DeliveryWindow), d.text())
		}
	}
}

// shortMinutes says a whole number of minutes as "5 min".
func shortMinutes(d time.Duration) string { return fmt.Sprintf("%d min", int(d/time.Minute)) }
