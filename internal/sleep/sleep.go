package sleep

import (
	"context"
	"time"
)

// For sleeps for d and reports whether ctx was still live after it: false
// as soon as ctx ends.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
