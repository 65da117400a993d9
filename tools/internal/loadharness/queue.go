package loadharness

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"smsdispatcher/admission"
)

// otpQueueLen bounds the OTP queue; at the default 10/s it holds minutes.
const otpQueueLen = 1 << 14

// msg is one message of the load.
type msg struct {
	id      string
	class   admission.Class
	arrived time.Time // when an OTP joined the queue; zero for marketing
	seq     int       // an OTP's index in load.otpArrivals
	sends   int       // how many times it went to the provider, redeliveries included
}

// load is what all senders of one run share: an OTP queue fed at a fixed
// rate, and a marketing backlog that never runs dry, with the messages that
// were nacked coming back after a delay, as Pub/Sub redelivers them. It is
// safe for concurrent use.
type load struct {
	otp       chan msg     // FIFO of OTPs, fed by stream and by redelivery
	marketing chan msg     // redelivered marketing, served before new ids
	nextID    atomic.Int64 // the backlog: the next marketing id
	dropped   atomic.Int64 // OTPs the full queue could not take
	// noArrivals, set before the load is used, keeps no OTP arrival times
	// (a soak sender's memory must not grow with the run by design).
	noArrivals bool

	delay time.Duration
	wake  chan struct{} // cap 1: a nack arrived
	mu    sync.Mutex
	// Guarded by mu. Nacked messages in order of due time: the delay is
	// constant, so nack order is due order.
	pending []pendingMsg
	// Guarded by mu. When each OTP arrived, by msg.seq.
	otpArrivals []time.Time
}

type pendingMsg struct {
	due time.Time
	m   msg
}

func newLoad(redelivery time.Duration) *load {
	return &load{
		otp:       make(chan msg, otpQueueLen),
		marketing: make(chan msg, 1024),
		delay:     redelivery,
		wake:      make(chan struct{}, 1),
	}
}

// next returns the next message for a worker: an OTP if one is waiting,
// else, unless otpOnly, a redelivered marketing message or a new one. An
// OTP-only worker blocks for an OTP. It reports false once ctx ends.
func (l *load) next(ctx context.Context, otpOnly bool) (msg, bool) {
	if ctx.Err() != nil {
		return msg{}, false
	}
	if otpOnly {
		select {
		case m := <-l.otp:
			return m, true
		case <-ctx.Done():
			return msg{}, false
		}
	}
	select {
	case m := <-l.otp:
		return m, true
	default:
	}
	select {
	case m := <-l.marketing:
		return m, true
	default:
	}
	return msg{id: "mkt-" + strconv.FormatInt(l.nextID.Add(1), 10), class: admission.Marketing}, true
}

// streamOTP puts rate OTPs per second into the queue, evenly spaced, until
// ctx ends.
func (l *load) streamOTP(ctx context.Context, rate float64) {
	if rate <= 0 {
		return
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			var seq int
			if !l.noArrivals {
				l.mu.Lock()
				seq = len(l.otpArrivals)
				l.otpArrivals = append(l.otpArrivals, now)
				l.mu.Unlock()
			}
			select {
			case l.otp <- msg{id: "otp-" + strconv.Itoa(n), class: admission.OTP, arrived: now, seq: seq}:
			default:
				l.dropped.Add(1)
			}
		}
	}
}

// arrivals returns when each OTP arrived, by msg.seq.
func (l *load) arrivals() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.otpArrivals...)
}

// nack hands m back; redeliver puts it in its queue after the delay.
func (l *load) nack(m msg) {
	l.mu.Lock()
	l.pending = append(l.pending, pendingMsg{due: time.Now().Add(l.delay), m: m})
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// redeliver moves nacked messages back into their queues when due, until
// ctx ends; what is pending then is dropped with the run.
func (l *load) redeliver(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		var head pendingMsg
		have := len(l.pending) > 0
		if have {
			head = l.pending[0]
		}
		l.mu.Unlock()
		if !have {
			select {
			case <-l.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		if wait := time.Until(head.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			continue
		}
		q := l.marketing
		if head.m.class == admission.OTP {
			q = l.otp
		}
		select {
		case q <- head.m:
			l.mu.Lock()
			l.pending = l.pending[1:]
			l.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}
