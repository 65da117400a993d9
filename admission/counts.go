package admission

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
// Limiter adds them up, and a receipt.lua call writes them, one HINCRBY
// per counter's field, at most once per countsEvery: the next call of a
// receipt, a sweep or a flush once countsEvery has passed since the last
// write, else a timer's flush countsEvery after the first count kept, and
// FlushPublished's at once (the stop). The counters are status's figures
// (the delivered ratio and p50/p99), up to countsEvery late; a process
// killed loses its last second's, a fold whose reply is lost (a timeout)
// its own, and a call that timed out after Redis ran it counts what it
// carried twice: it is carried again. The route's skip counts in the
// fold, at once, and the sends counter is finish.lua's: neither waits.
// The timer's clock is the system's, not the Limiter's Clock.

// countsEvery is how often a Limiter writes its delivery counts at most,
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
// has passed since the last write or now is true; else none. l.mu is held.
func (l *Limiter) takeCounts(now bool) deliveryCounts {
	at := time.Now()
	if len(l.counts) == 0 || !now && at.Sub(l.countsWritten) < countsEvery {
		return nil
	}
	c := l.counts
	l.counts, l.countsWritten = nil, at
	return c
}

// keepCounts adds what folds counted, and arms the flush that writes it
// within countsEvery.
func (l *Limiter) keepCounts(folds []Fold) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range folds {
		if f.dlr == "" || strings.ContainsAny(f.dlr, " \t\n") {
			continue // nothing counted, or a class no counter's key can carry
		}
		for _, field := range strings.Fields(f.counted) {
			l.addCount(f.dlr, field, 1)
		}
	}
	l.armCounts(countsEvery)
}

// putBackCounts keeps c again, its call having failed: the next call or
// flush carries it.
func (l *Limiter) putBackCounts(c deliveryCounts) {
	if len(c) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range c {
		l.addCount(k[0], k[1], n)
	}
}

// addCount adds n to the count of key's field. l.mu is held.
func (l *Limiter) addCount(key, field string, n int64) {
	if l.counts == nil {
		l.counts = deliveryCounts{}
	}
	l.counts[[2]string{key, field}] += n
}

// armCounts arms the flush in d, unless one is armed or nothing waits.
// l.mu is held.
func (l *Limiter) armCounts(d time.Duration) {
	if l.countsTimer == nil && len(l.counts) > 0 {
		l.countsTimer = time.AfterFunc(d, l.flushCounts)
	}
}

// flushCounts is the timer's flush: it writes the counts kept once
// countsEvery has passed since the last write (a call may have carried
// some since it was armed: the rest waits for the rest of its second). A
// flush that fails arms none: the next call, or the next count's timer,
// carries them.
func (l *Limiter) flushCounts() {
	l.mu.Lock()
	l.countsTimer = nil
	wait := countsEvery - time.Since(l.countsWritten)
	if wait > 0 {
		l.armCounts(wait)
	}
	due := wait <= 0 && len(l.counts) > 0
	l.mu.Unlock()
	if due {
		_, _, _ = l.runReceipt(context.Background(), l.sweepCall(), false)
	}
}
