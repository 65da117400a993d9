package receipts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"smsdispatcher/ledger"
	"smsdispatcher/provider"
)

var _ Ledger = (*ledger.Ledger)(nil)

// Ledger is what a receipt needs of its account's state in Redis
// (*ledger.Ledger).
type Ledger interface {
	Receipt(ctx context.Context, r ledger.Report) (ledger.Fold, error)
	EventPublished(id string)
	// FlushPublished clears the events marked published, and writes what
	// the ledger keeps to write later (its delivery counts): the
	// stop's last call.
	FlushPublished(ctx context.Context) error
	Owed(ctx context.Context, age time.Duration, n int) ([]ledger.Fold, error)
	GiveBackResend(ctx context.Context, f ledger.Fold) (bool, error)
}

// Publisher publishes one message to a topic; Publish returns once the
// server has answered.
type Publisher interface {
	Publish(ctx context.Context, data []byte, attrs map[string]string) error
}

// Metrics counts what the receipts do.
type Metrics interface {
	// Receipt counts one receipt; outcome is ok, duplicate, unknown,
	// forged, malformed, too_large or error. class and status are the
	// message's after the receipt (a message counts one final however
	// many parts it has); for an unknown message or a Redis error, status
	// is the receipt's and class ""; both are "" for a receipt not read.
	Receipt(account, class, status, outcome string)
	// Delivery observes a message's time from its acceptance to its final
	// receipt.
	Delivery(account, class string, d time.Duration)
	// Resend counts a resend; reason is the final status that asked for it.
	Resend(account, reason string)
	// ResendLate counts a resend dropped at its hand-out: its window (the
	// message's deadline, or 5 minutes from its acceptance) had passed.
	ResendLate(account string)
}

// Account is one provider account whose receipts are served.
type Account struct {
	Name   string                 // the account's name, the path's last segment
	Reader provider.ReceiptReader // the account's adapter: verifies and parses a receipt
	Ledger Ledger                 // the account's limiter
}

// Config is a Server's configuration.
type Config struct {
	Addr      string // RECEIPTS_ADDR: the address Run listens on (Handler needs none)
	PublicURL string // RECEIPTS_PUBLIC_URL: the base URL providers are told; a trailing slash is dropped
	Accounts  []Account
	Status    Publisher    // the status topic
	Resend    Publisher    // the resent class's topic
	Metrics   Metrics      // nil: none
	Logger    *slog.Logger // nil: slog.Default()
	// Deadline reads the deadline a resend's data holds, zero when it
	// holds none or does not decode: the dispatcher's reading of a
	// message (dispatch.PayloadDeadline), handed in so that the receipts
	// need not import the dispatcher. Required.
	Deadline func(data []byte) time.Time
	// SweepEvery is how often Run publishes again the status events owed
	// for longer than OwedAge. Zero or negative: 10s and 30s (a test
	// shortens them).
	SweepEvery, OwedAge time.Duration
	// Inbound takes the verified inbound messages of POST
	// /v1/inbound/<account> (docs/suppressions.md); nil: that route
	// answers 404.
	Inbound InboundHandler
}

// MaxBodyBytes is the largest receipt body read: a receipt is a few
// hundred bytes.
const MaxBodyBytes = 64 << 10

// Limits of the HTTP server. Providers send one small POST per receipt
// and answer at once; a client slower than these is stuck or hostile, and
// its connection is closed rather than held.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second // the whole request, headers and body
	httpWriteTimeout      = 10 * time.Second // from the request's headers to the answer's end: a fold and the publishes
	httpIdleTimeout       = 60 * time.Second // a keep-alive connection between requests
	httpMaxHeaderBytes    = 16 << 10         // a receipt's headers take a few hundred bytes
)

// shutdownBound is how long Run waits for receipts being handled at its
// end: a fold and the publishes' bound take less.
const shutdownBound = 10 * time.Second

// drainBound is how long Run, at its end, publishes the events it still
// holds: within the process's stop bound (server.DefaultStopBound, 5 s),
// which it waits for the receipts once the sends have finished.
const drainBound = 5 * time.Second

// Server serves the receipts of its accounts. It is safe for concurrent
// use.
type Server struct {
	cfg      Config
	accounts map[string]*account // by name; read-only after New
	order    []*account          // as configured
	metrics  Metrics
	logger   *slog.Logger

	// publishBound bounds the publishes of one fold's events, retries
	// included; a test shortens it.
	publishBound time.Duration
	// now is the clock a resend's window is checked on; a test moves it.
	now func() time.Time
}

// account is one configured account and what the server keeps of it.
type account struct {
	Account
	url string // CallbackURL(PublicURL, Name): what the provider signed

	// pending is set once an event is marked published and cleared by
	// the flush that clears it in Redis.
	pending atomic.Bool

	// held are the folds whose events this process could not publish at
	// their receipt, by id: it publishes them again every retryEvery and
	// before Run returns, rather than leave them to a sweep 30 s on (or to
	// none, when every process stops). Guarded by heldMu.
	heldMu sync.Mutex
	held   map[string]*ledger.Fold

	// again are the provider ids of the receipts this process answered
	// 503 (their fold failed, or its reply came late), for their retries
	// to hand out the event a late reply may have left owed
	// (ledger.Report.Again). Guarded by heldMu.
	again map[string]time.Time

	forged, ledgerErr, publishErr, late quietLog
}

// maxAgain bounds account.again; an entry older than againFor is dropped
// when it is full (the provider has given up on it, or posted it to
// another process).
const (
	maxAgain = 10000
	againFor = 10 * time.Minute
)

