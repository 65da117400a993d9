package receipts

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestReceiptAnswers posts each kind of receipt and checks the answer,
// what was counted, and whether the reader and the ledger were reached:
// nothing but a verified receipt reaches the ledger.
func TestReceiptAnswers(t *testing.T) {
	padded := "pid-1 delivered" + strings.Repeat(" ", MaxBodyBytes-len("pid-1 delivered"))
	tests := []struct {
		name      string
		method    string
		path      string // "" the account's
		body      string
		signed    bool
		ledgerErr error
		want      int
		metric    string // "" none
		reads     int
		folds     int
	}{
		{"delivered", "POST", "", "pid-1 delivered", true, nil, 200, "receipt acct otp delivered ok", 1, 1},
		{"intermediate", "POST", "", "pid-1 buffered", true, nil, 200, "receipt acct otp buffered ok", 1, 1},
		{"duplicate", "POST", "", "pid-1 sent", true, nil, 200, "receipt acct otp sent duplicate", 1, 1},
		{"unknown id", "POST", "", "pid-9 delivered", true, nil, 200, "receipt acct  delivered unknown", 1, 1 + len(earlyWaits)},
		{"body of the largest size", "POST", "", padded, true, nil, 200, "receipt acct otp delivered ok", 1, 1},
		{"body too large", "POST", "", padded + " ", true, nil, 413, "receipt acct   too_large", 0, 0},
		{"forged", "POST", "", "pid-1 delivered", false, nil, 403, "receipt acct   forged", 1, 0},
		{"malformed", "POST", "", "pid-1", true, nil, 400, "receipt acct   malformed", 1, 0},
		{"redis error", "POST", "", "pid-1 delivered", true, errors.New("redis: down"), 503, "receipt acct  delivered error", 1, 1},
		{"unknown account", "POST", "/v1/receipts/other", "pid-1 delivered", true, nil, 404, "", 0, 0},
		{"no account", "POST", "/v1/receipts/", "pid-1 delivered", true, nil, 404, "", 0, 0},
		{"another path", "POST", "/v1/status/acct", "pid-1 delivered", true, nil, 404, "", 0, 0},
		{"GET", "GET", "", "", false, nil, 405, "", 0, 0},
		{"PUT", "PUT", "", "pid-1 delivered", true, nil, 405, "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t)
				r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
				r.ledger.err = tt.ledgerErr
				path := tt.path
				if path == "" {
					path = "/v1/receipts/acct"
				}
				req := httptest.NewRequest(tt.method, "http://10.0.0.7:8081"+path, strings.NewReader(tt.body))
				if tt.signed {
					req.Header.Set("X-Test-Signature", testSign(r.reader.secret, CallbackURL(testPublicURL, "acct"), []byte(tt.body)))
				}
				w := httptest.NewRecorder()
				r.srv.Handler().ServeHTTP(w, req)
				if w.Code != tt.want {
					t.Errorf("answer %d, want %d", w.Code, tt.want)
				}
				var want []string
				if tt.metric != "" {
					want = []string{tt.metric}
				}
				var got []string
				for _, l := range r.metrics.get() {
					if strings.HasPrefix(l, "receipt ") {
						got = append(got, l)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("counted %q, want %q", got, want)
				}
				if n := r.reader.reads(); n != tt.reads {
					t.Errorf("reader read %d receipts, want %d", n, tt.reads)
				}
				if r.ledger.receipts != tt.folds {
					t.Errorf("ledger folded %d receipts, want %d", r.ledger.receipts, tt.folds)
				}
			})
		})
	}
}

// TestReceiptVerifiedAgainstThePublicURL posts a receipt signed for the
// address the request came to (its Host): refused, since the provider
// signs the URL it was told, CallbackURL of the public URL.
func TestReceiptVerifiedAgainstThePublicURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		body := "pid-1 delivered"
		for _, tt := range []struct {
			signedFor string
			want      int
		}{
			{"https://attacker.example/v1/receipts/acct", http.StatusForbidden},
			{testPublicURL + "/v1/receipts/acct", http.StatusOK},
		} {
			req := httptest.NewRequest("POST", tt.signedFor, strings.NewReader(body))
			req.Header.Set("X-Test-Signature", testSign(r.reader.secret, tt.signedFor, []byte(body)))
			w := httptest.NewRecorder()
			r.srv.Handler().ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Errorf("signed for %s (Host %s): %d, want %d", tt.signedFor, req.Host, w.Code, tt.want)
			}
		}
		if want := []string{testPublicURL + "/v1/receipts/acct", testPublicURL + "/v1/receipts/acct"}; !slices.Equal(r.reader.urls, want) {
			t.Errorf("reader was given %q, want %q", r.reader.urls, want)
		}
	})
}

