package priority

import (
	"context"
	"sync"
	"sync/atomic"
)

// Gate holds the messages of each class back while a message of an earlier
// class is waiting. Classes are numbered by their place in the priority
// order: 0 is served first.
//
// A Gate is safe for concurrent use. The zero value is an open gate, ready
// to use. A Gate must not be copied after first use.
type Gate struct {
	mu      sync.Mutex
	waiting []int         // guarded by mu: by class, messages entered, not yet released
	changed chan struct{} // guarded by mu: closed (and dropped) when a class's last waiting message is released

	// woken, if set, runs in Wait between its wake on a closed changed and
	// its next look: a test holds a message there to choose whether an
	// earlier one enters before it looks. Set before first use.
	woken func()
}

// Enter registers a message of class pos as waiting and returns at once.
// Call release exactly once when the message's admission step is over
// (sent, denied or given up); calling it again is a no-op.
func (g *Gate) Enter(pos int) (release func()) {
	g.mu.Lock()
	for len(g.waiting) <= pos {
		g.waiting = append(g.waiting, 0)
	}
	g.waiting[pos]++
	g.mu.Unlock()

	var released atomic.Bool
	return func() {
		if released.Swap(true) {
			return
		}
		g.mu.Lock()
		g.waiting[pos]--
		if g.waiting[pos] == 0 && g.changed != nil {
			close(g.changed)
			g.changed = nil
		}
		g.mu.Unlock()
	}
}

// ahead is how many messages of the classes before pos wait. g.mu must be
// held.
func (g *Gate) ahead(pos int) int {
	n := 0
	for _, w := range g.waiting[:min(pos, len(g.waiting))] {
		n += w
	}
	return n
}

// Ahead returns how many messages of the classes before pos are waiting.
func (g *Gate) Ahead(pos int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ahead(pos)
}

// Wait blocks until no message of a class before pos is waiting, and
// returns nil; or until ctx ends, and returns ctx.Err(). When none is
// waiting it returns nil at once, even if ctx has ended. The first class
// (pos 0) never waits.
//
// The messages blocked here wake together when a class's last waiting
// message is released; each then looks at the gate again before it
// passes: if an earlier message entered in between, it waits for that one
// too. Which comes first, the look or the entry, is the scheduler's
// choice; either way no message passes while it sees an earlier class's
// message waiting.
func (g *Gate) Wait(ctx context.Context, pos int) error {
	for {
		g.mu.Lock()
		if g.ahead(pos) == 0 {
			g.mu.Unlock()
			return nil
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-changed:
			// Another message may have entered since; look again.
			if g.woken != nil {
				g.woken()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Waiting returns how many messages of class pos are waiting, for metrics.
func (g *Gate) Waiting(pos int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pos >= len(g.waiting) {
		return 0
	}
	return g.waiting[pos]
}
