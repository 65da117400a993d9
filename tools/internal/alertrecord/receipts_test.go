package alertrecord

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReceiptDriverCountsWhatTheProviderAccepted: each send the provider
// accepts (a 2xx; a 429 is not) is followed by a sent receipt and a final
// one, of the class its id names, 1 in failEvery undelivered; a filtered
// OTP route fails every failOTP-th OTP; an unregistered sender fails
// every marketing message; while forged, every receipt counts
// forged with nothing read. What the recording takes of it is the
// receipts' families only, as pod "receipts".
func TestReceiptDriverCountsWhatTheProviderAccepted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d, err := startReceiptDriver(ctx, "acct", receiptPlan{failEvery: 2, failMarketing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); d.Close() }()
	answer := http.StatusOK
	h := d.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(answer) }))
	send := func(id string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/send", strings.NewReader(`{"to":"+819012345678","body":"b","client_ref":"`+id+`"}`))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	for _, id := range []string{"r-otp-0", "r-otp-1", "r-mkt-0", "r-otp-2"} {
		send(id)
	}
	answer = http.StatusTooManyRequests
	send("r-otp-3")
	later := time.Now().Add(time.Minute)
	d.countDue(later)

	d.failOTP.Store(3)
	answer = http.StatusOK
	for _, id := range []string{"r-otp-4", "r-otp-5", "r-otp-6"} { // finals 4, 5, 6 of otp
		send(id)
	}
	d.countDue(later.Add(time.Minute))

	d.forged.Store(true)
	send("r-mkt-1")
	d.countDue(later.Add(2 * time.Minute))

	rec := &recording{run: alertRun{name: "unit"}, pods: 1, series: map[string]*recSeries{}}
	if err := rec.scrape(ctx, 0, []target{{addr: d.addr, pod: "receipts", families: receiptFamilies}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for k, s := range rec.series {
		got[k] = s.values[0]
	}
	want := map[string]float64{
		`sms_receipts_total{outcome="ok",pod="receipts",sms_account="acct",sms_class="otp",status="sent"}`:              6,
		`sms_receipts_total{outcome="ok",pod="receipts",sms_account="acct",sms_class="otp",status="delivered"}`:         3, // finals 1, 3, 5
		`sms_receipts_total{outcome="ok",pod="receipts",sms_account="acct",sms_class="otp",status="undelivered"}`:       3, // 2 (1 in 2), 4 (1 in 2), 6 (1 in 3)
		`sms_receipts_total{outcome="ok",pod="receipts",sms_account="acct",sms_class="marketing",status="sent"}`:        1,
		`sms_receipts_total{outcome="ok",pod="receipts",sms_account="acct",sms_class="marketing",status="undelivered"}`: 1, // every marketing final
		`sms_receipts_total{outcome="forged",pod="receipts",sms_account="acct",sms_class="",status=""}`:                 2,
		`sms_receipts_enabled{pod="receipts",sms_account="acct"}`:                                                       1,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("recorded %d series, want %d: %v", len(got), len(want), got)
	}
}
