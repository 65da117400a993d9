package receipts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"smsdispatcher/ledger"
	"smsdispatcher/provider"
)

// testPublicURL is the public URL the tests' servers are configured with.
const testPublicURL = "https://receipts.example.com"

// testReader is a provider.ReceiptReader: a receipt is signed by X-Test-Signature,
// hex SHA-256 of the secret, the URL and the body, and its body is
// "<provider id> <status> [<error code>]". It verifies first, as the
// adapters do.
type testReader struct {
	secret string

	mu   sync.Mutex
	urls []string // guarded by mu: the URL of each receipt read
}

var _ provider.ReceiptReader = (*testReader)(nil)

func testSign(secret, url string, body []byte) string {
	sum := sha256.Sum256(append([]byte(secret+url), body...))
	return hex.EncodeToString(sum[:])
}

func (r *testReader) ReadReceipt(req provider.ReceiptRequest) (provider.DeliveryReport, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL)
	r.mu.Unlock()
	if req.Header.Get("X-Test-Signature") != testSign(r.secret, req.URL, req.Body) {
		return provider.DeliveryReport{}, fmt.Errorf("%w: signature", provider.ErrForged)
	}
	f := strings.Fields(string(req.Body))
	if len(f) < 2 || len(f) > 3 {
		return provider.DeliveryReport{}, fmt.Errorf("%w: %d fields", provider.ErrMalformed, len(f))
	}
	dr := provider.DeliveryReport{ProviderID: f[0], Status: provider.DeliveryStatus(f[1])}
	if len(f) == 3 {
		dr.ErrorCode = f[2]
	}
	return dr, nil
}

func (r *testReader) reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.urls)
}

// testLedger is a Ledger keyed by provider id, folding as admission does
// for one-part messages: a final beats an intermediate, a later final
// only when it is delivered; a final makes the event owed until it is
// published and flushed.
type testLedger struct {
	mu        sync.Mutex
	msgs      map[string]*testMsg  // by provider id
	owedSince map[string]time.Time // by message id
	published []string             // marked since the last flush
	marked    []string             // every EventPublished
	flushes   int
	receipts  int
	err       error         // Receipt's answer when set
	block     chan struct{} // Receipt waits for it to close when set
}

type testMsg struct {
	fold      ledger.Fold
	resend    []byte // the resend payload, until a failure takes it
	givenBack []byte // a payload given back, until a sweep takes it
}

var _ Ledger = (*testLedger)(nil)

func newTestLedger() *testLedger {
	return &testLedger{msgs: map[string]*testMsg{}, owedSince: map[string]time.Time{}}
}

// add records a sent message: id sent at sentAt as providerID, in class,
// with its resend payload (nil: none).
func (l *testLedger) add(id, providerID, class string, sentAt time.Time, resend []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[providerID] = &testMsg{
		fold:   ledger.Fold{Known: true, ID: id, Class: class, ProviderID: providerID, Status: "sent", SentAt: sentAt, StatusAt: sentAt, Account: "acct"},
		resend: resend,
	}
}

func (l *testLedger) Receipt(ctx context.Context, r ledger.Report) (ledger.Fold, error) {
	l.mu.Lock()
	block := l.block
	l.receipts++
	l.mu.Unlock()
	if block != nil {
		<-block
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return ledger.Fold{}, l.err
	}
	l.clearPublished() // carried by the same call, as admission's is
	m, ok := l.msgs[r.ProviderID]
	if !ok {
		return ledger.Fold{}, nil
	}
	f := m.fold
	if (r.Final && (!f.Final || (r.Delivered && f.Status != "delivered"))) || (!r.Final && !f.Final && r.Status != f.Status) {
		f.Status, f.ErrorCode, f.Final, f.Changed = r.Status, r.ErrorCode, r.Final, true
		f.StatusAt = r.At
		if f.StatusAt.IsZero() {
			f.StatusAt = time.Now()
		}
		if r.Final {
			l.owedSince[f.ID] = time.Now()
			if !r.Delivered && m.resend != nil {
				f.Resend, m.resend = m.resend, nil
			}
		}
	}
	_, f.Owed = l.owedSince[f.ID]
	m.fold = f
	m.fold.Changed, m.fold.Owed, m.fold.Resend = false, false, nil
	return f, nil
}

func (l *testLedger) EventPublished(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.published = append(l.published, id)
	l.marked = append(l.marked, id)
}

func (l *testLedger) FlushPublished(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushes++
	l.clearPublished()
	return nil
}

