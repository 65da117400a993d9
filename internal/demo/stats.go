package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/guard"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/scriptop"
	"smsdispatcher/nack"
)

// stats collects events of every instance. Safe for concurrent use.
type stats struct {
	mu       sync.Mutex
	sent     map[admission.Class]int
	done     map[string]bool // message ids that reached an end
	expired  int
	dead     int
	nacked   int
	nackedBy map[string]int                      // outcome -> nacks
	latency  map[admission.Class][]time.Duration // publish → provider's acceptance
	otpWait  []time.Duration                     // received → slot
	first    map[admission.Class]time.Time       // first and last send of each class
	last     map[admission.Class]time.Time
	changed  chan struct{} // signalled after each end
	// With --quiet-hours: the ids deferred, and the sends among them
	// after their release, first and last.
	deferred                  map[string]bool
	released                  int
	firstRelease, lastRelease time.Time
	sentOn                    map[string]int // sends by account
	// The recipients who reply STOP mid-run (optouts.go): the ids of the
	// messages to them (the recipient's index), when each STOP was
	// answered (zero until then) and through which account, and what
	// became of their messages.
	optOutIDs                         map[string]int
	stopAt                            []time.Time
	stopThrough, stoppedOn            map[string]int
	sentBefore, sentWithin, sentAfter int
	stopErr                           string
	// With --guard: the messages the guard blocked, by reason, the ids of
	// the first class's sends and how many (with duplicates), and verify,
	// which publishes an OTP's verification (guard.go).
	blocked     map[string]int
	guardedIDs  map[string]bool
	guardedSent int
	verify      func(id string)
}

func newStats() *stats {
	return &stats{done: map[string]bool{}, nackedBy: map[string]int{}, sent: map[admission.Class]int{}, latency: map[admission.Class][]time.Duration{},
		first: map[admission.Class]time.Time{}, last: map[admission.Class]time.Time{}, changed: make(chan struct{}, 1), deferred: map[string]bool{},
		sentOn: map[string]int{}, optOutIDs: map[string]int{}, stopThrough: map[string]int{}, stoppedOn: map[string]int{},
		blocked: map[string]int{}, guardedIDs: map[string]bool{}}
}

// Observe counts ev (dispatch.Observer).
func (s *stats) Observe(ev dispatch.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Action {
	case nack.Nack:
		s.nacked++
		s.nackedBy[ev.Outcome.String()]++
		return
	case nack.DeadLetter:
		s.dead++
	}
	switch ev.Outcome {
	case nack.Sent:
		s.sent[ev.Class]++
		s.sentOn[ev.Account]++
		if k, ok := s.optOutIDs[ev.ID]; ok {
			s.countOptOutSend(k, ev.Admitted)
		}
		if s.first[ev.Class].IsZero() {
			s.first[ev.Class] = ev.Finished
		}
		s.last[ev.Class] = ev.Finished
		s.latency[ev.Class] = append(s.latency[ev.Class], ev.Finished.Sub(ev.PublishTime))
		if ev.Class == admission.OTP {
			s.otpWait = append(s.otpWait, ev.Admitted.Sub(ev.Received))
		}
		if s.verify != nil && ev.Class == admission.OTP {
			s.guardedSend(ev.ID)
		}
		if s.deferred[ev.ID] {
			s.released++
			if s.firstRelease.IsZero() {
				s.firstRelease = ev.Finished
			}
			s.lastRelease = ev.Finished
		}
	case nack.Deferred:
		s.deferred[ev.ID] = true
	case nack.Expired:
		s.expired++
	case nack.Blocked:
		s.blocked[ev.Blocked]++
	case nack.Suppressed:
		if _, ok := s.optOutIDs[ev.ID]; ok {
			s.stoppedOn[ev.Account]++
		}
	}
	s.done[ev.MessageID] = true
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// guardedSend notes a send of the guarded class's message id, and has
// its code verified unless it is the unverifiedEvery-th such send; s.mu
// is held.
func (s *stats) guardedSend(id string) {
	s.guardedIDs[id] = true
	s.guardedSent++
	if s.guardedSent%unverifiedEvery != 0 {
		s.verify(id)
	}
}

// countOptOutSend counts a send, admitted at admitted, to the k-th
// recipient who replies STOP: before its STOP was answered, within the
// list's optOutBound after it, or later.
func (s *stats) countOptOutSend(k int, admitted time.Time) {
	at := s.stopAt[k]
	switch {
	case at.IsZero() || admitted.Before(at):
		s.sentBefore++
	case admitted.Before(at.Add(optOutBound)):
		s.sentWithin++
	default:
		s.sentAfter++
	}
}

// optOutMessage notes that the message id goes to the k-th recipient who
// replies STOP.
func (s *stats) optOutMessage(id string, k int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.optOutIDs[id] = k
}

// optedOut notes the k-th recipient's STOP, through account, answered at
// at (or failed with err).
func (s *stats) optedOut(k int, account string, at time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.stopErr = fmt.Sprintf("the STOP through %s: %v", account, err)
		return
	}
	s.stopAt[k] = at
	s.stopThrough[account]++
}

// allDone reports whether every message of ids has reached an end.
func (s *stats) allDone(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !s.done[id] {
			return false
		}
	}
	return true
}

// counter counts the Redis commands of one client, and the admission
// script calls and the guard's among them.
type counter struct{ cmds, scripts, guardSent, guardVerify atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd.Args())
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd.Args())
		}
		return next(ctx, cmds)
	}
}
func (c *counter) count(args []any) {
	name := strings.ToLower(fmt.Sprint(args[0]))
	if name == "hello" || name == "client" {
		return
	}
	c.cmds.Add(1)
	if name != "evalsha" && name != "eval" {
		return
	}
	if len(args) > 3 && keys.IsGlobalTAT(fmt.Sprint(args[3])) {
		c.scripts.Add(1)
	}
	switch scriptop.Of(args) {
	case guard.OpSent:
		c.guardSent.Add(1)
	case guard.OpVerify:
		c.guardVerify.Add(1)
	}
}

// total is the sum of n's counts.
func total[K comparable](n map[K]int) int {
	t := 0
	for _, v := range n {
		t += v
	}
	return t
}
