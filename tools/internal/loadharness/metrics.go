package loadharness

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// counters are what the senders of one run count as they go. Safe for
// concurrent use.
type counters struct {
	admitted     atomic.Int64 // messages the strategy let through to a send
	spins        atomic.Int64 // old strategies: denials followed by a 1 ms sleep
	retries      atomic.Int64 // old strategies: immediate re-sends after a 429
	lost         atomic.Int64 // old strategies: acked after a failed last try
	nacks        atomic.Int64 // gcra: messages handed back for redelivery
	denied       atomic.Int64 // gcra: of the nacks, no slot within max wait
	fallback     atomic.Int64 // gcra: admissions by the Redis-down fallback
	deadLettered atomic.Int64 // gcra: other 4xx
	redisErrors  atomic.Int64 // Redis calls that failed (old: each let a message through)
	first429     atomic.Int64 // 429s answered to a first try of a message
	// noSamples, set before the counters are used, keeps no per-message
	// samples: no OTP waits, no admit-to-wire latencies (a soak sender's
	// memory must not grow with the run by design).
	noSamples bool

	mu sync.Mutex
	// Guarded by mu. Queue arrival to first admission, by msg.seq; an OTP
	// admitted again after a nack keeps its first wait.
	otpWaits map[int]time.Duration
	// Guarded by mu. gcra: for each send, the time from the limiter's
	// admission returning to net/http having written the request.
	admitToWire []time.Duration
}

// admittedOTP records that an OTP was let through at now.
func (c *counters) admittedOTP(m msg, now time.Time) {
	if c.noSamples {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.otpWaits == nil {
		c.otpWaits = map[int]time.Duration{}
	}
	if _, ok := c.otpWaits[m.seq]; !ok {
		c.otpWaits[m.seq] = now.Sub(m.arrived)
	}
}

// wroteRequest records one send's admit-to-wire latency.
func (c *counters) wroteRequest(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admitToWire = append(c.admitToWire, d)
}

// admitToWireQuantiles returns the p50 and p99 of the admit-to-wire
// latencies, and how many there are.
func (c *counters) admitToWireQuantiles() (p50, p99 time.Duration, n int) {
	c.mu.Lock()
	ws := make([]wait, len(c.admitToWire))
	for i, d := range c.admitToWire {
		ws[i] = wait{Duration: d}
	}
	c.mu.Unlock()
	return percentile(ws, 0.50).Duration, percentile(ws, 0.99).Duration, len(ws)
}

// wait is one OTP's wait; censored when it was never admitted, and the
// wait is then only known to be at least Duration (to the run's end).
type wait struct {
	time.Duration
	censored bool
}

// otpWaitsAt returns every OTP's wait: measured if it was admitted, else
// censored at end.
func (c *counters) otpWaitsAt(arrivals []time.Time, end time.Time) []wait {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := make([]wait, len(arrivals))
	for i, at := range arrivals {
		if d, ok := c.otpWaits[i]; ok {
			ws[i] = wait{Duration: d}
		} else {
			ws[i] = wait{Duration: max(end.Sub(at), 0), censored: true}
		}
	}
	return ws
}

// callCounter is a go-redis hook that counts the commands a client sends,
// leaving out the handshake of each new connection. Safe for concurrent use.
type callCounter struct{ n atomic.Int64 }

var _ redis.Hook = (*callCounter)(nil)

// handshake names the commands a client sends by itself on a new connection.
var handshake = map[string]bool{"hello": true, "client": true, "auth": true, "select": true}

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake[cmd.Name()] {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if !handshake[cmd.Name()] {
				c.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// served counts the waits of ws that ended in an admission: those not
// censored.
func served(ws []wait) int {
	n := 0
	for _, w := range ws {
		if !w.censored {
			n++
		}
	}
	return n
}

// percentile returns the nearest-rank q-quantile (0 < q <= 1) of ws,
// sorting ws in place; the zero wait for none. A censored result means the
// quantile is at least that long.
func percentile(ws []wait, q float64) wait {
	if len(ws) == 0 {
		return wait{}
	}
	slices.SortStableFunc(ws, func(a, b wait) int { return cmp.Compare(a.Duration, b.Duration) })
	i := int(math.Ceil(q*float64(len(ws)))) - 1
	return ws[max(0, min(i, len(ws)-1))]
}

// ratio returns n/d, or 0 when d is 0.
func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}
