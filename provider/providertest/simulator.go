package providertest

import (
	"crypto/subtle"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"smsdispatcher/internal/sleep"
	"smsdispatcher/provider/internal/wire"
)

// StatusClientClosed is the status recorded for a request whose context
// ended while the Simulator was adding its Latency: no answer was written
// and the request counts as neither accepted nor refused.
const StatusClientClosed = 499

// maxRequestBody caps what the Simulator reads of a request; the contract's
// largest message (1,600 code points) is far below it.
const maxRequestBody = 64 << 10

// An Option configures an optional dependency of a Simulator.
type Option func(*Simulator)

// WithClock makes the Simulator read the time from now. If now is nil,
// time.Now is used.
func WithClock(now func() time.Time) Option {
	return func(s *Simulator) {
		if now != nil {
			s.now = now
		}
	}
}

// Simulator is an http.Handler that plays a provider strictly: the generic
// API of docs/contract.md section 3 (NewGeneric), Twilio (NewTwilio) or
// Vonage (NewVonage). The rate, the suspension and the faults are the same
// for all; each speaks its provider's wire format. It is safe for concurrent use; each request is
// decided under one mutex in O(1) amortized time. A Simulator that was
// asked for delivery receipts runs goroutines to post them until Close.
type Simulator struct {
	cfg     Config           // defaults applied; read-only after newSimulator
	now     func() time.Time // read-only after newSimulator
	dialect dialect          // read-only after newSimulator
	token   atomic.Pointer[string]
	// receipts posts the delivery receipts the sends ask for; it has its
	// own lock.
	receipts *receiptPoster

	mu sync.Mutex
	// Guarded by mu.
	accepted         ring[time.Time] // sliding: acceptances in the window ending at the last request
	fixedIndex       int64           // fixed: index of the current window
	fixedCount       int             // fixed: acceptances in it
	throttles        ring[time.Time] // 429s within SuspendWindow, toward suspension
	suspendedUntil   time.Time
	failStatus       int
	failUntil        time.Time
	forced           int
	forcedRetryAfter time.Duration
	arrivals         ring[Arrival]
	sent             map[string]int
	refused          map[string]bool // numbers refused by RefuseNumber
	optedOut         map[string]bool // the provider's own opt-out list (OptOut)
	seq              int             // provider message ids handed out
	stats            Stats
	// senders holds, with SenderLimit, each sender's acceptances in its
	// window ending at its last request.
	senders map[string]*ring[time.Time]
}

// dialect is one provider's wire format: what a request says and how an
// answer is written.
type dialect interface {
	// read reads r (its body whatever the answer, see ServeHTTP) and
	// checks its route and credential against token.
	read(w http.ResponseWriter, r *http.Request, token string) request
	// write writes a, and the provider message id for an acceptance.
	write(w http.ResponseWriter, a answer)
	// messageID returns the provider's id for the n-th acceptance.
	messageID(n int) string
	// parts returns the provider's ids of an accepted message of n
	// segments whose id is id: the id, or one per part (Vonage).
	parts(id string, n int) []string
	// receiptBody encodes and signs one delivery receipt.
	receiptBody(r receiptRequest) ([]byte, http.Header)
	// receiptFailure is the final status and error code of a message that
	// is not delivered, when the configuration names none.
	receiptFailure() (status, code string)
}

func newSimulator(cfg Config, d dialect, opts ...Option) *Simulator {
	cfg = cfg.withDefaults()
	s := &Simulator{
		cfg:       cfg,
		now:       time.Now,
		dialect:   d,
		accepted:  newRing[time.Time](cfg.Limit),
		throttles: newRing[time.Time](cfg.SuspendAfter + 1),
		arrivals:  newRing[Arrival](cfg.MaxArrivals),
		sent:      make(map[string]int),
		refused:   make(map[string]bool),
		optedOut:  make(map[string]bool),
		senders:   make(map[string]*ring[time.Time]),
	}
	s.token.Store(&cfg.Token)
	s.fixedIndex = -1 << 63 // no window yet
	for _, o := range opts {
		o(s)
	}
	s.receipts = newReceiptPoster(cfg.Receipts, cfg.MaxArrivals, d, &s.token)
	s.receipts.now = s.now
	return s
}

// SetToken replaces the credential the Simulator expects (the generic
// API's bearer token, Twilio's auth token, Vonage's API secret), as a
// provider does when an operator rotates it. Empty accepts any.
func (s *Simulator) SetToken(token string) { s.token.Store(&token) }

