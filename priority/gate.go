package priority

import (
	"context"
	"sync"
	"sync/atomic"
)

// Gate holds marketing messages back while any OTP message is waiting.
//
// A Gate is safe for concurrent use. The zero value is an open gate, ready
// to use. A Gate must not be copied after first use.
type Gate struct {
	mu      sync.Mutex
	waiting int           // guarded by mu: OTP messages entered, not yet released
	free    chan struct{} // guarded by mu: nil while waiting == 0; closed when waiting drops to 0

	// woken, if set, runs in WaitMarketing between its wake on a closed
	// free and its next look: a test holds marketing there to choose
	// whether an OTP enters before it looks. Set before first use.
	woken func()
}

// EnterOTP registers an OTP message as waiting and returns at once. Call
// release exactly once when the message's admission step is over (sent,
// denied or given up); calling it again is a no-op.
func (g *Gate) EnterOTP() (release func()) {
	g.mu.Lock()
	if g.waiting == 0 {
		g.free = make(chan struct{})
	}
	g.waiting++
	g.mu.Unlock()

	var released atomic.Bool
	return func() {
		if released.Swap(true) {
			return
		}
		g.mu.Lock()
		g.waiting--
		if g.waiting == 0 {
			close(g.free)
			g.free = nil
		}
		g.mu.Unlock()
	}
}

// WaitMarketing blocks until no OTP message is waiting, and returns nil; or
// until ctx ends, and returns ctx.Err(). When no OTP message is waiting it
// returns nil at once, even if ctx has ended.
//
// All marketing messages blocked here wake together when the last OTP is
// released; each then goes on to admission, which paces them. A woken
// message looks at the gate again before it passes: if an OTP entered in
// between, it waits for that one too. Which comes first, the look or the
// entry, is the scheduler's choice; either way no marketing message passes
// while it sees an OTP waiting.
func (g *Gate) WaitMarketing(ctx context.Context) error {
	for {
		g.mu.Lock()
		free := g.free
		g.mu.Unlock()
		if free == nil {
			return nil
		}
		select {
		case <-free:
			// Another OTP may have entered since; look again.
			if g.woken != nil {
				g.woken()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Waiting returns how many OTP messages are waiting, for metrics.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}
