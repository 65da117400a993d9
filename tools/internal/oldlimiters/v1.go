package oldlimiters

import (
	"sync"
	"time"
)

// PerPod is the incident's LIMIT_PER_POD = 100 / 2: "production runs 2 pods".
// At 16 pods the account sees 800 messages per second.
const PerPod = ContractRPS / 2

// ContractRPS is the account's contract the old code was written against.
const ContractRPS = 100

// StaticSplit is v1 of the incident (cart-reminder): each process allows Limit
// messages per second of its own clock, counted in memory in a fixed
// one-second window, with no knowledge of any other process.
//
// The zero value allows PerPod (50) per second. It is safe for concurrent
// use by the goroutines of one process; each process has its own.
type StaticSplit struct {
	// Limit is how many messages one process may send per second of its
	// clock. Zero or negative means PerPod.
	Limit int

	mu  sync.Mutex
	sec int64 // guarded by mu; the Unix second being counted
	n   int   // guarded by mu; admissions in sec
}

// AllowAt reports whether one more message may go at now, counting it if so.
func (s *StaticSplit) AllowAt(now time.Time) bool {
	limit := s.Limit
	if limit <= 0 {
		limit = PerPod
	}
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec != s.sec {
		s.sec, s.n = sec, 0
	}
	if s.n >= limit {
		return false
	}
	s.n++
	return true
}
