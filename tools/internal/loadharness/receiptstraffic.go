package loadharness

// The receipts scenario's traffic: the backlog's messages, the public
// URL's balancer that times every receipt, and the logs of what the
// dispatchers sent and what the receipts servers counted.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
	"smsdispatcher/receipts"
)

// receiptsID is the id of the backlog's message i.
func receiptsID(i int) string { return marketingIDPrefix + strconv.Itoa(i) }

// receiptsMessage is a message's data.
func receiptsMessage(id, to string) []byte {
	b, _ := json.Marshal(map[string]string{"id": id, "to": to, "body": "Winter sale: 20% off"})
	return b
}

// receiptsBalancer is the public URL: it hands each connection's requests
// to the receipts servers in turn, and times each one from its request to
// its answer's header. Safe for concurrent use.
type receiptsBalancer struct {
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	next      atomic.Uint64
	phase     atomic.Int64 // unix nanoseconds of the receipts phase's start; 0 before

	mu      sync.Mutex
	handled []handledReceipt // guarded by mu
}

// handledReceipt is one receipt a server answered.
type handledReceipt struct {
	at      time.Time // when it was sent on
	took    time.Duration
	status  int  // the server's answer; 0 when none came
	inPhase bool // sent after the receipts phase began
}

func newReceiptsBalancer(addrs []string) *receiptsBalancer {
	b := &receiptsBalancer{transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	targets := make([]*url.URL, len(addrs))
	for i, a := range addrs {
		targets[i] = &url.URL{Scheme: "http", Host: a}
	}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targets[b.next.Add(1)%uint64(len(targets))])
		},
		Transport: roundTripFunc(b.roundTrip),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return b
}

func (b *receiptsBalancer) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.proxy.ServeHTTP(w, r) }

// roundTrip forwards one receipt and times it.
func (b *receiptsBalancer) roundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	phase := b.phase.Load()
	resp, err := b.transport.RoundTrip(r)
	h := handledReceipt{at: start, took: time.Since(start), inPhase: phase != 0 && start.UnixNano() >= phase}
	if err == nil {
		h.status = resp.StatusCode
	}
	b.mu.Lock()
	b.handled = append(b.handled, h)
	b.mu.Unlock()
	return resp, err
}

// startPhase marks the start of the receipts phase.
func (b *receiptsBalancer) startPhase() { b.phase.Store(time.Now().UnixNano()) }

// receipts returns every receipt handled so far.
func (b *receiptsBalancer) receipts() []handledReceipt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]handledReceipt(nil), b.handled...)
}

func (b *receiptsBalancer) close() { b.transport.CloseIdleConnections() }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// receiptsLog is the dispatchers' Observer: which account sent each id.
// Safe for concurrent use.
type receiptsLog struct {
	mu    sync.Mutex
	sent  map[string]string // guarded by mu: id -> the account that sent it
	wake  chan struct{}     // guarded by mu: closed at the next send, then replaced
	twice int               // guarded by mu: ids sent again
}

var _ dispatch.Observer = (*receiptsLog)(nil)

func newReceiptsLog() *receiptsLog {
	return &receiptsLog{sent: map[string]string{}, wake: make(chan struct{})}
}

// Observe logs a sent message.
func (l *receiptsLog) Observe(e dispatch.Event) {
	if e.Outcome != nack.Sent {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, again := l.sent[e.ID]; again {
		l.twice++
	}
	l.sent[e.ID] = e.Account
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *receiptsLog) sentCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// waitSent waits until n ids were sent, for at most bound, and reports
// whether they were.
func (l *receiptsLog) waitSent(ctx context.Context, n int, bound time.Duration) bool {
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		l.mu.Lock()
		done, wake := len(l.sent) >= n, l.wake
		l.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-wake:
		}
	}
}

// receiptsMetrics counts the receipts servers' outcomes. Safe for
// concurrent use.
type receiptsMetrics struct {
	mu       sync.Mutex
	outcomes map[string]int // guarded by mu
	resends  int            // guarded by mu
}

var _ receipts.Metrics = (*receiptsMetrics)(nil)

func newReceiptsMetrics() *receiptsMetrics { return &receiptsMetrics{outcomes: map[string]int{}} }

func (m *receiptsMetrics) Receipt(account, class, status, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.outcomes[outcome]++
}

func (m *receiptsMetrics) Delivery(account, class string, d time.Duration) {}

func (m *receiptsMetrics) ResendLate(account string) {}

func (m *receiptsMetrics) Resend(account, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resends++
}

func (m *receiptsMetrics) counts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.outcomes))
	for k, v := range m.outcomes {
		out[k] = v
	}
	return out
}

// countingPublisher is the resend topic: marketing is never resent, so
// it only counts. Safe for concurrent use.
type countingPublisher struct{ n atomic.Int64 }

var _ receipts.Publisher = (*countingPublisher)(nil)

func (p *countingPublisher) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	p.n.Add(1)
	return nil
}
