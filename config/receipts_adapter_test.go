package config

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"smsdispatcher/dispatch"
	"smsdispatcher/provider"
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

// TestEveryValidNameReachesItsReceipts posts a receipt to the path of
// every account name of one or two printable ASCII characters, and of
// names a router might clean: each name validAccount takes reaches its
// account's reader (403, the receipt unsigned) through the listener's own
// router, never a redirect or a 404; . and .. are refused.
func TestEveryValidNameReachesItsReceipts(t *testing.T) {
	names := []string{"...", ".a", "a.", "%2e", "%2E%2E", "a%2Fb", "a;b", "a,b"}
	for b := byte(0x21); b <= 0x7e; b++ {
		names = append(names, string(b), string(b)+".", "."+string(b))
	}
	p := Process{ReceiptsAddr: ":8443", ReceiptsPublicURL: "https://r.example.com/base"}
	reader, err := provider.NewClient("https://sms.example.com", "tok") // no receipt secret: every receipt is forged
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for _, name := range names {
		if !validAccount(name) {
			continue
		}
		taken++
		srv, err := receipts.New(receipts.Config{
			PublicURL: p.ReceiptsPublicURL,
			Accounts:  []receipts.Account{{Name: name, Reader: reader, Ledger: noLedger{}}},
			Status:    noPublisher{}, Resend: noPublisher{}, Deadline: dispatch.PayloadDeadline,
		})
		if err != nil {
			t.Fatalf("account %q: %v", name, err)
		}
		u, err := url.Parse(p.ReceiptsURL(name))
		if err != nil {
			t.Fatalf("account %q: %v", name, err)
		}
		req := httptest.NewRequest(http.MethodPost, "http://10.0.0.7:8081/", strings.NewReader("{}"))
		req.URL.Path, req.URL.RawPath = strings.TrimPrefix(u.Path, "/base"), strings.TrimPrefix(u.EscapedPath(), "/base")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		if w.Code != http.StatusForbidden {
			t.Errorf("account %q: its receipts path %s answered %d, want 403 from its reader", name, req.URL.EscapedPath(), w.Code)
		}
	}
	if taken == 0 {
		t.Fatal("no name taken")
	}
	for _, name := range []string{".", ".."} {
		if validAccount(name) {
			t.Errorf("account %q taken: a router redirects its receipts path", name)
		}
	}
}

// noLedger and noPublisher are never reached (a receipt that does not
// verify stops before them): a call would panic on the nil interface.
type (
	noLedger    struct{ receipts.Ledger }
	noPublisher struct{ receipts.Publisher }
)
