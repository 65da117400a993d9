package server

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/deferral"
	"smsdispatcher/dispatch"
	"smsdispatcher/internal/pullwatch"
	"smsdispatcher/internal/topology"
	"smsdispatcher/status"
	"smsdispatcher/telemetry"
)

// Redis is what a Server asks of its Redis client: the limiters' scripts,
// and a PING for /readyz.
type Redis interface {
	redis.Scripter
	Ping(ctx context.Context) *redis.StatusCmd
}

// Account is one provider account of a Server: its settings and its
// provider adapter, with the credential the dispatcher watches (may be
// nil).
type Account struct {
	Setup       config.Account
	Sender      dispatch.Sender
	Credentials dispatch.Credentials
}

// Options are a Server's optional parts; the zero value has none of them.
type Options struct {
	// ID names the process in its heartbeats; "" means status.ProcessID().
	ID string
	// Version is the build's, told in the heartbeats.
	Version string
	// Emulator says the Pub/Sub client talks to an emulator, which ignores
	// the flow control the client asks for (see readAhead).
	Emulator bool
	// Telemetry traces the sends and shows the gauges; nil: neither.
	Telemetry *Telemetry
	// Observer is told of every message's end; nil: nothing is.
	Observer dispatch.Observer
	// Logger logs; nil means slog.Default().
	Logger *slog.Logger
	// Pulls watches the pull streams of Subscriptions (their full names,
	// OTP first) for /readyz, run by Serve; nil: none is watched.
	Pulls         *pullwatch.Watch
	Subscriptions []string
	// Route orders the accounts serving a class and a destination
	// (config.Routing's Route); the zero value is dispatch.RouteFirst.
	Route dispatch.RouteMode
	// StopBound is how long Serve waits, after SHUTDOWN_GRACE, for the
	// pulls to stop, and again for the dead-letter publisher to flush,
	// before it returns without them; zero means DefaultStopBound.
	StopBound time.Duration
}

// A Server is one dispatcher with its own limiters, as one pod has. Its
// methods are safe for concurrent use; Run (or Serve) is called once.
type Server struct {
	cfg      config.Settings
	opts     Options
	logger   *slog.Logger
	id       string // the process's name in its heartbeats
	rdb      Redis
	circuit  *admission.Circuit // the limiters' view of Redis's health
	d        *dispatch.Dispatcher
	accounts []Account
	limiters []*admission.Limiter // by account
	table    *dispatch.Table      // the accounts' routing table, for the start-up log
	dlq      *pubsub.Publisher
	receipts Receipts          // nil: receipts off
	status   *pubsub.Publisher // STATUS_TOPIC's: the receipts' events and the suppressed messages'
	list     *suppressions
	guard    *processGuard // nil: no class is guarded
	// stopReceipts flushes the receipts' publishers, once receipts' Run
	// has returned.
	stopReceipts func()
	// releaser releases the deferred messages (nil: no class has send
	// windows or a cap); stopDeferral flushes its publishers.
	releaser     *deferral.Releaser
	stopDeferral func()
	denied       *denials // the dispatcher's Observer, told in the heartbeats
}

