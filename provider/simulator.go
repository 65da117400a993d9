package provider

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StatusClientClosed is the status recorded for a request whose context
// ended while the Simulator was adding its Latency: no answer was written
// and the request counts as neither accepted nor refused.
const StatusClientClosed = 499

// maxRequestBody caps what the Simulator reads of a request; the contract's
// largest message (1,600 code points) is far below it.
const maxRequestBody = 64 << 10

// SimConfig configures a Simulator. The zero value means the defaults, which
// are the account's contract of docs/contract.md section 3: 100 messages per
// strict sliding second, suspension for 60 minutes after more than 300 429s
// in 10 minutes.
type SimConfig struct {
	// Token is the expected bearer token. If empty, any Authorization (or
	// none) is accepted; otherwise a mismatch is answered 401.
	Token string
	// Limit is how many messages may be accepted per Window. Zero or
	// negative means 100.
	Limit int
	// Window is the length of the rate window. Zero or negative means 1s.
	Window time.Duration
	// Fixed selects fixed windows [Phase+k*Window, Phase+(k+1)*Window) on
	// the Unix time line. If false, the window is strict and sliding: no
	// Window-long span ending at any request may hold more than Limit
	// acceptances.
	Fixed bool
	// Phase is the offset of fixed windows from the Unix epoch; any value,
	// negative or longer than Window, is taken modulo Window.
	Phase time.Duration
	// RetryAfter is the Retry-After of a 429 for being over the rate,
	// written in decimal seconds ("1", "0.25") rounded up to the
	// millisecond. Zero means 1s; negative means no Retry-After header.
	RetryAfter time.Duration
	// SuspendAfter: more than this many 429s (over-rate or forced) within
	// SuspendWindow suspend the account. Zero means 300; negative means
	// never suspend.
	SuspendAfter int
	// SuspendWindow is the span in which 429s are counted. Zero or negative
	// means 10m.
	SuspendWindow time.Duration
	// SuspendFor is how long a suspension lasts. Zero or negative means
	// 60m. While suspended, every request that passes routing and
	// authentication is answered 429 with the time left as Retry-After,
	// and counted in SimStats.SuspendedAnswers, not Throttled.
	SuspendFor time.Duration
	// Latency is added before deciding and answering. If the request's
	// context ends first, nothing is answered and the arrival is recorded
	// with StatusClientClosed. Zero or negative means none. Latency runs on
	// real time, whatever clock is given with WithSimClock.
	Latency time.Duration
	// HonourIdempotencyKey makes a repeat of an accepted Idempotency-Key
	// answer 200 without counting as a send (SimStats.Duplicates). If
	// false, every accepted repeat is a new send.
	HonourIdempotencyKey bool
	// MaxArrivals bounds the arrivals kept for Arrivals; past it the oldest
	// are dropped and counted in SimStats.DroppedArrivals. Zero means
	// 1<<20 (about 64 MiB at most); negative means keep none.
	MaxArrivals int
	// CountSegments makes Limit count message segments (Segments) instead
	// of requests, as Twilio counts throughput. A message of more
	// segments than Limit is never accepted.
	CountSegments bool
	// SenderLimit, if positive, limits each sender as Limit limits the
	// account: no sender may have more than SenderLimit acceptances
	// (segments, with CountSegments) in any SenderWindow, measured as the
	// account's sliding window is (whatever Fixed says). The sender is the
	// request's from: the generic API's "from", Twilio's From, Vonage's
	// from; a request without one counts under the empty sender "". A
	// request over its sender's limit is answered as one over the
	// account's rate (429 with RetryAfter, or the provider's way), counted
	// in SimStats.SenderThrottled and toward suspension. Both limits are
	// checked, the account's first; a request refused by either counts in
	// neither window. Zero or negative: senders are not limited.
	SenderLimit int
	// SenderWindow is the length of a sender's window. Zero or negative
	// means 1s.
	SenderWindow time.Duration
}