// RefuseNumber makes the Simulator refuse every message to the number to
// (E.164 with its '+'), the way its provider refuses an invalid or
// unreachable number.
func (s *Simulator) RefuseNumber(to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[to] = true
}

// OptOut puts the number to (E.164 with its '+') on the Simulator's own
// opt-out list, as a provider keeps one per sender after a STOP: every
// message to it is refused as the recipient's opt-out (Twilio's 21610;
// the generic API's 400 {"error": "recipient opted out", "code":
// "opted_out"}), or, on Vonage, accepted (status 0) and its receipt says
// failed with err-code 9 (when the send asked for receipts), as Vonage
// does.
func (s *Simulator) OptOut(to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.optedOut[to] = true
}

// FailFor makes the Simulator answer status to every request that passes
// routing and authentication, for d from now. A status outside 200–999 is
// taken as 500 (net/http cannot write it); d zero or negative stops failing.
func (s *Simulator) FailFor(status int, d time.Duration) {
	if status < 200 || status > 999 {
		status = http.StatusInternalServerError
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		s.failStatus, s.failUntil = 0, time.Time{}
		return
	}
	s.failStatus, s.failUntil = status, s.now().Add(d)
}

// ThrottleNext makes the next n requests that pass routing and
// authentication get 429 with retryAfter as Retry-After, whatever the rate
// (negative retryAfter: no header). They count as Throttled and toward
// suspension. n zero or negative cancels what is left.
func (s *Simulator) ThrottleNext(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forced, s.forcedRetryAfter = max(n, 0), retryAfter
}

// Arrivals returns a copy of the kept arrivals, in arrival order.
func (s *Simulator) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arrivals.appendValues(make([]Arrival, 0, s.arrivals.len()))
}

// Stats returns the counts so far.
func (s *Simulator) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Suspended = s.now().Before(s.suspendedUntil)
	return st
}

// SentCount returns how many times id was accepted as a send. A re-send of
// an accepted id counts again unless HonourIdempotencyKey is set.
func (s *Simulator) SentCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[id]
}

// readRouted reads r's body, at most maxRequestBody of it, whatever the
// answer: net/http notices a client that hangs up (ending r.Context(),
// which Latency honours) only once the body has been read. It sets
// in.routeFault to 404 when the path is not the API's (routed false) and
// to 405 for a method other than POST.
func readRouted(w http.ResponseWriter, r *http.Request, routed bool, in *request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	switch {
	case !routed:
		in.routeFault = http.StatusNotFound
	case r.Method != http.MethodPost:
		in.routeFault = http.StatusMethodNotAllowed
	}
	return body, err
}

// request is what a dialect learned from a request before the lock is
// taken. Only the decision sees the number; no arrival keeps it.
type request struct {
	id         string // Idempotency-Key, client_ref or client-ref
	key        string // Idempotency-Key (generic only)
	routeFault int    // 404 or 405; 0 when routed
	authorized bool
	bodyFault  int    // 400, 413 or 415; 0 when the body is valid
	to         string // the number, E.164 with '+'
	from       string // the sender, as the request named it; "" for none
	segments   int    // Segments of the body; 1 when it could not be read
	callback   string // where the send asked for delivery receipts; "" none
	ref        string // the client reference its receipts echo (generic client_ref, Vonage client-ref)
	echo       any    // what the dialect's write needs of the request (its answer echoes fields)
}

// outcome is what the Simulator decided, whatever the wire says.
type outcome string

const (
	outAccepted     outcome = "accepted"
	outDuplicate    outcome = "duplicate"
	outThrottled    outcome = "throttled" // over the rate, or forced
	outSuspended    outcome = "suspended"
	outFailed       outcome = "failed" // FailFor
	outUnauthorized outcome = "unauthorized"
	outRefused      outcome = "refused" // route, body or number
	outCanceled     outcome = "canceled"
)

// answer is what the Simulator decided.
type answer struct {
	outcome    outcome
	status     int           // the generic API's status for it; a dialect may answer otherwise
	retryAfter time.Duration // for a throttle; negative: no header
	reason     string        // for the body; never holds request content
	messageID  string        // for an acceptance
	badNumber  bool          // refused for its number (RefuseNumber, or not E.164)
	optedOut   bool          // to a number on the opt-out list (OptOut): refused, or accepted by an optOutLater dialect
	echo       any           // the request's echo, for the dialect's write
}

