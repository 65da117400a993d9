package demo

import (
	"bytes"
	"testing"
	"time"

	"smsdispatcher/admission"
)

// TestPrintDelivery: the report says per class the delivered ratio of the
// final receipts and their p50/p99; nothing when receipts were off.
func TestPrintDelivery(t *testing.T) {
	var out bytes.Buffer
	two := []admission.Class{admission.OTP, admission.Marketing}
	printDelivery(&out, two, map[string]Delivery{
		"otp":       {Finals: 40, Delivered: 38, P50: 1200 * time.Millisecond, P99: 4500 * time.Millisecond},
		"marketing": {},
	})
	want := "  otp       delivered / final receipts 38 / 40 = 0.950, send→receipt p50 / p99 1.2s / 4.5s\n" +
		"  marketing delivered / final receipts none\n"
	if out.String() != want {
		t.Fatalf("printed\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	printDelivery(&out, two, nil)
	if out.Len() != 0 {
		t.Fatalf("receipts off printed %q", out.String())
	}
}
