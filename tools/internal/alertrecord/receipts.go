package alertrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"smsdispatcher/telemetry"
)

// receiptPlan is how a run's delivery receipts come back.
type receiptPlan struct {
	// failEvery makes every failEvery-th final receipt of each class say
	// undelivered (Twilio's 30007, a carrier's filter); 0: all delivered.
	failEvery int64
	// failMarketing makes every final receipt of marketing say
	// undelivered (Twilio's 30034: a sender not registered for it).
	failMarketing bool
}

// The receipts' timeline: what Twilio sends for each message it took, an
// intermediate "sent" and the carrier's final status.
const (
	receiptSentAfter  = 500 * time.Millisecond
	receiptFinalAfter = 2 * time.Second // plus up to 2 s, spread by the message's number
)

// receiptFamilies are what the receipt driver's /metrics adds to a
// recording: the receipts' families that the rules read.
var receiptFamilies = map[string][]string{
	"sms_receipts_total":   nil,
	"sms_receipts_enabled": nil,
}

// receiptDriver counts delivery receipts as the receipts server of the
// pods would, on a telemetry.Metrics of its own that the recording scrapes
// beside the pods (pod="receipts", receiptFamilies only): for each send
// the simulator accepts, Receipt("sent", "ok") after receiptSentAfter and
// the final receipt (Receipt and Delivery) 2 to 4 s after the acceptance.
// The pods' own receipts server (RECEIPTS_ADDR, the simulator posting to
// its callback) replaces it once the dispatcher takes receipts.
//
// Its fields are safe for concurrent use: accepted runs on the simulator's
// handlers, the events change failOTP and forged, run owns the queue's
// delivery.
type receiptDriver struct {
	account string
	m       *telemetry.Metrics
	srv     *http.Server
	addr    string

	plan    receiptPlan
	failOTP atomic.Int64 // every failOTP-th final OTP is undelivered, when > 0 (a filtered route)
	forged  atomic.Bool  // every receipt fails verification (counted forged, nothing read)

	mu      sync.Mutex
	queue   []dueReceipt     // by due time; guarded by mu
	finals  map[string]int64 // final receipts per class so far; guarded by mu
	sendsOf map[string]int64 // accepted sends per class; guarded by mu

	wg sync.WaitGroup
}

// dueReceipt is a receipt the driver counts at due.
type dueReceipt struct {
	due      time.Time
	class    string
	final    bool
	accepted time.Time
}

// startReceiptDriver serves the driver's /metrics on a loopback port
// until ctx ends; Close waits for it.
func startReceiptDriver(ctx context.Context, account string, plan receiptPlan) (*receiptDriver, error) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		return nil, err
	}
	m.SetState(func() telemetry.State {
		return telemetry.State{Accounts: []telemetry.AccountState{{Name: account, Receipts: true}}}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &receiptDriver{account: account, m: m, addr: ln.Addr().String(), plan: plan,
		finals: map[string]int64{}, sendsOf: map[string]int64{},
		srv: &http.Server{Handler: m.Handler(), ReadHeaderTimeout: time.Second}}
	d.wg.Go(func() { d.srv.Serve(ln) })
	d.wg.Go(func() { d.run(ctx) })
	return d, nil
}

// Close stops the driver's server; its queue stops with the run's ctx.
func (d *receiptDriver) Close() {
	d.srv.Close()
	d.wg.Wait()
	d.m.Shutdown(context.Background())
}

// wrap counts each send h accepts (a 2xx) as one to be followed by its
// receipts. The class is read from the message's id (the run's feed names
// it "<run>-otp-<n>" or "<run>-mkt-<n>").
func (d *receiptDriver) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		if sw.status/100 != 2 {
			return
		}
		id := r.Header.Get("Idempotency-Key")
		if id == "" {
			var msg struct {
				ClientRef string `json:"client_ref"`
			}
			_ = json.Unmarshal(body, &msg)
			id = msg.ClientRef
		}
		class := "marketing"
		if strings.Contains(id, "-otp-") {
			class = "otp"
		}
		d.accepted(class, time.Now())
	})
}

// accepted queues the receipts of a send of class accepted at t.
func (d *receiptDriver) accepted(class string, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.sendsOf[class]
	d.sendsOf[class]++
	spread := time.Duration(n%5) * 500 * time.Millisecond
	d.queue = append(d.queue,
		dueReceipt{due: t.Add(receiptSentAfter), class: class, accepted: t},
		dueReceipt{due: t.Add(receiptFinalAfter + spread), class: class, final: true, accepted: t})
}

// run counts the receipts that are due, every 100 ms, until ctx ends.
func (d *receiptDriver) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			d.countDue(now)
		}
	}
}

// countDue counts every queued receipt due by now.
func (d *receiptDriver) countDue(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rest := d.queue[:0]
	for _, r := range d.queue {
		if r.due.After(now) {
			rest = append(rest, r)
			continue
		}
		d.count(r)
	}
	d.queue = rest
}

// count counts one receipt as the receipts server would; mu is held.
func (d *receiptDriver) count(r dueReceipt) {
	switch {
	case d.forged.Load():
		d.m.Receipt(d.account, "", "", "forged")
	case !r.final:
		d.m.Receipt(d.account, r.class, "sent", "ok")
	default:
		n := d.finals[r.class] + 1
		d.finals[r.class] = n
		status := "delivered"
		switch every := d.failOTP.Load(); {
		case r.class == "otp" && every > 0 && n%every == 0,
			r.class == "marketing" && d.plan.failMarketing,
			d.plan.failEvery > 0 && n%d.plan.failEvery == 0:
			status = "undelivered"
		}
		d.m.Receipt(d.account, r.class, status, "ok")
		d.m.Delivery(d.account, r.class, r.due.Sub(r.accepted))
	}
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
