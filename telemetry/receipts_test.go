package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// scrapeText returns what m's /metrics shows.
func scrapeText(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, err := io.ReadAll(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReceiptsAreCounted: receipts count by account, class, status and
// outcome; the time to a final receipt lands in its bucket (half a second
// to an hour); resends count by the account that failed and the reason,
// those dropped past their window by the account;
// an account asking for receipts shows 1 in sms_receipts_enabled.
func TestReceiptsAreCounted(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	m.Receipt("primary", "otp", "delivered", "ok")
	m.Receipt("primary", "otp", "delivered", "ok")
	m.Receipt("primary", "otp", "delivered", "duplicate")
	m.Receipt("primary", "otp", "undelivered", "ok")
	m.Receipt("primary", "", "", "forged")
	m.Delivery("primary", "otp", 3*time.Second)
	m.Delivery("primary", "otp", 45*time.Minute)
	m.Delivery("primary", "otp", -time.Second) // clocks apart: counted at 0
	m.Resend("primary", "undelivered")
	m.ResendLate("primary")
	m.SetState(func() State {
		return State{Accounts: []AccountState{{Name: "primary", Receipts: true}, {Name: "backup"}}}
	})
	body := scrapeText(t, m)
	for _, want := range []string{
		`sms_receipts_total{outcome="ok",sms_account="primary",sms_class="otp",status="delivered"} 2`,
		`sms_receipts_total{outcome="duplicate",sms_account="primary",sms_class="otp",status="delivered"} 1`,
		`sms_receipts_total{outcome="ok",sms_account="primary",sms_class="otp",status="undelivered"} 1`,
		`sms_receipts_total{outcome="forged",sms_account="primary",sms_class="",status=""} 1`,
		`sms_delivery_seconds_bucket{sms_account="primary",sms_class="otp",le="0.5"} 1`,
		`sms_delivery_seconds_bucket{sms_account="primary",sms_class="otp",le="5"} 2`,
		`sms_delivery_seconds_bucket{sms_account="primary",sms_class="otp",le="1800"} 2`,
		`sms_delivery_seconds_bucket{sms_account="primary",sms_class="otp",le="3600"} 3`,
		`sms_delivery_seconds_count{sms_account="primary",sms_class="otp"} 3`,
		`sms_delivery_seconds_sum{sms_account="primary",sms_class="otp"} 2703`,
		`sms_receipt_resends_total{reason="undelivered",sms_account="primary"} 1`,
		`sms_receipt_resends_late_total{sms_account="primary"} 1`,
		`sms_receipts_enabled{sms_account="primary"} 1`,
		`sms_receipts_enabled{sms_account="backup"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}
