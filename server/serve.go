package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"smsdispatcher/config"
)

// DefaultStopBound is Options.StopBound's default. With the HTTP server's
// and telemetry's 5 s each, a stop takes at most SHUTDOWN_GRACE + 20 s:
// within terminationGracePeriodSeconds.
const DefaultStopBound = 5 * time.Second

// Serve is the serving process: it logs the accounts, serves /healthz,
// /readyz and /metrics on HTTP_ADDR, runs the pull watch, the receipts'
// listener (with RECEIPTS_ADDR) and Run until ctx ends (SIGTERM) or the
// receipts' listener fails, then stops in the order of the package's
// invariant and closes the Server. It returns Run's error, an HTTP
// server's or the receipts' failure, or a *config.Error for an HTTP_ADDR
// it cannot listen on.
func (s *Server) Serve(ctx context.Context) error {
	ctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	s.logAccounts(ctx)
	ln, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		s.Close()
		return config.SettingError("HTTP_ADDR", err.Error())
	}
	var metrics http.Handler = http.NotFoundHandler()
	if s.opts.Telemetry != nil {
		metrics = s.opts.Telemetry.Metrics.Handler()
	}
	srv := NewHTTPServer(s.handler(ctx.Done(), metrics))
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	cfg, logger := s.cfg, s.logger
	logger.Info("dispatcher serving", "http_addr", ln.Addr().String(), "project", cfg.ProjectID,
		"subscriptions", subscriptionsOf(cfg.ClassList()),
		"accounts", s.d.Accounts(), "max_senders", cfg.MaxSenders)

	if s.opts.Pulls != nil {
		watchCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			s.opts.Pulls.Run(watchCtx, logger)
		}()
		defer func() { stopWatch(); <-watched }()
	}

	stopBound := s.opts.StopBound
	if stopBound == 0 {
		stopBound = DefaultStopBound
	}
	waitReceipts := startReceipts(ctx, s.receipts, func(err error) {
		logger.Error("receipts stopped: the process stops", "err", err)
		stopServing()
	})
	var runErr, receiptsErr error
	ran := make(chan error, 1) // Run's error, once it returns
	if !within(ctx, cfg.ShutdownGrace+stopBound, func() { ran <- s.Run(ctx) }) {
		logger.Error("pulls did not stop within SHUTDOWN_GRACE and the stop bound: exiting without them; what they held comes back when its lease runs out",
			"shutdown_grace", cfg.ShutdownGrace, "stop_bound", stopBound)
	} else {
		runErr = <-ran
		logger.Info("dispatcher stopped pulling; sends in flight finished")
	}
	if !within(ctx, stopBound, func() { receiptsErr = waitReceipts() }) {
		logger.Error("the receipts' listener did not stop within the stop bound: exiting without it", "stop_bound", stopBound)
	}
	if !within(ctx, stopBound, s.Close) {
		logger.Error("the dead-letter publisher did not flush within the stop bound: exiting; what it held is nacked and comes back", "stop_bound", stopBound)
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http server shutdown", "err", err)
	}
	if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	if runErr == nil {
		runErr = receiptsErr
	}
	return runErr
}

// within runs f and returns true once it has returned, or false once ctx
// has ended and bound has passed since, leaving f running: the process
// is exiting.
func within(ctx context.Context, bound time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// subscriptionsOf says classes' subscriptions in priority order, for the
// start-up log: "otp=sms-otp-dispatcher".
func subscriptionsOf(classes []config.Class) []string {
	out := make([]string, len(classes))
	for i, c := range classes {
		out[i] = c.Name.String() + "=" + c.Subscription
	}
	return out
}
