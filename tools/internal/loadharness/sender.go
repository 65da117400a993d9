package loadharness

import (
	"context"
	"errors"
	"hash/fnv"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/sleep"
	"smsdispatcher/ledger"
	"smsdispatcher/nack"
	"smsdispatcher/provider"
)

const (
	// sendTimeout bounds one provider send; a send on the wire when the run
	// ends finishes within it.
	sendTimeout = 2 * time.Second
	// spinInterval is the old send loop's time.sleep(0.001) between denied
	// asks (docs/design.md, "The incident it replaces").
	spinInterval = time.Millisecond
	// oldSendTries is the old send loop's for attempt in range(4): a 429 is re-sent
	// at once, four tries in all.
	oldSendTries = 4
	// oldRedisTimeout bounds one Redis call of the old strategies; the
	// old code's client had no timeout, and no fault here hangs Redis.
	oldRedisTimeout = time.Second
	// The dispatcher's max waits for a send slot (docs/contract.md section 4).
	otpMaxWait       = time.Second
	marketingMaxWait = 8 * time.Second
)

// The message every send carries; the simulator checks its shape. Its
// body is sendBody, or bodyOf(--segments).
const (
	simToken = "loadtest-token"
	sendTo   = "+819012345678"
	sendBody = "loadtest"
)

// bodyOf returns a GSM-7 body of n segments (sendBody for n <= 1).
func bodyOf(n int) string {
	if n <= 1 {
		return sendBody
	}
	return strings.Repeat("x", 153*n-10) // more than 153×(n-1), at most 153×n
}

// segmentsOf returns the segments, 1 to n, of the message id in a load of
// mixed lengths: fixed by the id (a redelivery keeps its length), spread
// evenly over the ids.
func segmentsOf(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32()%uint32(n)) + 1
}

// A sender stands for one pod: its own Redis client, provider client,
// clock skew and send policy. Its workers share it; it is safe for
// concurrent use.
type sender struct {
	skew time.Duration
	body string
	// mix, when set, holds bodies of 1, 2, ... segments, and each message
	// takes the one of its segmentsOf(id, len(mix)) instead of body.
	mix    []string
	client *provider.Client
	policy policy
	load   *load
	st     *counters
}

// bodyFor returns the body m is sent with.
func (s *sender) bodyFor(m msg) string {
	if len(s.mix) > 0 {
		return s.mix[segmentsOf(m.id, len(s.mix))-1]
	}
	return s.body
}

// now is the sender's notion of the time: true time off by its skew.
func (s *sender) now() time.Time { return time.Now().Add(s.skew) }

// work takes messages until ctx ends and hands each to the policy.
func (s *sender) work(ctx context.Context, otpOnly bool) {
	for {
		m, ok := s.load.next(ctx, otpOnly)
		if !ok {
			return
		}
		s.policy.handle(ctx, s, m)
	}
}

// send posts m once, from the pool's sender named from ("" names none: the
// request carries no from). A send keeps going when the run ends (it may
// already be on the wire) but gives up after sendTimeout. With admittedAt
// set, it records the time from then to net/http having written the
// request; only the first write counts (the provider client never re-sends
// a request, and a transport's retry must not count twice).
func (s *sender) send(ctx context.Context, m msg, admittedAt time.Time, from string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	if !admittedAt.IsZero() && !s.st.noSamples {
		var wrote atomic.Bool
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(info httptrace.WroteRequestInfo) {
				if info.Err == nil && wrote.CompareAndSwap(false, true) {
					s.st.wroteRequest(time.Since(admittedAt))
				}
			},
		})
	}
	_, err := s.client.Send(ctx, provider.Message{ID: m.id, To: sendTo, Body: s.bodyFor(m), From: from})
	return err
}

// admitted records that m may go now.
func (s *sender) admitted(m msg) {
	s.st.admitted.Add(1)
	if m.class == admission.OTP {
		s.st.admittedOTP(m, time.Now())
	}
}

// A policy admits and sends one message and ends it the way its strategy
// does. handle returns early, dropping m, once ctx ends.
type policy interface {
	handle(ctx context.Context, s *sender, m msg)
}

// oldPolicy is the incident's send loop around an old limiter
// (docs/design.md, "The incident it replaces"):
//
//	while not limiter.acquire(): time.sleep(0.001)
//	for attempt in range(4):
//	    resp = sms.send(msg)
//	    if resp.status_code != 429: break
//	msg.ack()
//
// A Redis error admits (allow returns true with it).
type oldPolicy struct {
	allow func(ctx context.Context, now time.Time) (bool, error)
}

