package providertest

import "time"

// Config configures a Simulator. The zero value means the defaults, which
// are the account's contract of docs/contract.md section 3: 100 messages per
// strict sliding second, suspension for 60 minutes after more than 300 429s
// in 10 minutes.
type Config struct {
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
	// and counted in Stats.SuspendedAnswers, not Throttled.
	SuspendFor time.Duration
	// Latency is added before deciding and answering. If the request's
	// context ends first, nothing is answered and the arrival is recorded
	// with StatusClientClosed. Zero or negative means none. Latency runs on
	// real time, whatever clock is given with WithClock.
	Latency time.Duration
	// HonourIdempotencyKey makes a repeat of an accepted Idempotency-Key
	// answer 200 without counting as a send (Stats.Duplicates). If
	// false, every accepted repeat is a new send.
	HonourIdempotencyKey bool
	// MaxArrivals bounds the arrivals kept for Arrivals; past it the oldest
	// are dropped and counted in Stats.DroppedArrivals. Zero means
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
	// in Stats.SenderThrottled and toward suspension. Both limits are
	// checked, the account's first; a request refused by either counts in
	// neither window. Zero or negative: senders are not limited.
	SenderLimit int
	// SenderWindow is the length of a sender's window. Zero or negative
	// means 1s.
	SenderWindow time.Duration
	// Receipts configures the delivery receipts posted to the sends that
	// ask for them; see ReceiptConfig. UpdateReceipts and SetDelivered
	// change it while the Simulator runs.
	Receipts ReceiptConfig
}

func (c Config) withDefaults() Config {
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
	// Twilio's From, Vonage's from), the key of Config.SenderLimit;
	// empty when it named none or was not read that far.
	From string
}

// Stats counts what a Simulator answered. Every arrival is counted in
// exactly one of Accepted, Throttled, SenderThrottled, Failed, Rejected,
// Duplicates, SuspendedAnswers and Canceled.
type Stats struct {
	Accepted   int // counted as a send
	Throttled  int // over the account's rate or forced by ThrottleNext (429, or the provider's way)
	Failed     int // answered by FailFor, whatever the status
	Rejected   int // refused: a bad route, credential, body or number
	Duplicates int // 200 for an accepted Idempotency-Key, not a send
	// SenderThrottled counts the requests within the account's rate but
	// over their sender's (Config.SenderLimit), answered as Throttled
	// ones are.
	SenderThrottled int
	// Suspended reports whether the account is suspended now.
	Suspended bool
	// Unauthorized counts the Rejected answers for a bad credential.
	Unauthorized int
	// OptedOut counts the messages to a number on the Simulator's own
	// opt-out list (OptOut): Rejected answers, and on Vonage acceptances
	// whose receipt says so.
	OptedOut int
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
	DroppedArrivals  int // arrivals no longer kept, see Config.MaxArrivals
}
