package providertest

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// ReceiptConfig configures the delivery receipts a Simulator posts. A send
// asks for them by naming a URL: the generic API's JSON field
// status_callback, Twilio's form field StatusCallback, Vonage's form field
// callback; a send that names none gets none. The zero value posts, for
// every message, one receipt saying it was delivered, 100 to 300 ms after
// its acceptance, signed as below, by 8 goroutines, retrying a non-2xx
// answer 3 times.
//
// Each receipt is posted in its provider's own shape and signed with the
// provider's own algorithm, written in this package (never package
// provider's verifier, so that each checks the other):
//
//   - generic: a JSON body {"id", "client_ref", "status", "error_code",
//     "timestamp"} (docs/contract.md section 3), X-Signature: sha256=<hex
//     HMAC-SHA256 of the body keyed by Secret>; no header when Secret is
//     empty;
//   - Twilio: a form (MessageSid, SmsSid, MessageStatus, SmsStatus,
//     AccountSid, From, To, ApiVersion, ErrorCode for undelivered and
//     failed, RawDlrDoneDate for delivered and undelivered,
//     MessagingServiceSid when the send named one) with
//     X-Twilio-Signature, HMAC-SHA1 keyed by the account's auth token
//     (Config.Token, or SetToken's at the time of the post) over the
//     callback URL followed by each parameter's name and value, sorted by
//     name; Secret is not used;
//   - Vonage: a form, or JSON with JSON set, per part (messageId is the
//     part's id), with msisdn, to (the sender), network-code, price,
//     status, scts, err-code, api-key, client-ref when the send had one and
//     message-timestamp; with Secret set, also timestamp, nonce and sig
//     (SignatureMethod over every other parameter sorted by name, '&' and
//     '=' in values replaced by '_').
type ReceiptConfig struct {
	// Secret is the key of the generic API's X-Signature and of Vonage's
	// sig. Empty: receipts are posted unsigned (a Vonage account's
	// default).
	Secret string
	// SignatureMethod is Vonage's: md5hash (MD5 of the parameters with
	// Secret appended), md5, sha1, sha256 or sha512 (HMAC keyed by
	// Secret). Empty means md5hash.
	SignatureMethod string
	// Delivered says, per destination prefix, what share of messages are
	// delivered and how the others fail. The longest Prefix that begins a
	// message's number (E.164 with '+') decides; a number no rule matches
	// is delivered. Shares are kept exactly, not drawn: with Share 0.75,
	// 3 of every 4 messages to the prefix are delivered.
	Delivered []Delivery
	// FailStatus is the final status of a message that is not delivered,
	// in the provider's words, for a rule that names none. Empty means
	// "undelivered" (generic, Twilio) or "rejected" (Vonage).
	FailStatus string
	// FailCode is the error code of a message that is not delivered, for
	// a rule that names none. Empty means "30007" (Twilio: filtered by the
	// carrier), "6" (Vonage: anti-spam rejection) or none (generic).
	FailCode string
	// MinLatency and MaxLatency bound the time from a message's
	// acceptance to its final receipt, drawn uniformly; intermediate
	// receipts come at half of it. Both zero means 100ms to 300ms, time
	// for the sender to record its send before the receipts come, as it
	// has at a provider. A MaxLatency below MinLatency means MinLatency
	// (a negative MinLatency, zero): MaxLatency -1 posts at once. Latency
	// runs on real time, whatever clock is given with WithClock.
	MinLatency, MaxLatency time.Duration
	// Latency, if not nil, draws each message's latency instead of
	// MinLatency and MaxLatency. It is called under the Simulator's
	// receipt lock and must be safe to call from any goroutine.
	Latency func() time.Duration
	// Intermediate lists the statuses posted, in order, before a part's
	// final one, in the provider's words: Twilio "sent", Vonage
	// "accepted", generic "sent". Nil: the final receipt only.
	Intermediate []string
	// Duplicates is the share of messages whose final receipts are
	// posted twice, as providers document they may be (signed anew:
	// Vonage's second has its own timestamp and nonce).
	Duplicates float64
	// Replayed is the share of messages whose final receipts are posted
	// twice byte for byte, body and headers, as an attacker who recorded
	// one would replay it.
	Replayed float64
	// OutOfOrder is the share of messages whose final receipt is posted
	// before their intermediate ones; it has no effect without
	// Intermediate.
	OutOfOrder float64
	// Forged is the share of receipts signed with a wrong key, as a
	// forger would: for the receiver's refusal. They are counted in
	// ReceiptStats.Forged and retried like any other refused receipt.
	Forged float64
	// JSON makes the Vonage simulator post receipts as JSON rather than a
	// form, as its dashboard can be set to.
	JSON bool
	// Workers is how many goroutines post receipts. Zero or negative
	// means 8.
	Workers int
	// Queue bounds the messages whose receipts are not all done (waiting
	// for their latency or a retry, or being posted); past it a message's
	// receipts are dropped and counted in ReceiptStats.Dropped. Zero or
	// negative means 65536.
	Queue int
	// Retries is how many times a receipt answered with a non-2xx status
	// (or not answered) is posted again, after RetryDelay doubled each
	// time. Zero means 3; negative means never.
	Retries int
	// RetryDelay is the wait before the first retry. Zero or negative
	// means 50ms.
	RetryDelay time.Duration
	// Timeout bounds one post. Zero or negative means 5s.
	Timeout time.Duration
}

