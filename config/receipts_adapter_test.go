package config

import (
	"testing"

	"smsdispatcher/receipts"
)

// TestReceiptsURLIsTheListenersPath: the URL the adapters are told (and
// whose length is checked for Vonage) is the one the receipts' listener
// verifies against.
func TestReceiptsURLIsTheListenersPath(t *testing.T) {
	p := Process{ReceiptsAddr: ":8443", ReceiptsPublicURL: "https://r.example.com/base"}
	for _, account := range []string{"otp", "bulk-2", "a.b_c"} {
		if got, want := p.ReceiptsURL(account), receipts.CallbackURL(p.ReceiptsPublicURL, account); got != want {
			t.Errorf("ReceiptsURL(%q) = %q, the listener verifies %q", account, got, want)
		}
	}
	if len(p.ReceiptOptions(Account{Name: "otp"})) != 1 {
		t.Error("receipts on: want the status callback option")
	}
	if len((Process{}).ReceiptOptions(Account{Name: "otp"})) != 0 {
		t.Error("receipts off: want no option")
	}
}
