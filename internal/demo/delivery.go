package demo

import (
	"fmt"
	"io"
	"time"
)

// Delivery is what the final receipts of one class said during a run.
type Delivery struct {
	Finals, Delivered int64
	// P50 and P99: the time from the provider's acceptance to the final
	// receipt.
	P50, P99 time.Duration
}

// printDelivery writes the delivery lines of the report: per class, the
// delivered ratio and the receipts' p50/p99; none when receipts were off.
func printDelivery(w io.Writer, delivery map[string]Delivery) {
	for _, class := range []string{"otp", "marketing"} {
		d, ok := delivery[class]
		if !ok {
			continue
		}
		if d.Finals == 0 {
			fmt.Fprintf(w, "  %-9s delivered / final receipts none\n", class)
			continue
		}
		fmt.Fprintf(w, "  %-9s delivered / final receipts %d / %d = %.3f, acceptance→receipt p50 / p99 %v / %v\n",
			class, d.Delivered, d.Finals, float64(d.Delivered)/float64(d.Finals), d.P50.Round(time.Millisecond), d.P99.Round(time.Millisecond))
	}
}