// Delivery is what becomes of the messages to one destination prefix.
type Delivery struct {
	// Prefix is the start of the number, E.164 with '+' ("+62"); empty
	// matches every number.
	Prefix string
	// Share is the share of the messages delivered, from 0 to 1.
	Share float64
	// Status and ErrorCode are the final status and error code of the
	// others, in the provider's words; empty means ReceiptConfig's
	// FailStatus and FailCode.
	Status, ErrorCode string
}

func (c ReceiptConfig) withDefaults() ReceiptConfig {
	if c.MinLatency == 0 && c.MaxLatency == 0 {
		c.MinLatency, c.MaxLatency = 100*time.Millisecond, 300*time.Millisecond
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Queue <= 0 {
		c.Queue = 1 << 16
	}
	if c.Retries == 0 {
		c.Retries = 3
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 50 * time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	return c
}

// ReceiptStats counts the receipts a Simulator posted. Every receipt is
// counted, once it is done, in exactly one of Posted, Failed and Dropped.
type ReceiptStats struct {
	Posted   int            // answered with a 2xx status
	ByStatus map[string]int // Posted by the status they carried, in the provider's words
	Failed   int            // still refused after Retries retries
	Dropped  int            // never posted: the queue was full, or the Simulator closed
	Attempts int            // posts made, retries included
	Retries  int            // posts repeated after a non-2xx answer or none
	// Refused counts the non-2xx answers by status; a post that got no
	// answer counts under 0.
	Refused map[int]int
	// Forged counts the receipts done (posted or given up) that were
	// signed wrong on purpose. Duplicated, Replayed and Reordered count
	// the messages planned with their final receipts twice (signed anew,
	// or replayed), and with their final receipt before their
	// intermediate ones.
	Forged, Duplicated, Replayed, Reordered int
	// Messages counts the messages that asked for receipts; Pending, those
	// whose receipts are not all done.
	Messages, Pending int
}

// PostedReceipt is one receipt as the Simulator posted it (its last
// attempt). It holds no number.
type PostedReceipt struct {
	At         time.Time // when the answer came, real time
	ProviderID string    // the message's id (Vonage: the part's)
	Ref        string    // the client reference the send named; "" for Twilio
	Status     string    // in the provider's words
	ErrorCode  string
	Answer     int  // the HTTP status of the answer; 0 when none came
	Forged     bool // signed with a wrong key on purpose
}

// SetDelivered makes share of the messages to prefix accepted from now on
// delivered and the others fail with ReceiptConfig.FailStatus (or its
// default) and errorCode (empty: FailCode, or its default), replacing the
// rule for prefix, as a carrier that starts filtering a route does.
func (s *Simulator) SetDelivered(prefix string, share float64, errorCode string) {
	s.UpdateReceipts(func(c *ReceiptConfig) {
		d := Delivery{Prefix: prefix, Share: share, ErrorCode: errorCode}
		for i := range c.Delivered {
			if c.Delivered[i].Prefix == prefix {
				c.Delivered[i] = d
				return
			}
		}
		c.Delivered = append(c.Delivered, d)
	})
}

// UpdateReceipts changes the receipt configuration with edit, for the
// messages accepted from now on (Secret and the signing knobs also for
// the receipts not yet posted). Workers keeps its value once the first
// message has asked for receipts.
func (s *Simulator) UpdateReceipts(edit func(*ReceiptConfig)) {
	p := s.receipts
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cfg
	c.Delivered = append([]Delivery(nil), c.Delivered...)
	c.Intermediate = append([]string(nil), c.Intermediate...)
	edit(&c)
	p.cfg = c.withDefaults()
}

// ReceiptStats returns the receipt counts so far.
func (s *Simulator) ReceiptStats() ReceiptStats {
	p := s.receipts
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.ByStatus = make(map[string]int, len(p.stats.ByStatus))
	for k, v := range p.stats.ByStatus {
		st.ByStatus[k] = v
	}
	st.Refused = make(map[int]int, len(p.stats.Refused))
	for k, v := range p.stats.Refused {
		st.Refused[k] = v
	}
	return st
}

// PostedReceipts returns a copy of the kept receipts, in the order they
// were done (as many as Config.MaxArrivals keeps).
func (s *Simulator) PostedReceipts() []PostedReceipt {
	p := s.receipts
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posted.appendValues(make([]PostedReceipt, 0, p.posted.len()))
}

// sentMessage is an accepted message that asked for receipts: what its
// receipts say. It holds the number until they are done.
type sentMessage struct {
	callback string
	parts    []string // the provider's ids: one, or one per Vonage part
	ref      string
	to, from string
	echo     any  // the dialect's echo of the send
	optedOut bool // to a number on the opt-out list: its receipt says so (optOutLater)
}

// receiptStep is one receipt of a message.
type receiptStep struct {
	part              string // the provider's id it names
	status, errorCode string
	due               time.Time
	final             bool
	forged            bool
	replay            bool // the previous receipt's bytes again
}

// plan decides a message's receipts: their statuses, order, duplicates
// and times, from now (real time). p.mu must be held.
func (p *receiptPoster) plan(m sentMessage, now time.Time) []receiptStep {
	c := &p.cfg
	rule := p.rule(m.to)
	defStatus, defCode := p.dialect.receiptFailure()
	failStatus := firstNonEmpty(rule.Status, c.FailStatus, defStatus)
	failCode := firstNonEmpty(rule.ErrorCode, c.FailCode, defCode)
	var delivered bool
	if o, ok := p.dialect.(optOutLater); ok && m.optedOut {
		// Not drawn: the shares stay exact for the other messages.
		failStatus, failCode = o.optOutReceipt()
	} else {
		delivered = p.take("delivered "+rule.Prefix, rule.Share)
	}
	dup := p.take("duplicate", c.Duplicates)
	replay := p.take("replay", c.Replayed)
	reorder := len(c.Intermediate) > 0 && p.take("reorder", c.OutOfOrder)
	if dup {
		p.stats.Duplicated++
	}
	if replay {
		p.stats.Replayed++
	}
	if reorder {
		p.stats.Reordered++
	}
	latency := p.latency()
	finalAt, midAt := now.Add(latency), now.Add(latency/2)
	var steps []receiptStep
	for i, part := range m.parts {
		final := receiptStep{part: part, status: "delivered", final: true, due: finalAt}
		// A failed message of several parts fails in its last one: the
		// others are delivered, as a carrier's receipts for parts are
		// independent.
		if !delivered && i == len(m.parts)-1 {
			final.status, final.errorCode = failStatus, failCode
		}
		var mid []receiptStep
		for _, st := range c.Intermediate {
			mid = append(mid, receiptStep{part: part, status: st, due: midAt})
		}
		if reorder {
			for j := range mid {
				mid[j].due = finalAt
			}
			steps = append(steps, final)
			steps = append(steps, mid...)
		} else {
			steps = append(steps, mid...)
			steps = append(steps, final)
		}
		if dup {
			steps = append(steps, final)
		}
	}
	for i := range steps {
		steps[i].forged = p.take("forged", c.Forged)
	}
	if replay { // after each final receipt
		var out []receiptStep
		for _, st := range steps {
			out = append(out, st)
			if st.final {
				again := st
				again.replay = true
				out = append(out, again)
			}
		}
		steps = out
	}
	return steps
}

// rule returns the Delivery that decides for the number to.
func (p *receiptPoster) rule(to string) Delivery {
	best, found := Delivery{Share: 1}, false
	for _, d := range p.cfg.Delivered {
		if strings.HasPrefix(to, d.Prefix) && (!found || len(d.Prefix) > len(best.Prefix)) {
			best, found = d, true
		}
	}
	return best
}

// take reports whether the next event of a share-driven kind happens: the
// shares are kept exactly, the events spread evenly. Each call adds share
// to the kind's balance, which starts at one half, and the event happens
// when the balance reaches one: with share 0.9 the first message is
// delivered, with 0.25 the second of every four.
func (p *receiptPoster) take(kind string, share float64) bool {
	share = min(max(share, 0), 1)
	owed, ok := p.owed[kind]
	if !ok {
		owed = 0.5
	}
	owed += share
	if owed >= 1-1e-9 {
		p.owed[kind] = owed - 1
		return true
	}
	p.owed[kind] = owed
	return false
}

// latency draws a message's latency.
func (p *receiptPoster) latency() time.Duration {
	c := &p.cfg
	if c.Latency != nil {
		return max(c.Latency(), 0)
	}
	lo, hi := max(c.MinLatency, 0), c.MaxLatency
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// receiptRequest is one receipt ready to sign: what a dialect's
// receiptBody encodes.
type receiptRequest struct {
	msg   *sentMessage
	step  receiptStep
	at    time.Time      // the Simulator's clock when posting
	token string         // the Simulator's credential (Twilio's auth token)
	cfg   *ReceiptConfig // Secret, SignatureMethod, JSON
}

// signingKey returns key, or a wrong key for a forged receipt.
func (r receiptRequest) signingKey(key string) string {
	if r.step.forged {
		return "forged:" + key
	}
	return key
}

// receiptHeader returns a receipt's header with its content type.
func receiptHeader(contentType string) http.Header {
	h := make(http.Header)
	h.Set("Content-Type", contentType)
	return h
}

// Close stops posting receipts: the posts under way are canceled, the
// receipts not yet posted are dropped (ReceiptStats.Dropped), and it
// returns once the posting goroutines have ended. A message accepted
// after Close gets no receipt. The Simulator still answers sends.
func (s *Simulator) Close() { s.receipts.close() }

// WaitReceipts returns once every receipt planned so far is done (posted,
// given up or dropped), or with ctx's error when ctx ends first.
func (s *Simulator) WaitReceipts(ctx context.Context) error { return s.receipts.wait(ctx) }