// failed remembers that the receipt of pid was answered 503.
func (a *account) failed(pid string, now time.Time) {
	a.heldMu.Lock()
	defer a.heldMu.Unlock()
	if len(a.again) >= maxAgain {
		for id, at := range a.again {
			if now.Sub(at) > againFor {
				delete(a.again, id)
			}
		}
	}
	if len(a.again) < maxAgain {
		a.again[pid] = now
	}
}

// retried reports whether the receipt of pid was answered 503 before, and
// forgets it.
func (a *account) retried(pid string) bool {
	a.heldMu.Lock()
	defer a.heldMu.Unlock()
	_, ok := a.again[pid]
	delete(a.again, pid)
	return ok
}

// New returns a Server of cfg's accounts, or an error naming what cfg
// lacks.
func New(cfg Config) (*Server, error) {
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if u, err := url.Parse(cfg.PublicURL); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("receipts: public URL %q is not an absolute URL", cfg.PublicURL)
	}
	if len(cfg.Accounts) == 0 {
		return nil, errors.New("receipts: no account")
	}
	if cfg.Status == nil || cfg.Resend == nil {
		return nil, errors.New("receipts: a status publisher and a resend publisher are required")
	}
	if cfg.Deadline == nil {
		return nil, errors.New("receipts: a reader of a resend's deadline is required")
	}
	s := &Server{cfg: cfg, accounts: map[string]*account{}, metrics: cfg.Metrics, logger: cfg.Logger, publishBound: 3 * time.Second, now: time.Now}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.cfg.SweepEvery <= 0 {
		s.cfg.SweepEvery = sweepEvery
	}
	if s.cfg.OwedAge <= 0 {
		s.cfg.OwedAge = owedAge
	}
	for _, a := range cfg.Accounts {
		if a.Name == "" || a.Reader == nil || a.Ledger == nil {
			return nil, fmt.Errorf("receipts: account %q needs a name, a reader and a ledger", a.Name)
		}
		if _, dup := s.accounts[a.Name]; dup {
			return nil, fmt.Errorf("receipts: account %q twice", a.Name)
		}
		acc := &account{Account: a, url: CallbackURL(cfg.PublicURL, a.Name), held: map[string]*ledger.Fold{}, again: map[string]time.Time{}}
		s.accounts[a.Name] = acc
		s.order = append(s.order, acc)
	}
	return s, nil
}

// CallbackURL is the URL account's provider is told to post receipts to,
// and the one its signature covers.
func CallbackURL(publicURL, account string) string {
	return strings.TrimRight(publicURL, "/") + "/v1/receipts/" + url.PathEscape(account)
}

// InboundURL is where account's provider posts the messages its
// recipients send (docs/suppressions.md): what it signs.
func InboundURL(publicURL, account string) string {
	return strings.TrimRight(publicURL, "/") + "/v1/inbound/" + url.PathEscape(account)
}

// Run listens on Addr, serves receipts and sweeps owed events until ctx
// ends; then it lets the receipts being handled finish (for at most 10 s),
// stops the sweep, publishes the events it still holds (100 at once, each
// within the publish bound, 3 s, all within 5 s), clears the events
// published in Redis, and returns.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("receipts: listen on RECEIPTS_ADDR: %w", err)
	}
	return s.serve(ctx, ln)
}

// serve is Run on ln.
func (s *Server) serve(ctx context.Context, ln net.Listener) error {
	srv := newHTTPServer(s.Handler())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var names []string
	for _, a := range s.order {
		names = append(names, a.Name)
	}
	s.logger.Info("receipts serving", "addr", ln.Addr().String(), "accounts", names)

	var wg sync.WaitGroup
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	wg.Go(func() { s.sweepLoop(sweepCtx) })

	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		err = fmt.Errorf("receipts: http server: %w", err)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownBound)
	defer cancel()
	if serr := srv.Shutdown(stopCtx); serr != nil {
		s.logger.Warn("receipts: http server shutdown", "err", serr)
		srv.Close()
	}
	if err == nil {
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = fmt.Errorf("receipts: http server: %w", serr)
		}
	}
	stopSweep()
	wg.Wait()
	// What this process owes is published before it goes: no other
	// process knows of it until its sweep, 30 s on, and none will when
	// the whole pool stops.
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), drainBound)
	defer cancelDrain()
	s.publishHeld(drainCtx, true)
	// Its own bound: the shutdown may have used all of stopCtx's, and an
	// event not cleared is published again by the next process's sweep.
	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancelFlush()
	s.flush(flushCtx, true)
	return err
}

// newHTTPServer returns the receipts' HTTP server, with the limits above.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// quietLog lets one line a minute through, and counts the ones it held
// back since the last. It is safe for concurrent use.
type quietLog struct {
	mu   sync.Mutex
	last time.Time // guarded by mu
	held int       // guarded by mu
}

// allow reports whether a line may be logged at now and, if so, how many
// were held back before it.
func (q *quietLog) allow(now time.Time) (held int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.last.IsZero() && now.Sub(q.last) < time.Minute {
		q.held++
		return 0, false
	}
	held, q.held, q.last = q.held, 0, now
	return held, true
}

// noMetrics is Metrics when none is given.
type noMetrics struct{}

func (noMetrics) Receipt(account, class, status, outcome string)  {}
func (noMetrics) Delivery(account, class string, d time.Duration) {}
func (noMetrics) Resend(account, reason string)                   {}
func (noMetrics) ResendLate(account string)                       {}