// TestForgedReceiptsLoggedOnceAMinute posts forged receipts: one line a
// minute per account, saying how many it held back, with nothing of the
// requests in it.
func TestForgedReceiptsLoggedOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		body := "+6281234567890 delivered"
		for range 5 {
			if code := r.post("acct", body, false); code != http.StatusForbidden {
				t.Fatalf("forged: %d", code)
			}
		}
		time.Sleep(59 * time.Second)
		r.post("acct", body, false)
		if n := strings.Count(r.logs.String(), "did not verify"); n != 1 {
			t.Fatalf("%d lines within a minute, want 1:\n%s", n, r.logs)
		}
		time.Sleep(2 * time.Second)
		r.post("acct", body, false)
		logs := r.logs.String()
		if n := strings.Count(logs, "did not verify"); n != 2 {
			t.Fatalf("%d lines after a minute, want 2:\n%s", n, logs)
		}
		if !strings.Contains(logs, "refused_unlogged=5") {
			t.Errorf("the second line does not count the 5 held back:\n%s", logs)
		}
		for _, secret := range []string{"6281234567890", "4567890", "X-Test-Signature", testSign(r.reader.secret, "", nil)[:16]} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log holds %q:\n%s", secret, logs)
			}
		}
	})
}

// TestFinalReceiptPublishesItsStatusEvent folds a delivered receipt: its
// status event is published with its attributes, the ledger told, the
// delivery time observed; a duplicate of it publishes nothing more.
func TestFinalReceiptPublishesItsStatusEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		time.Sleep(2500 * time.Millisecond)
		if code := r.post("acct", "pid-1 delivered", true); code != http.StatusOK {
			t.Fatalf("answer %d", code)
		}
		owed, marked, _ := r.ledger.state()
		if !slices.Equal(marked, []string{"m1"}) || !slices.Equal(owed, []string{"m1"}) {
			t.Errorf("marked published %q, owed %q: want m1 marked, owed until it is cleared", marked, owed)
		}
		if code := r.post("acct", "pid-1 delivered", true); code != http.StatusOK {
			t.Fatalf("duplicate: answer %d", code)
		}
		msgs, _ := r.pubs.get()
		if len(msgs) != 1 || msgs[0].topic != "sms-status" {
			t.Fatalf("published %+v, want one status event", msgs)
		}
		want := map[string]string{"id": "m1", "class": "otp", "status": "delivered"}
		if !maps.Equal(msgs[0].attrs, want) {
			t.Errorf("attributes %v, want %v", msgs[0].attrs, want)
		}
		want2 := []string{"receipt acct otp delivered ok", "delivery acct otp 2.5s", "receipt acct otp delivered duplicate"}
		if got := r.metrics.get(); !slices.Equal(got, want2) {
			t.Errorf("metrics %q, want %q", got, want2)
		}
	})
}

// TestFailedReceiptPublishesTheResendFirst folds an undelivered receipt
// of a message with a resend: the resend (its data as kept, the account
// to avoid and the reason) goes before the status event, and is counted.
func TestFailedReceiptPublishesTheResendFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), []byte(`{"to":"+6281234567890"}`))
		if code := r.post("acct", "pid-1 undelivered 30007", true); code != http.StatusOK {
			t.Fatalf("answer %d", code)
		}
		msgs, _ := r.pubs.get()
		if len(msgs) != 2 {
			t.Fatalf("published %+v, want the resend and the status event", msgs)
		}
		if msgs[0].topic != "sms-otp" || msgs[0].data != `{"to":"+6281234567890"}` ||
			!maps.Equal(msgs[0].attrs, map[string]string{"sms-resend-avoid": "acct", "sms-resend-reason": "undelivered 30007"}) {
			t.Errorf("first published %+v, want the resend", msgs[0])
		}
		if msgs[1].topic != "sms-status" || msgs[1].attrs["status"] != "undelivered" {
			t.Errorf("second published %+v, want the status event", msgs[1])
		}
		if !slices.Contains(r.metrics.get(), "resend acct undelivered") {
			t.Errorf("metrics %q: no resend counted", r.metrics.get())
		}
	})
}

// TestPublishRetried fails the status topic's first two publishes: the
// third is out within the receipt's request, and the event marked
// published.
func TestPublishRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		r.pubs.setFailing(true)
		go func() {
			for {
				time.Sleep(10 * time.Millisecond)
				if _, calls := r.pubs.get(); calls >= 2 {
					r.pubs.setFailing(false)
					return
				}
			}
		}()
		start := time.Now()
		if code := r.post("acct", "pid-1 failed", true); code != http.StatusOK {
			t.Fatalf("answer %d", code)
		}
		msgs, calls := r.pubs.get()
		if len(msgs) != 1 || calls != 3 {
			t.Errorf("published %d after %d calls, want 1 after 3", len(msgs), calls)
		}
		if _, marked, _ := r.ledger.state(); !slices.Equal(marked, []string{"m1"}) {
			t.Errorf("marked published %q, want m1", marked)
		}
		if d := time.Since(start); d > r.srv.publishBound {
			t.Errorf("the retries took %v, beyond the bound %v", d, r.srv.publishBound)
		}
	})
}

