package server

import (
	"context"
	"errors"
	"fmt"
)

// Receipts is the delivery receipts' listener a Server runs beside its
// dispatcher when RECEIPTS_ADDR is set (a receipts.Server): Run serves
// and sweeps owed status events until its ctx ends.
type Receipts interface {
	Run(ctx context.Context) error
}

// startReceipts runs r (nil: none) until ctx ends. A failure before then,
// such as a listener it cannot open, is reported to fail at once, so that
// the process stops rather than send without its receipts. wait returns
// once Run has, with its error (none for the end of ctx).
func startReceipts(ctx context.Context, r Receipts, fail func(error)) (wait func() error) {
	if r == nil {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		err := r.Run(ctx)
		switch {
		case err == nil:
		case ctx.Err() == nil:
			err = fmt.Errorf("receipts: %w", err)
			fail(err)
		case errors.Is(err, ctx.Err()):
			err = nil // stopped, as asked
		default:
			err = fmt.Errorf("receipts: %w", err)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// RunReceipts runs the receipts' listener of s (none: it returns at once)
// until ctx ends, for a process that runs its Server with Run, not Serve
// (the demo, where one instance takes every instance's receipts).
func (s *Server) RunReceipts(ctx context.Context) error {
	if s.receipts == nil {
		return nil
	}
	return s.receipts.Run(ctx)
}