func (p oldPolicy) handle(ctx context.Context, s *sender, m msg) {
	for {
		actx, cancel := context.WithTimeout(ctx, oldRedisTimeout)
		ok, err := p.allow(actx, s.now())
		cancel()
		if ctx.Err() != nil {
			return // the run is over; a failed call now is not Redis's fault
		}
		if err != nil {
			s.st.redisErrors.Add(1)
		}
		if ok {
			break
		}
		s.st.spins.Add(1)
		if !sleep.For(ctx, spinInterval) {
			return
		}
	}
	s.admitted(m)
	for try := 1; ; try++ {
		err := s.send(ctx, m, time.Time{}, "")
		throttled := nack.Classify(err) == nack.Throttled
		if throttled && try == 1 {
			s.st.first429.Add(1)
		}
		if !throttled || try == oldSendTries || ctx.Err() != nil {
			if err != nil {
				s.st.lost.Add(1) // msg.ack() whatever happened
			}
			return
		}
		s.st.retries.Add(1)
	}
}

// gcraPolicy is the dispatcher's: the shared limiter with the class's max
// wait, taking the message's send-once claim in the same call, one send,
// the record of its outcome and the lease's end in one more call, and the
// outcome mapped by package nack. Denial, 429 and transient failures nack
// (the message comes back by redelivery); a 429 also stops every sender
// for its Retry-After. Nothing is retried on the spot. A message goes from
// the sender of the pool its admission took (Decision.Sender; none without
// a pool), as the dispatcher sends it.
type gcraPolicy struct {
	lim *admission.Limiter
	// cost is the units each send takes: its segments with --rate-unit
	// segment, else 1. With the sender's mix, each message takes its own
	// segments (rates in segments).
	cost int
	// ids starts the send-once id of each message: the senders of one
	// load share one, the soak's processes (each with its own load) each
	// have their own.
	ids string
	seq *atomic.Int64 // claim tokens
}

// recordTTL is how long the load test keeps a message's send-once record:
// long enough for any redelivery of a run, short enough that a soak's
// Redis reaches its steady size within its first minute.
const recordTTL = 30 * time.Second

func (p gcraPolicy) handle(ctx context.Context, s *sender, m msg) {
	maxWait := marketingMaxWait
	if m.class == admission.OTP {
		maxWait = otpMaxWait
	}
	cost := p.cost
	if len(s.mix) > 0 {
		cost = segmentsOf(m.id, len(s.mix))
	}
	claim := admission.Claim{ID: p.ids + m.id, Token: strconv.FormatInt(p.seq.Add(1), 36), TTL: 5 * time.Second, Count: true}
	d, err := p.lim.Admit(ctx, m.class, cost, maxWait, claim)
	returned := time.Now() // the admission returned: the start of admit-to-wire
	if err != nil {
		return // the run is over
	}
	if d.Reason == admission.ReasonRecord {
		if d.Record.State == ledger.Held {
			s.st.nacks.Add(1)
			s.load.nack(m)
		}
		return // sent or refused before: acked
	}
	if !d.Allowed {
		s.st.denied.Add(1)
		s.st.nacks.Add(1)
		s.load.nack(m)
		return
	}
	if d.Source == admission.SourceFallback {
		s.st.fallback.Add(1)
	}
	s.admitted(m)
	m.sends++
	err = s.send(ctx, m, returned, d.Sender)
	out := nack.Classify(err)
	record := ""
	switch out {
	case nack.Sent:
		record = ledger.RecordSent
	case nack.Rejected:
		record = ledger.RefusedRecord(err.Error())
	}
	if serr := p.lim.Settle(context.WithoutCancel(ctx), d, record, admission.ResultNone, ledger.Story{}); serr != nil {
		s.st.redisErrors.Add(1)
	}
	if out == nack.Throttled {
		if m.sends == 1 {
			s.st.first429.Add(1)
		}
		retryAfter := provider.DefaultRetryAfter
		if pe, ok := errors.AsType[*provider.Error](err); ok {
			retryAfter = pe.RetryAfter
		}
		if terr := p.lim.ReportThrottled(context.WithoutCancel(ctx), retryAfter); terr != nil {
			s.st.redisErrors.Add(1) // this sender honours the penalty alone
		}
	}
	switch nack.ActionFor(out) {
	case nack.Nack:
		s.st.nacks.Add(1)
		s.load.nack(m)
	case nack.DeadLetter:
		s.st.deadLettered.Add(1)
	}
}

// redisClient returns a sender's own Redis client: context deadlines
// honoured (the real limiter needs it), no retries inside the client, short
// dials, commands counted by calls.
func redisClient(base *redis.Options, addr string, calls *callCounter) *redis.Client {
	o := *base
	o.Addr = addr
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DisableIdentity = true
	o.DialTimeout = 500 * time.Millisecond
	c := redis.NewClient(&o)
	c.AddHook(calls)
	return c
}
