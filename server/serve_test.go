package server

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestWithinWaitsForFOrTheBoundAfterCtx: within returns true once f has
// returned, however long after ctx's end within the bound, and false once
// the bound has passed since ctx's end, leaving f running.
func TestWithinWaitsForFOrTheBoundAfterCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if !within(ctx, time.Second, func() { time.Sleep(time.Hour) }) {
			t.Error("f returned while ctx lived: want true")
		}
		cancel()
		if !within(ctx, time.Second, func() { time.Sleep(500 * time.Millisecond) }) {
			t.Error("f returned within the bound after ctx ended: want true")
		}
		release := make(chan struct{})
		start := time.Now()
		if within(ctx, time.Second, func() { <-release }) {
			t.Error("f held past the bound: want false")
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("waited %v, want the bound, 1s", waited)
		}
		close(release)
	})
}