// TestPublishFailureIsTriedAgainBeforeTheSweep fails every publish within
// the receipt's request: the provider gets its 200 (the state is in
// Redis), the event is not marked published and stays owed, within the
// bound; once Pub/Sub is back, the process's own retry publishes it
// within retryEvery, long before the sweep, and the flush clears it. (A
// resend whose publish failed is the sweep's:
// TestAResendPastItsWindowIsDropped.)
func TestPublishFailureIsTriedAgainBeforeTheSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		r.pubs.setFailing(true)
		start := time.Now()
		if code := r.post("acct", "pid-1 expired", true); code != http.StatusOK {
			t.Fatalf("answer %d, want 200", code)
		}
		if d := time.Since(start); d < r.srv.publishBound || d > r.srv.publishBound+time.Second {
			t.Errorf("the request took %v retrying, want the bound %v", d, r.srv.publishBound)
		}
		owed, marked, _ := r.ledger.state()
		if len(marked) != 0 || !slices.Equal(owed, []string{"m1"}) {
			t.Fatalf("marked published %q, owed %q: want nothing marked, m1 owed", marked, owed)
		}
		if strings.Count(r.logs.String(), "stays owed") != 1 {
			t.Errorf("the failure is not logged:\n%s", r.logs)
		}

		r.pubs.setFailing(false)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.srv.sweepLoop(ctx) }()
		time.Sleep(retryEvery)
		synctest.Wait()
		msgs, _ := r.pubs.get()
		if len(msgs) != 1 || msgs[0].attrs["status"] != "expired" {
			t.Fatalf("%v after Pub/Sub came back: published %+v, want the status event", retryEvery, msgs)
		}
		time.Sleep(flushEvery)
		synctest.Wait()
		cancel()
		<-done
		owed, marked, flushes := r.ledger.state()
		if len(owed) != 0 || !slices.Equal(marked, []string{"m1"}) || flushes == 0 {
			t.Errorf("owed %q, marked %q, %d flushes: want m1 marked and flushed", owed, marked, flushes)
		}
		if msgs, _ := r.pubs.get(); len(msgs) != 1 {
			t.Errorf("published %d, want the event once", len(msgs))
		}
	})
}

// TestLaterReceiptPublishesAnOwedEvent fails the publishes of a final
// receipt's event; the next receipt of the message, a duplicate that
// changes nothing, finds the event still owed and publishes it.
func TestLaterReceiptPublishesAnOwedEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		r.pubs.setFailing(true)
		r.post("acct", "pid-1 rejected", true)
		r.pubs.setFailing(false)
		if code := r.post("acct", "pid-1 rejected", true); code != http.StatusOK {
			t.Fatalf("duplicate: answer %d", code)
		}
		msgs, _ := r.pubs.get()
		if len(msgs) != 1 || msgs[0].attrs["status"] != "rejected" {
			t.Fatalf("published %+v, want the owed status event", msgs)
		}
		if _, marked, _ := r.ledger.state(); !slices.Equal(marked, []string{"m1"}) {
			t.Errorf("marked published %q, want m1", marked)
		}
		if got := r.metrics.get(); !slices.Contains(got, "receipt acct otp rejected duplicate") {
			t.Errorf("metrics %q: the duplicate is not counted as one", got)
		}
	})
}

// TestAReceiptBeforeItsSendsRecordIsFoldedOnceItIsThere: a provider may
// post a receipt before the call after the send has mapped its id (and a
// receipt answered 2xx is never posted again): the fold is tried again
// for a moment, and the final state is not lost.
func TestAReceiptBeforeItsSendsRecordIsFoldedOnceItIsThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		go func() {
			time.Sleep(300 * time.Millisecond) // the send's record, written late
			r.ledger.add("m1", "pid-1", "otp", time.Now(), nil)
		}()
		if code := r.post("acct", "pid-1 delivered", true); code != http.StatusOK {
			t.Fatalf("answer %d", code)
		}
		if msgs, _ := r.pubs.get(); len(msgs) != 1 || msgs[0].attrs["status"] != "delivered" {
			t.Fatalf("published %+v, want the delivered event", msgs)
		}
		if got := r.metrics.get(); len(got) == 0 || got[0] != "receipt acct otp delivered ok" {
			t.Errorf("metrics %q, want the receipt counted ok", got)
		}
	})
}