// ServeHTTP checks, in this order: route (404, 405), token (401),
// suspension (429), FailFor, ThrottleNext (429), content type and body
// (415, 413, 400), a repeated Idempotency-Key, the account's rate (429) and
// the sender's rate (429). A request that passes all is accepted (200);
// when it asked for delivery receipts, they are planned once the answer is
// written (see ReceiptConfig).
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := s.dialect.read(w, r, *s.token.Load())
	in.segments = max(in.segments, 1)
	if s.cfg.Latency > 0 && !sleep.For(r.Context(), s.cfg.Latency) {
		s.mu.Lock()
		s.stats.Canceled++
		s.record(s.now(), in, answer{outcome: outCanceled, status: StatusClientClosed})
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	now := s.now()
	a := s.decide(now, in)
	s.record(now, in, a)
	s.mu.Unlock()
	a.echo = in.echo
	s.dialect.write(w, a)
	if a.outcome == outAccepted && in.callback != "" {
		// The answer leaves before any receipt, as at a provider.
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		s.receipts.enqueue(sentMessage{
			callback: in.callback, parts: s.dialect.parts(a.messageID, in.segments),
			ref: in.ref, to: in.to, from: in.from, echo: in.echo, optedOut: a.optedOut,
		})
	}
}

// secretEqual compares a credential in constant time.
func secretEqual(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// isE164 reports whether to is '+' then 8 to 15 ASCII digits.
func isE164(to string) bool {
	if len(to) < 1+8 || len(to) > 1+15 || to[0] != '+' {
		return false
	}
	return wire.AllDigits(to[1:])
}

// optOutLater is a dialect whose provider accepts a message to a number
// on its opt-out list and says so in the receipt (Vonage).
type optOutLater interface {
	// optOutReceipt is the final status and error code of the receipt.
	optOutReceipt() (status, code string)
}

// decide answers one request at now. s.mu must be held.
func (s *Simulator) decide(now time.Time, in request) answer {
	optedOut := s.optedOut[in.to]
	_, later := s.dialect.(optOutLater)
	switch {
	case in.routeFault != 0:
		s.stats.Rejected++
		return answer{outcome: outRefused, status: in.routeFault, reason: http.StatusText(in.routeFault)}
	case !in.authorized:
		s.stats.Rejected++
		s.stats.Unauthorized++
		return answer{outcome: outUnauthorized, status: http.StatusUnauthorized, reason: "bad or missing credentials"}
	case now.Before(s.suspendedUntil):
		s.stats.SuspendedAnswers++
		return answer{outcome: outSuspended, status: http.StatusTooManyRequests, retryAfter: s.suspendedUntil.Sub(now), reason: "account suspended"}
	case s.failStatus != 0 && now.Before(s.failUntil):
		s.stats.Failed++
		return answer{outcome: outFailed, status: s.failStatus, retryAfter: s.cfg.RetryAfter, reason: "injected failure"}
	case s.forced > 0:
		s.forced--
		s.stats.Throttled++
		s.countThrottle(now)
		return answer{outcome: outThrottled, status: http.StatusTooManyRequests, retryAfter: s.forcedRetryAfter, reason: "rate limited (forced)"}
	case in.bodyFault != 0:
		s.stats.Rejected++
		return answer{outcome: outRefused, status: in.bodyFault, reason: "invalid message"}
	case optedOut && !later:
		s.stats.Rejected++
		s.stats.OptedOut++
		return answer{outcome: outRefused, status: http.StatusBadRequest, reason: "recipient opted out", optedOut: true}
	case s.refused[in.to]:
		s.stats.Rejected++
		return answer{outcome: outRefused, status: http.StatusUnprocessableEntity, reason: "number refused", badNumber: true}
	case s.cfg.HonourIdempotencyKey && in.key != "" && s.sent[in.key] > 0:
		s.stats.Duplicates++
		return answer{outcome: outDuplicate, status: http.StatusOK, reason: "duplicate"}
	case !s.accountFits(now, s.cost(in)):
		s.stats.Throttled++
		s.countThrottle(now)
		return answer{outcome: outThrottled, status: http.StatusTooManyRequests, retryAfter: s.cfg.RetryAfter, reason: "rate limited"}
	case !s.senderFits(now, in.from, s.cost(in)):
		// Answered as the account's throttle is: a client cannot tell them
		// apart on the wire, as it cannot at a provider.
		s.stats.SenderThrottled++
		s.countThrottle(now)
		return answer{outcome: outThrottled, status: http.StatusTooManyRequests, retryAfter: s.cfg.RetryAfter, reason: "rate limited (sender)"}
	}
	s.admit(now, in.from, s.cost(in))
	s.stats.Accepted++
	s.stats.AcceptedSegments += in.segments
	s.sent[in.id]++
	s.seq++
	if optedOut {
		s.stats.OptedOut++ // accepted: its receipt says the opt-out (optOutLater)
	}
	return answer{outcome: outAccepted, status: http.StatusOK, reason: "accepted", messageID: s.dialect.messageID(s.seq), optedOut: optedOut}
}

// cost is what in counts toward Limit.
func (s *Simulator) cost(in request) int {
	if s.cfg.CountSegments {
		return in.segments
	}
	return 1
}

// accountFits reports whether the account's window has room for cost
// units at now. It only moves the window to now, which counts nothing, so
// that a request the sender's window then refuses counts in neither. s.mu
// must be held.
func (s *Simulator) accountFits(now time.Time, cost int) bool {
	if s.cfg.Fixed {
		k := floorDiv(now.UnixNano()-int64(s.cfg.Phase), int64(s.cfg.Window))
		if k != s.fixedIndex {
			s.fixedIndex, s.fixedCount = k, 0
		}
		return s.fixedCount+cost <= s.cfg.Limit
	}
	slide(&s.accepted, now, s.cfg.Window)
	return s.accepted.len()+cost <= s.cfg.Limit
}

// senderFits reports whether sender's window has room for cost units at
// now; always, when SenderLimit is not set. Like accountFits, it counts
// nothing. s.mu must be held.
func (s *Simulator) senderFits(now time.Time, sender string, cost int) bool {
	if s.cfg.SenderLimit <= 0 {
		return true
	}
	w := s.senders[sender]
	if w == nil {
		return cost <= s.cfg.SenderLimit
	}
	slide(w, now, s.cfg.SenderWindow)
	return w.len()+cost <= s.cfg.SenderLimit
}

// admit counts an acceptance of cost units from sender at now, in the
// account's window and the sender's; accountFits and senderFits must have
// said yes at the same now. s.mu must be held.
func (s *Simulator) admit(now time.Time, sender string, cost int) {
	if s.cfg.Fixed {
		s.fixedCount += cost
		s.stats.MaxInWindow = max(s.stats.MaxInWindow, s.fixedCount)
	} else {
		for range cost {
			s.accepted.push(now)
		}
		s.stats.MaxInWindow = max(s.stats.MaxInWindow, s.accepted.len())
	}
	if s.cfg.SenderLimit <= 0 {
		return
	}
	w := s.senders[sender]
	if w == nil {
		r := newRing[time.Time](s.cfg.SenderLimit)
		w = &r
		s.senders[sender] = w
	}
	for range cost {
		w.push(now)
	}
	s.stats.SenderMaxInWindow = max(s.stats.SenderMaxInWindow, w.len())
}

// slide keeps in a sliding window's ring only the acceptances in
// (now-window, now]: with now itself they must fit in one half-open
// window of length window, as MaxInAnyWindow and MaxInWindow count.
func slide(r *ring[time.Time], now time.Time, window time.Duration) {
	for r.len() > 0 && now.Sub(r.front()) >= window {
		r.popFront()
	}
}

// countThrottle counts a 429 at now toward suspension. s.mu must be held.
func (s *Simulator) countThrottle(now time.Time) {
	if s.cfg.SuspendAfter < 0 {
		return
	}
	for s.throttles.len() > 0 && now.Sub(s.throttles.front()) >= s.cfg.SuspendWindow {
		s.throttles.popFront()
	}
	s.throttles.push(now)
	if s.throttles.len() > s.cfg.SuspendAfter {
		s.suspendedUntil = now.Add(s.cfg.SuspendFor)
		s.stats.Suspensions++
		s.throttles.reset() // a suspension served wipes the slate
	}
}

// record keeps one arrival. s.mu must be held.
func (s *Simulator) record(at time.Time, in request, a answer) {
	if s.arrivals.push(Arrival{At: at, ID: in.id, Status: a.status, Outcome: string(a.outcome), Segments: in.segments, From: in.from}) {
		s.stats.DroppedArrivals++
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
