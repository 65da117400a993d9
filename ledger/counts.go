package ledger

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The delivery counters (receipt.lua's dlr keys, read by DeliveryStats)
// are counted by the process: each fold returns what it counted, the
// Ledger adds them up, and a receipt.lua call writes them, one HINCRBY
// per counter's field, at most once per countsEvery: the next call of a
// receipt, a sweep or a flush once countsEvery has passed since the last
// write, else a timer's flush countsEvery after the first count kept, and
// FlushPublished's at once (the stop). The counters are status's figures
// (the delivered ratio and p50/p99), up to countsEvery late; a process
// killed loses its last second's, a fold whose reply is lost (a timeout)
// its own, and a call that timed out after Redis ran it counts what it
// carried twice: it is carried again. The route's skip counts in the
// fold, at once, and the sends counter is finish.lua's: neither waits.
// The timer's clock is the system's, not the Ledger's Clock.

// countsEvery is how often a Ledger writes its delivery counts at most,
// and how long a count waits at most while Redis answers.
const countsEvery = time.Second

// deliveryCounts are counts by counter: its key after the tag
// ('dlr:<class>:<unix minute>') and field.
type deliveryCounts map[[2]string]int64

// arg is c as receipt.lua's ARGV[10], in a stable order.
func (c deliveryCounts) arg() string {
	var b strings.Builder
	for _, k := range slices.SortedFunc(maps.Keys(c), func(x, y [2]string) int { return strings.Compare(x[0]+" "+x[1], y[0]+" "+y[1]) }) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k[0] + " " + k[1] + " " + strconv.FormatInt(c[k], 10))
	}
	return b.String()
}

// takeCounts returns the counts kept and forgets them, when countsEvery
// has passed since the last write or now is true; else none. g.mu is held.
func (g *Ledger) takeCounts(now bool) deliveryCounts {
	at := time.Now()
	if len(g.counts) == 0 || !now && at.Sub(g.countsWritten) < countsEvery {
		return nil
	}
	c := g.counts
	g.counts, g.countsWritten = nil, at
	return c
}

// keepCounts adds what folds counted, and arms the flush that writes it
// within countsEvery.
func (g *Ledger) keepCounts(folds []Fold) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range folds {
		if f.dlr == "" || strings.ContainsAny(f.dlr, " \t\n") {
			continue // nothing counted, or a class no counter's key can carry
		}
		for _, field := range strings.Fields(f.counted) {
			g.addCount(f.dlr, field, 1)
		}
	}
	g.armCounts(countsEvery)
}

// putBackCounts keeps c again, its call having failed: the next call or
// flush carries it.
func (g *Ledger) putBackCounts(c deliveryCounts) {
	if len(c) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, n := range c {
		g.addCount(k[0], k[1], n)
	}
}

// addCount adds n to the count of key's field. g.mu is held.
func (g *Ledger) addCount(key, field string, n int64) {
	if g.counts == nil {
		g.counts = deliveryCounts{}
	}
	g.counts[[2]string{key, field}] += n
}

// armCounts arms the flush in d, unless one is armed or nothing waits.
// g.mu is held.
func (g *Ledger) armCounts(d time.Duration) {
	if g.countsTimer == nil && len(g.counts) > 0 {
		g.countsTimer = time.AfterFunc(d, g.flushCounts)
	}
}

// flushCounts is the timer's flush: it writes the counts kept once
// countsEvery has passed since the last write (a call may have carried
// some since it was armed: the rest waits for the rest of its second). A
// flush that fails arms none: the next call, or the next count's timer,
// carries them.
func (g *Ledger) flushCounts() {
	g.mu.Lock()
	g.countsTimer = nil
	wait := countsEvery - time.Since(g.countsWritten)
	if wait > 0 {
		g.armCounts(wait)
	}
	due := wait <= 0 && len(g.counts) > 0
	g.mu.Unlock()
	if due {
		_, _, _ = g.runReceipt(context.Background(), g.sweepCall(), false)
	}
}
