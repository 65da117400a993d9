package server

import (
	"context"
	"errors"
	"testing"
)

// runFunc is a Receipts of a function.
type runFunc func(ctx context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

var _ Receipts = runFunc(nil)

// TestStartReceipts: a receipts' listener that fails while the process
// serves (a port taken) stops the process with its error; one that runs
// until ctx ends is waited for, its end (ctx's error) no failure; none is nothing to
// wait for.
func TestStartReceipts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	taken := errors.New("listen tcp :8443: address already in use")
	failed := make(chan error, 1)
	wait := startReceipts(ctx, runFunc(func(context.Context) error { return taken }), func(err error) { failed <- err })
	if err := <-failed; !errors.Is(err, taken) {
		t.Fatalf("fail told %v, want the listener's error", err)
	}
	if err := wait(); !errors.Is(err, taken) {
		t.Fatalf("wait: %v, want the listener's error", err)
	}

	started := make(chan struct{})
	wait = startReceipts(ctx, runFunc(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}), func(err error) { t.Errorf("fail told %v after ctx ended", err) })
	<-started
	cancel()
	if err := wait(); err != nil {
		t.Fatalf("wait: %v, want no error for the end ctx asked for", err)
	}

	if err := startReceipts(ctx, nil, nil)(); err != nil {
		t.Fatalf("no receipts: %v", err)
	}
}