// New wires one dispatcher of cfg's process settings on the given clients,
// a lane for each class of cfg.ClassList, sending on accounts (at least
// one, with a home for each class). A
// limiter's setting that cannot work is a *config.Error naming its
// variable when the accounts come from the single-account variables.
func New(cfg config.Settings, accounts []Account, rdb redis.Cmdable, ps *pubsub.Client, opts Options) (*Server, error) {
	s := &Server{cfg: cfg, opts: opts, logger: opts.Logger, id: opts.ID, rdb: rdb, accounts: accounts}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.id == "" {
		s.id = status.ProcessID()
	}
	var daccts []dispatch.Account
	var setups []config.Account
	// One view of Redis's health for the process: a Redis that is down is
	// down for every account, and asked once, not once per account.
	s.circuit = admission.NewCircuit(admission.DefaultRedisRetryAfter, s.logger)
	for _, a := range accounts {
		lc := cfg.Limiter(a.Setup)
		lc.Logger = s.logger
		lim, err := admission.New(rdb, lc, admission.WithCircuit(s.circuit))
		if err != nil && cfg.AccountsFile == "" {
			return nil, config.LimiterError(err)
		}
		if err != nil {
			return nil, err
		}
		s.limiters = append(s.limiters, lim)
		setups = append(setups, a.Setup)
		daccts = append(daccts, dispatch.Account{
			Name: a.Setup.Name, Classes: a.Setup.Classes,
			Destinations: a.Setup.Destinations, FailoverClasses: a.Setup.FailoverClasses,
			Limiter: lim, Claims: lim.Claims(), Sender: a.Sender, Credentials: a.Credentials,
			RateUnit: a.Setup.Unit(), MaxSegments: a.Setup.MaxSegments,
		})
	}
	s.table = dispatch.NewTable(config.Served(setups), config.Destinations(setups), opts.Route)
	// The lanes' flow control follows the first account serving each
	// class, whatever its destinations.
	var lanes []dispatch.Lane
	for _, c := range cfg.ClassList() {
		lanes = append(lanes, dispatch.Lane{Class: c.Name, Subscriber: ps.Subscriber(c.Subscription), Policy: cfg.Policy(c.Name), MaxWait: c.MaxWait,
			Outstanding: cfg.Outstanding(c.Name, setups[config.Home(setups, c.Name)])})
	}
	var err error
	if s.guard, err = s.newGuard(ps, lanes); err != nil {
		return nil, err
	}
	dlq := ps.Publisher(cfg.DeadLetterTopic)
	s.status = ps.Publisher(cfg.StatusTopic) // the guard's blocked events too
	s.list = s.newSuppressions(rdb, ps)
	s.denied = newDenials(opts.Observer)
	deps := dispatch.Deps{
		Lanes: lanes, Accounts: daccts,
		DeadLetter: dispatch.DeadLetterTopic{Publisher: dlq}, Observer: s.denied,
		Suppressions: s.list,
	}
	if opts.Telemetry != nil {
		deps.Tracer = opts.Telemetry.Tracing
	}
	deps.Deferral, s.releaser, s.stopDeferral = s.newDeferral(ps)
	if s.guard != nil {
		deps.Guard = s.guard.g
	}
	dcfg := dispatch.Config{
		SendTimeout: cfg.SendTimeout, Grace: cfg.ShutdownGrace,
		MaxDeliveryAttempts: topology.MaxDeliveryAttempts,
		ReadAhead:           readAhead(opts.Emulator),
		AccountPause:        cfg.AccountPause,
		Route:               opts.Route,
		Logger:              s.logger,
	}
	receiptsDispatch(&dcfg, cfg.ReceiptsOn())
	d, err := dispatch.New(dcfg, deps)
	if err != nil {
		dlq.Stop()
		s.stopPublishers()
		s.stopDeferral()
		return nil, err
	}
	s.d, s.dlq = d, dlq
	if s.receipts, s.stopReceipts, err = s.newReceipts(ps); err != nil {
		dlq.Stop()
		s.stopPublishers()
		s.stopDeferral()
		return nil, err
	}
	if opts.Telemetry != nil {
		opts.Telemetry.Metrics.SetState(s.state)
	}
	return s, nil
}

// emulatorReadAhead is how many messages of each class a process reads
// from a Pub/Sub emulator (the library's default). An emulator (pstest,
// gcloud's) ignores the flow control the client asks for and sends a
// whole backlog at once: what the client has not read waits in the stream
// on the stream's 10s lease, runs out and is delivered again, however
// soon this process would have sent it. Read, it is leased and extended
// until the lane has a slot for it (dispatch's lanes).
const emulatorReadAhead = 1000

// readAhead is dispatch.Config.ReadAhead: emulatorReadAhead against an
// emulator, none against Pub/Sub, which applies the flow control itself.
func readAhead(emulator bool) int {
	if emulator {
		return emulatorReadAhead
	}
	return 0
}

// Run runs the dispatcher until ctx ends and it has stopped, beating on
// each account meanwhile. Close flushes the dead-letter publisher after.
func (s *Server) Run(ctx context.Context) error {
	s.loadList(ctx)
	hctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		r := status.Redis{Client: s.rdb, Circuit: s.circuit, Timeout: s.cfg.RedisTimeout}
		status.Heartbeats(hctx, s.id, s.opts.Version, r, s.limiters, s.denied.counts)
	})
	wg.Go(func() { s.list.list.Run(hctx) })
	if s.releaser != nil {
		wg.Go(func() { s.releaser.Run(hctx) })
	}
	if s.guard != nil {
		wg.Go(func() { s.guard.run(hctx, s) })
	}
	err := s.d.Run(ctx)
	stop()
	wg.Wait()
	return err
}

