package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/nack"
	"smsdispatcher/priority"
)

// Defaults of Config.
const (
	DefaultOTPMaxWait       = policy.FirstMaxWait
	DefaultMarketingMaxWait = policy.LaterMaxWait
	DefaultSendTimeout      = 10 * time.Second
	DefaultGrace            = 10 * time.Second
	DefaultBackoffInitial   = 500 * time.Millisecond
	DefaultBackoffMax       = 2 * time.Second
)

// Config is a Dispatcher's configuration. A zero field means its default.
type Config struct {
	// OTPMaxWait and MarketingMaxWait bound how long a message waits for a
	// send slot before it is nacked, with the default lanes (Deps.OTP and
	// Deps.Marketing); Lane.MaxWait does with Deps.Lanes. Defaults 1s and
	// 8s.
	OTPMaxWait, MarketingMaxWait time.Duration
	// SendTimeout bounds one provider call; a message's deadline bounds it
	// further. Default 10s.
	SendTimeout time.Duration
	// Grace is how long sends in flight may take to finish after Run's
	// context ends. Default 10s.
	Grace time.Duration
	// MaxDeliveryAttempts, if positive, dead-letters (with reject_reason
	// max_attempts) a message whose Pub/Sub delivery attempt reaches it
	// instead of nacking it once more. Set it to the subscription's
	// dead-letter policy, which would otherwise forward it silently.
	MaxDeliveryAttempts int
	// OTPOutstanding and MarketingOutstanding cap the messages a lane holds
	// (Pub/Sub flow control), with the default lanes; Lane.Outstanding does
	// with Deps.Lanes. Zero means the client's default.
	OTPOutstanding, MarketingOutstanding int
	// ReadAhead, when above a lane's outstanding cap, is how many messages
	// the client reads of each class while the cap still bounds the
	// messages being handled: for a Pub/Sub server that ignores the
	// client's flow control (an emulator), which otherwise leaves what it
	// sent unread, unleased, to be delivered again. Zero (production):
	// none.
	ReadAhead int
	// BackoffInitial and BackoffMax shape the pause of a lane whose retry
	// budget is spent. Defaults 500ms and 2s: a pod whose sends all fail
	// probes again within 2s, so it is sending again within about that of
	// the provider's recovery. The limiter is what bounds an outage's load:
	// every try, first or retry, takes a slot; the pauses cut it further,
	// to about one probe a second per pod and class.
	BackoffInitial, BackoffMax time.Duration
	// RateUnit is what the limiter's rates count: messages (the default)
	// or segments, in which case each send costs its segments
	// (provider.Segments) and a body of more than MaxSegments is invalid.
	RateUnit RateUnit
	// MaxSegments is the most segments a body may have when rates count
	// segments. Default 6.
	MaxSegments int
	// AccountPause is how long every process stops sending on the account
	// after the provider refused the account itself (credentials,
	// suspension, credit). Default 1m; a changed credential ends it
	// earlier.
	AccountPause time.Duration
	// CredentialCheck is how often Deps.Credentials is read again.
	// Default 1s.
	CredentialCheck time.Duration
	// MaxHandlerPanics is how many of a message's deliveries may panic in
	// this process before it is dead-lettered (reject_reason
	// invalid: handler_panic) rather than nacked again. Default 3.
	MaxHandlerPanics int
	// Route orders the accounts serving a class and a destination
	// (NewTable). Default RouteFirst.
	Route RouteMode
	// Receipts makes each sent message's record keep its story for its
	// delivery receipts (ledger.Story): the provider's ids and, for a
	// first-class message that may be resent, its data. False: the record
	// alone, as without receipts.
	Receipts bool
	// Logger; if nil, slog.Default().
	Logger *slog.Logger
}

// RateUnit is what the account's rates count.
type RateUnit int

const (
	// PerMessage counts one unit per message.
	PerMessage RateUnit = iota
	// PerSegment counts each message's segments, as Twilio does (and
	// Vonage's carriers, each part a message).
	PerSegment
)