func (c SimConfig) withDefaults() SimConfig {
	if c.Limit <= 0 {
		c.Limit = 100
	}
	if c.Window <= 0 {
		c.Window = time.Second
	}
	if c.SenderWindow <= 0 {
		c.SenderWindow = time.Second
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = time.Second
	}
	if c.SuspendAfter == 0 {
		c.SuspendAfter = 300
	}
	if c.SuspendWindow <= 0 {
		c.SuspendWindow = 10 * time.Minute
	}
	if c.SuspendFor <= 0 {
		c.SuspendFor = 60 * time.Minute
	}
	if c.MaxArrivals == 0 {
		c.MaxArrivals = 1 << 20
	}
	return c
}

// Arrival is one request as the Simulator saw it. It holds no recipient's
// number and no body; From is the account's own sender.
type Arrival struct {
	// At is when the Simulator decided, by its clock (after Latency).
	At time.Time
	// ID is the Idempotency-Key header, or client_ref when the header is
	// absent; empty if neither was readable.
	ID string
	// Status is the generic API's HTTP status for the answer (a dialect
	// may have written another: Twilio's 201, Vonage's 200 for a
	// throttle), or StatusClientClosed. Outcome is what it meant.
	Status int
	// Outcome is what the answer meant, whatever the wire said (a Vonage
	// throttle is HTTP 200): "accepted", "duplicate", "throttled",
	// "suspended", "failed", "unauthorized", "refused" or "canceled".
	Outcome string
	// Segments is the message's segments (Segments, or Vonage's parts);
	// 1 when the body could not be read. They count toward Limit and
	// SenderLimit with CountSegments only.
	Segments int
	// From is the sender the request named (the generic API's "from",
	// Twilio's From, Vonage's from), the key of SimConfig.SenderLimit;
	// empty when it named none or was not read that far.
	From string
}

// SimStats counts what a Simulator answered. Every arrival is counted in
// exactly one of Accepted, Throttled, SenderThrottled, Failed, Rejected,
// Duplicates, SuspendedAnswers and Canceled.
type SimStats struct {
	Accepted   int // counted as a send
	Throttled  int // over the account's rate or forced by ThrottleNext (429, or the provider's way)
	Failed     int // answered by FailFor, whatever the status
	Rejected   int // refused: a bad route, credential, body or number
	Duplicates int // 200 for an accepted Idempotency-Key, not a send
	// SenderThrottled counts the requests within the account's rate but
	// over their sender's (SimConfig.SenderLimit), answered as Throttled
	// ones are.
	SenderThrottled int
	// Suspended reports whether the account is suspended now.
	Suspended bool
	// Unauthorized counts the Rejected answers for a bad credential.
	Unauthorized int
	// AcceptedSegments is the segments of the accepted messages.
	AcceptedSegments int
	// MaxInWindow is the most acceptances any window held, by the
	// Simulator's own measure: the sliding window ending at each request,
	// or the fixed window it fell in. It never exceeds Limit.
	MaxInWindow int
	// SenderMaxInWindow is the most acceptances (segments, with
	// CountSegments) any one sender's sliding window held, ending at each
	// of its requests. It never exceeds SenderLimit; 0 when SenderLimit is
	// not set.
	SenderMaxInWindow int

	Suspensions      int // times the account was suspended
	SuspendedAnswers int // 429s answered because the account was suspended
	Canceled         int // requests given up during Latency
	DroppedArrivals  int // arrivals no longer kept, see SimConfig.MaxArrivals
}

// A SimOption configures an optional dependency of a Simulator.
type SimOption func(*Simulator)

// WithSimClock makes the Simulator read the time from now. If now is nil,
// time.Now is used.
func WithSimClock(now func() time.Time) SimOption {
	return func(s *Simulator) {
		if now != nil {
			s.now = now
		}
	}
}

// Simulator is an http.Handler that plays a provider strictly: the generic
// API of docs/contract.md section 3 (NewSimulator), Twilio
// (NewTwilioSimulator) or Vonage (NewVonageSimulator). The rate, the
// suspension and the faults are the same for all; each speaks its
// provider's wire format. It is safe for concurrent use; each request is
// decided under one mutex in O(1) amortized time.
type Simulator struct {
	cfg     SimConfig        // defaults applied; read-only after NewSimulator
	now     func() time.Time // read-only after NewSimulator
	dialect dialect          // read-only after NewSimulator
	token   atomic.Pointer[string]

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
	seq              int             // provider message ids handed out
	stats            SimStats
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
}