// Close flushes the dead-letter publisher and the receipts' publishers and
// stops them; call it once Run (and the receipts' Run) has returned.
func (s *Server) Close() {
	s.dlq.Stop()
	s.stopReceipts()
	s.stopPublishers()
	s.stopDeferral()
}

// state is what the gauges show: the process's, and each account's.
func (s *Server) state() telemetry.State {
	st := telemetry.State{BudgetTokens: s.d.BudgetTokens(), OTPWaiting: s.d.OTPWaiting(), Waiting: s.d.Waiting()}
	s.deferredState(&st)
	if s.guard != nil {
		st.GuardBlocks = s.guard.g.Held()
	}
	for n, lim := range s.limiters {
		ls := lim.State()
		c := s.accounts[n].Setup
		st.Accounts = append(st.Accounts, telemetry.AccountState{
			Name: c.Name, PenaltyActive: ls.Penalty, FallbackActive: ls.Fallback, Paused: ls.Paused, Degraded: lim.Health() == admission.Degraded, Receipts: s.cfg.ReceiptsOn(),
			ContractRPS: c.ContractRPS, TargetRPS: c.TargetRPS, MarketingRPS: c.MarketingRPS, LearnedRPS: ls.LearnedRPS,
			Classes: s.cfg.Limiter(c).Classes,
		})
	}
	return st
}

// logAccounts logs each account's rates at start, the unit they count
// (with segments, the longest body), and the learned rate of those that
// learn (read from Redis; a Redis down at start says so).
func (s *Server) logAccounts(ctx context.Context) {
	for n, a := range s.accounts {
		c := a.Setup
		attrs := []any{"account", c.Name, "provider", c.Provider, "classes", c.Classes,
			"contract_rps", c.ContractRPS, "target_rps", c.TargetRPS, "marketing_rps", c.MarketingRPS,
			"class_rps", c.ClassRPS, "reserve_rps", c.ReserveRPS,
			"burst", c.Burst, "rate_unit", c.RateUnit, "senders", len(c.Senders), "adaptive", c.Adaptive.Enabled}
		if c.RateUnit == "segment" {
			attrs = append(attrs, "max_segments", c.MaxSegments)
		}
		if c.Adaptive.Enabled {
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := s.limiters[n].Learned(lctx)
			cancel()
			switch {
			case err != nil:
				attrs = append(attrs, "learned_rps", "unknown: "+err.Error())
			case st.RPS == 0:
				attrs = append(attrs, "learned_rps", "none: the target holds")
			default:
				attrs = append(attrs, "learned_rps", st.RPS, "learned_mode", st.Mode)
			}
		}
		s.logger.Info("account", attrs...)
	}
	s.logRoutes()
}

// logRoutes logs the routing table, a line per class (in priority order)
// and prefix ("*": every other destination) with its accounts in order,
// none when no account sends the class there.
func (s *Server) logRoutes() {
	rows := s.table.Rows()
	order := classNamesOf(s.cfg.ClassList())
	slices.SortStableFunc(rows, func(a, b dispatch.TableRow) int {
		return cmp.Compare(priority(order, a.Class), priority(order, b.Class))
	})
	for _, row := range rows {
		prefix := row.Prefix
		if prefix == "" {
			prefix = "*"
		}
		names := make([]string, 0, len(row.Accounts))
		for _, i := range row.Accounts {
			names = append(names, s.accounts[i].Setup.Name)
		}
		s.logger.Info("route", "class", row.Class.String(), "prefix", prefix, "accounts", names, "mode", s.table.Mode().String())
	}
}

// classNamesOf lists classes' names, in priority order.
func classNamesOf(classes []config.Class) []admission.Class {
	out := make([]admission.Class, len(classes))
	for i, c := range classes {
		out[i] = c.Name
	}
	return out
}

// priority is class's position in order; a class not in it comes last.
func priority(order []admission.Class, class admission.Class) int {
	if i := slices.Index(order, class); i >= 0 {
		return i
	}
	return len(order)
}