// Defaults of the segment and account settings.
const (
	DefaultMaxSegments      = 6
	DefaultAccountPause     = time.Minute
	DefaultCredentialCheck  = time.Second
	DefaultMaxHandlerPanics = 3
)

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.OTPMaxWait, DefaultOTPMaxWait)
	def(&c.MarketingMaxWait, DefaultMarketingMaxWait)
	def(&c.SendTimeout, DefaultSendTimeout)
	def(&c.Grace, DefaultGrace)
	def(&c.BackoffInitial, DefaultBackoffInitial)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.AccountPause, DefaultAccountPause)
	def(&c.CredentialCheck, DefaultCredentialCheck)
	if c.MaxSegments <= 0 {
		c.MaxSegments = DefaultMaxSegments
	}
	if c.MaxHandlerPanics <= 0 {
		c.MaxHandlerPanics = DefaultMaxHandlerPanics
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Deps are what a Dispatcher works with. All are required but Observer,
// Tracer, Clock and Credentials; the classes are either Lanes or OTP and
// Marketing; the account is either Accounts or Limiter, Claims, Sender and
// Credentials.
type Deps struct {
	// Lanes are the classes' subscriptions in priority order: a message
	// never waits for one of a later lane (docs/decisions.md, "Classes").
	// Empty: OTP then Marketing, with Config's max waits and outstanding
	// caps and policy.Default's rules.
	Lanes          []Lane
	OTP, Marketing *pubsub.Subscriber
	// Accounts are the provider accounts, in routing order. Empty: one
	// account of Limiter, Claims, Sender and Credentials serves both
	// classes, counting Config.RateUnit.
	Accounts   []Account
	Limiter    Limiter
	Claims     Claimer
	Sender     Sender
	DeadLetter DeadLetterer
	Observer   Observer // if nil, nothing is observed
	Tracer     Tracer   // if nil, no spans
	// Clock tells the time that deadlines and Events are read against; if
	// nil, the system clock. Waits run on real timers whatever it says.
	Clock admission.Clock
	// Credentials, if set, is read again every Config.CredentialCheck; a
	// change ends an account-level pause (Limiter.ResumeAccount).
	Credentials Credentials
	// Suppressions is the suppression list; nil: none (every number may
	// be sent to).
	Suppressions Suppressions
	// Deferral, if set, holds the messages of a class with send windows
	// or a per-recipient cap that may not be sent now (deferral.Store);
	// nil sends every message at once.
	Deferral *deferral.Store
	// Guard, if set, refuses messages to blocked countries and ranges
	// before their admission, and counts the sends.
	Guard Guard
}

// A Lane is one class's subscription and settings.
type Lane struct {
	Class      admission.Class
	Subscriber *pubsub.Subscriber
	// Policy is the class's rules as config computes them
	// (config.Process.Policy): the Dispatcher reads them, never the
	// class's name or position. Required.
	Policy policy.Class
	// MaxWait bounds how long a message waits for a send slot before it
	// is nacked. Default Policy.MaxWait.
	MaxWait time.Duration
	// Outstanding caps the messages the lane holds (Pub/Sub flow
	// control). Zero means the client's default.
	Outstanding int
}

// lanes returns deps' lanes with their defaults: deps.Lanes, or the
// default two.
func (deps Deps) lanes(cfg Config) ([]Lane, error) {
	ls := deps.Lanes
	if len(ls) == 0 {
		if deps.OTP == nil || deps.Marketing == nil {
			return nil, errors.New("dispatch: Deps needs Lanes, or OTP and Marketing")
		}
		ls = []Lane{
			{Class: admission.OTP, Subscriber: deps.OTP, Policy: policy.Default(admission.OTP.String()), MaxWait: cfg.OTPMaxWait, Outstanding: cfg.OTPOutstanding},
			{Class: admission.Marketing, Subscriber: deps.Marketing, Policy: policy.Default(admission.Marketing.String()), MaxWait: cfg.MarketingMaxWait, Outstanding: cfg.MarketingOutstanding},
		}
	}
	ls = slices.Clone(ls)
	seen := map[admission.Class]bool{}
	for i := range ls {
		l := &ls[i]
		switch {
		case l.Subscriber == nil:
			return nil, fmt.Errorf("dispatch: lane %q has no Subscriber", l.Class)
		case seen[l.Class]:
			return nil, fmt.Errorf("dispatch: lane %q is listed twice", l.Class)
		case l.Policy.MaxWait <= 0:
			return nil, fmt.Errorf("dispatch: lane %q has no Policy", l.Class)
		}
		seen[l.Class] = true
		if l.MaxWait <= 0 {
			l.MaxWait = l.Policy.MaxWait
		}
	}
	return ls, nil
}

// Event is what happened to one delivery of one message.
type Event struct {
	Class           admission.Class
	Outcome         nack.Outcome
	Action          nack.Action        // what was done with the Pub/Sub message
	MessageID       string             // Pub/Sub message ID
	ID              string             // idempotency key; empty if the data did not decode
	DeliveryAttempt int                // Pub/Sub's count, 0 when the subscription has no dead-letter policy
	PublishTime     time.Time          // when the producer published
	Received        time.Time          // when this delivery reached the dispatcher
	Admitted        time.Time          // when a slot was granted; zero if none
	Decision        admission.Decision // the last admission decision; zero if admission was not reached
	ResendCount     int                // provider attempts of this message before this one, if it reached the provider
	Segments        int                // the body's segments (provider.Segments); 0 if the data did not decode
	ProviderID      string             // the provider's id of the message, when it accepted it
	Account         string             // the account that admitted (and sent) it, else its route's home, else (no route) the class's first account
	NoRoute         string             // when no account serves its destination (invalid: no_route): the number's country code, never the number
	HedgedFrom      string             // when its home had not answered within the hedge's bound and it went out on the next account too: the home
	Sender          string             // the sender of the account's pool it went From, if any
	ResendReason    string             // when it is a resend (attr.ResendAvoid): why, its attr.ResendReason (printable ASCII, at most 64 bytes)
	Blocked         string             // when the guard refused it (nack.Blocked): why, a guard.Reason*
	BlockedCountry  string             // when the guard refused it: the number's country code, never the number
	Finished        time.Time
	Err             error // why, for outcomes other than sent; never holds a phone number
	// SuppressedBy is, for the outcome suppressed, the source of the
	// list's entry that stopped it (inbound, provider, operator, import).
	SuppressedBy string
	// Panicked is set when the handling of this delivery panicked: it was
	// recovered, and the Outcome is nack.Panicked, or nack.Invalid
	// (handler_panic) when the message was dead-lettered for it.
	Panicked bool
}

// Observer is told of every delivery's end. Implementations must be safe
// for concurrent use and must not block.
type Observer interface {
	Observe(Event)
}

// A Dispatcher takes messages from both subscriptions to the provider. Run
// it once.
type Dispatcher struct {
	cfg      Config
	deps     Deps
	gate     priority.Gate
	budget   *nack.Budget
	instance string // prefix of claim tokens: unique per process
	seq      atomic.Uint64
	started  atomic.Bool // Run was called

	inflight sync.Map // id -> *flight: duplicates inside the process collapse
	panics   panicCounts

	lanes  []*lane                   // in priority order; built by New
	laneOf map[admission.Class]*lane // by class

	// Set once by Run before any lane starts.
	hard context.Context // sends in flight; ends Grace after Run's context

	accounts []*account
	route    map[admission.Class][]*account            // by class: the accounts serving it to any number, in order
	table    *Table                                    // by class and destination: the accounts sending it, home first
	routes   map[admission.Class]map[string][]*account // table's routes as accounts, by class and Table.prefix
}

// flight is one id being handled in this process: other deliveries of the
// id wait for its end (join).
type flight struct {
	done chan struct{}
	end  flightEnd // written before done is closed
}

// flightEnd is how a flight ended, as the deliveries waiting on it see it.
type flightEnd int

const (
	endUnsent   flightEnd = iota // acked unsent (expired, ...): no answer for a waiter
	endFinished                  // sent, or refused and dead-lettered: the id is done
	endNacked                    // it comes back
)

// New returns a Dispatcher.
func New(cfg Config, deps Deps) (*Dispatcher, error) {
	if deps.DeadLetter == nil {
		return nil, errors.New("dispatch: Deps needs DeadLetter")
	}
	cfg = cfg.withDefaults()
	lanes, err := deps.lanes(cfg)
	if err != nil {
		return nil, err
	}
	accts, err := accounts(cfg, deps, lanes)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	if deps.Tracer == nil {
		deps.Tracer = noTracer{}
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	d := &Dispatcher{
		cfg:      cfg,
		deps:     deps,
		accounts: accts,
		route:    map[admission.Class][]*account{},
		laneOf:   map[admission.Class]*lane{},
		budget:   nack.NewBudget(nack.DefaultMaxTokens, nack.DefaultTokenRatio),
		instance: hex.EncodeToString(b[:]),
	}
	for i, ln := range lanes {
		l := newLane(d, ln, i)
		d.lanes, d.laneOf[ln.Class] = append(d.lanes, l), l
		d.route[ln.Class] = route(accts, ln.Class)
	}
	d.table, d.routes = newTable(accts, cfg.Route)
	return d, nil
}

// Classes returns the lanes' classes in priority order.
func (d *Dispatcher) Classes() []admission.Class {
	c := make([]admission.Class, len(d.lanes))
	for i, l := range d.lanes {
		c[i] = l.class
	}
	return c
}

// Ready reports whether every lane is receiving and no class has every
// account serving it paused for an account-level failure.
func (d *Dispatcher) Ready() bool {
	for _, l := range d.lanes {
		if l == nil || !l.receiving.Load() {
			return false
		}
	}
	_, _, paused := d.AccountPause()
	return !paused
}

// AccountPause reports an account-level pause this process knows of that
// stops a class (every account serving it paused): why, with the
// account's name when there are several, and how long it has left.
func (d *Dispatcher) AccountPause() (why string, left time.Duration, ok bool) {
	for _, l := range d.lanes {
		if why, left, ok := d.classPause(l.class); ok {
			return why, left, true
		}
	}
	return "", 0, false
}

// Accounts returns the names of the accounts, in routing order.
func (d *Dispatcher) Accounts() []string {
	var names []string
	for _, a := range d.accounts {
		names = append(names, a.Name)
	}
	return names
}

// policy returns class's rules (Lane.Policy); a class without a lane has
// none.
func (d *Dispatcher) policy(class admission.Class) policy.Class {
	if l := d.laneOf[class]; l != nil {
		return l.policy
	}
	return policy.Class{}
}

// BudgetTokens returns the retry budget's tokens, for metrics.
func (d *Dispatcher) BudgetTokens() float64 { return d.budget.Tokens() }

// OTPWaiting returns how many messages of the first class wait for a send
// slot, for metrics.
func (d *Dispatcher) OTPWaiting() int { return d.gate.Waiting(0) }

// Waiting returns, by class, how many messages of this process wait for
// their send slot to be decided, for metrics.
func (d *Dispatcher) Waiting() map[admission.Class]int {
	w := make(map[admission.Class]int, len(d.lanes))
	for _, l := range d.lanes {
		w[l.class] = int(l.waiting.Load())
	}
	return w
}

// now is the time on the Dispatcher's clock.
func (d *Dispatcher) now() time.Time { return d.deps.Clock.Now() }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ErrRunTwice is what Run returns to a second call: a Dispatcher runs once.
var ErrRunTwice = errors.New("dispatch: Run called twice")

// Run pulls both classes until ctx ends, then stops pulling, nacks every
// message still waiting for a slot, lets sends in flight finish within
// Config.Grace, and returns nil once every callback has returned. Pulling
// that fails (a missing subscription, a denied permission) is retried, not
// returned: the pod stays up, unready, and says why in its log.
func (d *Dispatcher) Run(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(d.cfg.Grace, cancelHard)
		context.AfterFunc(hard, func() { t.Stop() })
	})
	defer stopGrace()
	d.hard = hard
	var wg sync.WaitGroup
	for _, l := range d.lanes {
		wg.Go(func() { l.run(ctx) })
	}
	for _, a := range d.accounts {
		if a.Credentials != nil {
			wg.Go(func() { d.watchCredentials(ctx, a) })
		}
	}
	wg.Wait() // Receive returns once its callbacks have
	return nil
}

// watchCredentials reads the credential again every CredentialCheck until
// ctx ends: a change (an operator fixed the Secret) ends the account's
// pause at once rather than when it runs out.
func (d *Dispatcher) watchCredentials(ctx context.Context, a *account) {
	t := time.NewTicker(d.cfg.CredentialCheck)
	defer t.Stop()
	seen := a.Credentials.Version()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := a.Credentials.Reload(); err != nil {
			d.cfg.Logger.Warn("could not read the provider credential again; the one read before is kept", "account", a.Name, "err", err)
			continue
		}
		// The version, not Reload's answer: a send's account failure
		// reads the credential again too, and may have seen the change
		// first.
		v := a.Credentials.Version()
		if v == seen {
			continue
		}
		if err := a.Limiter.ResumeAccount(ctx); err != nil {
			d.cfg.Logger.Warn("the provider credential changed but the account's pause could not be ended yet; trying again", "account", a.Name, "err", err)
			continue // seen is not moved: the next tick tries again
		}
		seen = v
		d.cfg.Logger.Info("the provider credential changed; sending on the account resumes", "account", a.Name)
	}
}
