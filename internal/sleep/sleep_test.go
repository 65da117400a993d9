package sleep

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !For(t.Context(), time.Second) {
			t.Fatal("For = false with a live context")
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("slept %v, want 1s", got)
		}
	})
}

func TestForEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if For(ctx, time.Hour) {
			t.Fatal("For = true though the context ended first")
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("slept %v, want 1s (the context's end)", got)
		}
	})
}
