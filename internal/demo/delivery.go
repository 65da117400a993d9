package demo

import (
	"fmt"
	"io"
	"time"

	"smsdispatcher/admission"
)

// Delivery is what the final receipts of one class said during a run.
type Delivery struct {
	Finals, Delivered int64
	// P50 and P99: the time from the provider's acceptance to the final
	// receipt.
	P50, P99 time.Duration
}

// printDelivery writes the delivery lines of the report: per class of
// classes (in their order), the delivered ratio and the receipts'
// p50/p99; none when receipts were off.
func printDelivery(w io.Writer, classes []admission.Class, delivery map[string]Delivery) {
	width := len("marketing")
	for _, c := range classes {
		width = max(width, len(c))
	}
	for _, c := range classes {
		class := c.String()
		d, ok := delivery[class]
		if !ok {
			continue
		}
		if d.Finals == 0 {
			fmt.Fprintf(w, "  %-*s delivered / final receipts none\n", width, class)
			continue
		}
		fmt.Fprintf(w, "  %-*s delivered / final receipts %d / %d = %.3f, send→receipt p50 / p99 %v / %v\n",
			width, class, d.Delivered, d.Finals, float64(d.Delivered)/float64(d.Finals), d.P50.Round(time.Millisecond), d.P99.Round(time.Millisecond))
	}
}