// NewSimulator returns a Simulator with cfg's zero fields set to their
// defaults.
func NewSimulator(cfg SimConfig, opts ...SimOption) *Simulator {
	return newSimulator(cfg, genericDialect{}, opts...)
}

func newSimulator(cfg SimConfig, d dialect, opts ...SimOption) *Simulator {
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
		senders:   make(map[string]*ring[time.Time]),
	}
	s.token.Store(&cfg.Token)
	s.fixedIndex = -1 << 63 // no window yet
	for _, o := range opts {
		o(s)
	}
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
func (s *Simulator) Stats() SimStats {
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
	echo       any           // the request's echo, for the dialect's write
}

// ServeHTTP checks, in this order: route (404, 405), token (401),
// suspension (429), FailFor, ThrottleNext (429), content type and body
// (415, 413, 400), a repeated Idempotency-Key, the account's rate (429) and
// the sender's rate (429). A request that passes all is accepted (200).
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := s.dialect.read(w, r, *s.token.Load())
	in.segments = max(in.segments, 1)
	if s.cfg.Latency > 0 && !sleepCtx(r.Context(), s.cfg.Latency) {
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
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// genericDialect is the generic JSON API of docs/contract.md section 3.
type genericDialect struct{}

func (genericDialect) messageID(n int) string { return fmt.Sprintf("msg-%08d", n) }

func (genericDialect) read(w http.ResponseWriter, r *http.Request, token string) request {
	in := request{key: r.Header.Get("Idempotency-Key")}
	in.id = in.key
	// Read the body first, whatever the answer: net/http notices a client
	// that hangs up (ending r.Context(), which Latency honours) only once
	// the body has been read.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	switch {
	case r.URL.Path != "/v1/messages":
		in.routeFault = http.StatusNotFound
		return in
	case r.Method != http.MethodPost:
		in.routeFault = http.StatusMethodNotAllowed
		return in
	}
	in.authorized = bearerMatches(r.Header.Get("Authorization"), token)
	if !in.authorized {
		return in
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		in.bodyFault = http.StatusUnsupportedMediaType
		return in
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		in.bodyFault = http.StatusRequestEntityTooLarge
		return in
	}
	var msg struct {
		To        *string `json:"to"`
		Body      *string `json:"body"`
		ClientRef string  `json:"client_ref"`
		From      string  `json:"from"`
	}
	if err == nil {
		err = json.Unmarshal(body, &msg) // also refuses data after the object
	}
	if in.id == "" {
		in.id = msg.ClientRef
	}
	in.from = msg.From
	if err != nil || msg.To == nil || !isE164(*msg.To) || msg.Body == nil || *msg.Body == "" {
		in.bodyFault = http.StatusBadRequest
		return in
	}
	in.to = *msg.To
	in.segments, _ = Segments(*msg.Body)
	return in
}

func bearerMatches(h, token string) bool {
	if token == "" {
		return true
	}
	scheme, tok, _ := strings.Cut(h, " ")
	return strings.EqualFold(scheme, "Bearer") && secretEqual(tok, token)
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
	return allDigits(to[1:])
}

// decide answers one request at now. s.mu must be held.
func (s *Simulator) decide(now time.Time, in request) answer {
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
	return answer{outcome: outAccepted, status: http.StatusOK, reason: "accepted", messageID: s.dialect.messageID(s.seq)}
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

func (genericDialect) write(w http.ResponseWriter, a answer) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	switch a.status {
	case http.StatusTooManyRequests:
		if a.retryAfter >= 0 {
			h.Set("Retry-After", formatSeconds(a.retryAfter))
		}
	case http.StatusMethodNotAllowed:
		h.Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(a.status)
	body := map[string]string{"error": a.reason}
	if a.status >= 200 && a.status < 300 {
		body = map[string]string{"status": a.reason}
		if a.messageID != "" {
			body["id"] = a.messageID
		}
	}
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n'))
}

// formatSeconds writes d as decimal seconds, rounded up to the millisecond
// so that the caller never waits less than d.
func formatSeconds(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