// clearPublished clears the events marked published from the owed ones.
func (l *testLedger) clearPublished() {
	for _, id := range l.published {
		delete(l.owedSince, id)
	}
	l.published = nil
}

func (l *testLedger) Owed(ctx context.Context, age time.Duration, n int) ([]ledger.Fold, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var owed []ledger.Fold
	for _, m := range l.msgs {
		if since, ok := l.owedSince[m.fold.ID]; ok && !time.Now().Before(since.Add(age)) && len(owed) < n {
			f := m.fold
			f.Owed, f.Resend, m.givenBack = true, m.givenBack, nil
			owed = append(owed, f)
		}
	}
	slices.SortFunc(owed, func(a, b ledger.Fold) int { return strings.Compare(a.ID, b.ID) })
	return owed, nil
}

func (l *testLedger) GiveBackResend(ctx context.Context, f ledger.Fold) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if _, owed := l.owedSince[f.ID]; owed && m.fold.ID == f.ID && m.fold.Status != "delivered" {
			m.givenBack = f.Resend
			return true, nil
		}
	}
	return false, nil
}

// state returns what the test asserts on: the ids whose event is owed,
// the EventPublished calls and the flushes.
func (l *testLedger) state() (owed, marked []string, flushes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.owedSince {
		owed = append(owed, id)
	}
	slices.Sort(owed)
	return owed, slices.Clone(l.marked), l.flushes
}

// published is one message a testPublisher published.
type published struct {
	topic string
	data  string
	attrs map[string]string
}

// testPublisher is a Publisher that records what it publishes, in order,
// into a log it may share with another; it fails while failing is set.
type testPublisher struct {
	topic string
	log   *publishLog
}

type publishLog struct {
	mu      sync.Mutex
	msgs    []published // guarded by mu
	calls   int         // guarded by mu
	failing bool        // guarded by mu
}

func (p testPublisher) Publish(ctx context.Context, data []byte, attrs map[string]string) error {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	p.log.calls++
	if p.log.failing {
		return errors.New("pubsub: unavailable")
	}
	p.log.msgs = append(p.log.msgs, published{p.topic, string(data), attrs})
	return nil
}

func (l *publishLog) setFailing(f bool) {
	l.mu.Lock()
	l.failing = f
	l.mu.Unlock()
}

func (l *publishLog) get() ([]published, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs), l.calls
}

// testMetrics records each call as a line.
type testMetrics struct {
	mu    sync.Mutex
	lines []string // guarded by mu
}

func (m *testMetrics) add(s string) {
	m.mu.Lock()
	m.lines = append(m.lines, s)
	m.mu.Unlock()
}

func (m *testMetrics) Receipt(account, class, status, outcome string) {
	m.add(fmt.Sprintf("receipt %s %s %s %s", account, class, status, outcome))
}

func (m *testMetrics) Delivery(account, class string, d time.Duration) {
	m.add(fmt.Sprintf("delivery %s %s %v", account, class, d))
}

func (m *testMetrics) Resend(account, reason string) {
	m.add(fmt.Sprintf("resend %s %s", account, reason))
}

func (m *testMetrics) ResendLate(account string) {
	m.add("resend_late " + account)
}

func (m *testMetrics) get() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

// rig is a Server of one account "acct" on the doubles above.
type rig struct {
	srv     *Server
	reader  *testReader
	ledger  *testLedger
	pubs    *publishLog
	metrics *testMetrics
	logs    *syncBuffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{reader: &testReader{secret: "s3cret"}, ledger: newTestLedger(), pubs: &publishLog{}, metrics: &testMetrics{}, logs: &syncBuffer{}}
	srv, err := New(Config{
		PublicURL: testPublicURL,
		Accounts:  []Account{{Name: "acct", Reader: r.reader, Ledger: r.ledger}},
		Status:    testPublisher{"sms-status", r.pubs},
		Resend:    testPublisher{"sms-otp", r.pubs},
		Deadline:  payloadDeadline,
		Metrics:   r.metrics,
		Logger:    slog.New(slog.NewTextHandler(r.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	return r
}

// post posts body to account's receipts path, signed for the public URL
// when signed, and returns the answer's status.
func (r *rig) post(account, body string, signed bool) int {
	req := httptest.NewRequest(http.MethodPost, "http://10.0.0.7:8081/v1/receipts/"+account, strings.NewReader(body))
	if signed {
		req.Header.Set("X-Test-Signature", testSign(r.reader.secret, CallbackURL(testPublicURL, account), []byte(body)))
	}
	w := httptest.NewRecorder()
	r.srv.Handler().ServeHTTP(w, req)
	return w.Code
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
