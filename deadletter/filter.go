package deadletter

import (
	"slices"
	"strings"
	"time"
)

// Filter is the selection List and Replay share: every criterion given
// must hold. The zero Filter selects every dead letter.
type Filter struct {
	Reason string        // a prefix of reject_reason; "": any
	Class  string        // otp or marketing; "": any
	Since  time.Duration // published within Since before Now; 0: any time
	// IDs selects by the message's id, the dead letter's Pub/Sub message
	// ID or the original's; empty: any.
	IDs []string
	// Now is when the reading started; List and Replay set it to the
	// current time when it is zero.
	Now time.Time
}

// match reports whether l is selected.
func (f Filter) match(l *Letter) bool {
	switch {
	case f.Reason != "" && !strings.HasPrefix(l.Reason, f.Reason):
		return false
	case f.Class != "" && l.Class != f.Class:
		return false
	case f.Since > 0 && l.Published.Before(f.Now.Add(-f.Since)):
		return false
	case len(f.IDs) > 0 && !slices.Contains(f.IDs, l.ID) && !slices.Contains(f.IDs, l.MessageID) &&
		!(l.OriginalID != "" && slices.Contains(f.IDs, l.OriginalID)):
		return false
	}
	return true
}

// withNow returns f with Now set to now if it is zero.
func (f Filter) withNow(now time.Time) Filter {
	if f.Now.IsZero() {
		f.Now = now
	}
	return f
}
