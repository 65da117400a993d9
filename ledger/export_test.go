package ledger

import (
	"context"
	"time"
)

// What the external tests (package ledger_test, which builds Ledgers
// through admission's Limiter) read and set of the package's insides.

var (
	ClearEvery        = clearEvery
	CountsEvery       = countsEvery
	MaxOwedRemembered = maxOwedRemembered
	DeliveryStatuses  = deliveryStatuses
)

// Version is f's owed event's version.
func (f Fold) Version() int64 { return f.version }

// FoldOf is a Fold of id whose resend payload is resend, its story at key.
func FoldOf(id string, resend []byte, key string) Fold {
	return Fold{ID: id, Resend: resend, story: key}
}

// SetHandOutAfter sets g's handOutAfter.
func SetHandOutAfter(g *Ledger, d time.Duration) { g.handOutAfter = d }

// SetCleared sets when g last carried published events.
func SetCleared(g *Ledger, at time.Time) {
	g.mu.Lock()
	g.cleared = at
	g.mu.Unlock()
}

// RememberOwed makes g remember id's owed version v.
func RememberOwed(g *Ledger, id string, v int64) {
	g.mu.Lock()
	g.owedSeen[id] = []int64{v}
	g.mu.Unlock()
}

// OwedRemembered is how many ids g remembers owed versions of.
func OwedRemembered(g *Ledger) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.owedSeen)
}

// CountsKept is how many delivery counts g keeps unwritten.
func CountsKept(g *Ledger) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.counts)
}

// RunReceipt runs receipt.lua for a receipt of pid saying status, as
// Receipt would but without its checks.
func RunReceipt(ctx context.Context, g *Ledger, pid, status string) error {
	call := g.sweepCall()
	call.PID, call.Status = g.pidKey(pid), status
	return receiptScript.Run(ctx, g.rdb, call.keys(), call.argv()...).Err()
}
