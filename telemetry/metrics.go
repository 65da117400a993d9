package telemetry

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
)

// Names of the instruments (OTel names; Prometheus shows dots as
// underscores, adds the unit and _total to counters). k8s/monitoring/ and
// the dashboard use the Prometheus forms; a test keeps them in step.
const (
	MetricMessages          = "sms.messages"                 // sms_messages_total
	MetricAdmission         = "sms.admission.decisions"      // sms_admission_decisions_total
	MetricAdmissionWait     = "sms.admission.wait"           // sms_admission_wait_seconds
	MetricOTPLatency        = "sms.otp.latency"              // sms_otp_latency_seconds
	MetricProviderDuration  = "http.client.request.duration" // http_client_request_duration_seconds
	MetricRedisCalls        = "sms.redis.calls"              // sms_redis_calls_total
	MetricPenaltyActive     = "sms.penalty.active"           // sms_penalty_active
	MetricAccountPaused     = "sms.account.paused"           // sms_account_paused
	MetricAccountHealth     = "sms.account.health"           // sms_account_health
	MetricNoRoute           = "sms.no_route"                 // sms_no_route_total
	MetricHedges            = "sms.hedges"                   // sms_hedges_total
	MetricBlocked           = "sms.blocked"                  // sms_blocked_total
	MetricGuardBlocks       = "sms.guard.blocks"             // sms_guard_blocks
	MetricVerifications     = "sms.verifications"            // sms_verifications_total
	MetricGuardSends        = "sms.guard.sends"              // sms_guard_sends_total
	AttrBlockReason         = attribute.Key("reason")        // why the guard blocked a message: geo, prefix_rate, conversion, operator
	AttrCountry             = attribute.Key("country")       // a destination's country code (its E.164 prefix), never the number
	MetricSegments          = "sms.segments"                 // sms_segments_total
	MetricFallbackActive    = "sms.fallback.active"          // sms_fallback_active
	MetricBudgetTokens      = "sms.retry_budget.tokens"      // sms_retry_budget_tokens
	MetricOTPWaiting        = "sms.otp.waiting"              // sms_otp_waiting
	MetricWaiting           = "sms.waiting"                  // sms_waiting
	MetricConfiguredRate    = "sms.configured.rate"          // sms_configured_rate
	MetricDeliveryAttempt   = "sms.delivery.attempts"        // sms_delivery_attempts
	MetricLearnedRate       = "sms.learned.rate"             // sms_learned_rate
	MetricPullErrors        = "sms.pull.errors"              // sms_pull_errors_total
	AttrPullCode            = attribute.Key("code")          // a gRPC status code's name: Unavailable, NotFound, PermissionDenied, ...
	MetricHandlerPanics     = "sms.handler.panics"           // sms_handler_panics_total
	MetricSuppressed        = "sms.suppressed"               // sms_suppressed_total
	MetricSuppressionChange = "sms.suppression.changes"      // sms_suppression_changes_total
	AttrListSource          = attribute.Key("source")        // a suppression list entry's source: inbound, provider, operator, import
	AttrListAction          = attribute.Key("action")        // a change of the suppression list: add, remove
	MetricRedisEvicting     = "sms.redis.evicting_policy"    // sms_redis_evicting_policy
	MetricExpired           = "sms.expired"                  // sms_expired_total
	MetricDeferred          = "sms.deferred"                 // sms_deferred
	MetricDeferredOverdue   = "sms.deferred.overdue"         // sms_deferred_overdue
	MetricInbound           = "sms.inbound"                  // sms_inbound_total
	AttrInboundKeyword      = attribute.Key("keyword")       // what an inbound reply says: stop, start, help, none
	AttrInboundOutcome      = attribute.Key("outcome")       // what came of it: changed, unchanged, duplicate, failed
	AttrStatusClass         = attribute.Key("sms.provider.status_class")
	AttrRedisOp             = attribute.Key("sms.redis.op")
	AttrLimit               = attribute.Key("sms.limit")
	attrOutcomeResultAllows = "allowed"
)

// Values of AttrLimit besides "contract", "target" and "marketing".
const (
	LimitCeiling = "ceiling" // a class's ceiling on the account (sms_class says which)
	LimitReserve = "reserve" // the rate the classes after a class may never take together (sms_class says which)
)

// Metrics owns the meter provider and the Prometheus registry behind
// /metrics. It is safe for concurrent use.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry

	messages         metric.Int64Counter
	admission        metric.Int64Counter
	admissionWait    metric.Float64Histogram
	otpLatency       metric.Float64Histogram
	providerDuration metric.Float64Histogram
	redisCalls       metric.Int64Counter
	attempts         metric.Int64Histogram
	segments         metric.Int64Counter
	pullErrors       metric.Int64Counter
	handlerPanics    metric.Int64Counter
	expired          metric.Int64Counter
	noRoute          metric.Int64Counter
	hedges           metric.Int64Counter
	suppressed       metric.Int64Counter
	listChanges      metric.Int64Counter
	blocked          metric.Int64Counter
	verifications    metric.Int64Counter
	inbound          metric.Int64Counter
	guardSends       metric.Int64Counter
	receiptInstruments

	state atomic.Pointer[func() State] // read by the gauges; nil reads as zero

	redisEvicting atomic.Bool // SetRedisEvicting's, read by its gauge
}

var _ dispatch.Observer = (*Metrics)(nil)

// State is what the gauges show, read when /metrics is scraped: the
// process's, and each account's (Accounts, labelled sms_account; the
// account fields of State itself when Accounts is empty, unlabelled).
type State struct {
	PenaltyActive, FallbackActive bool
	// AccountPaused is set while the provider's refusal of the account
	// (credentials, suspension, credit) stops sending on it.
	AccountPaused bool
	// AccountDegraded is set while the account's sends are failing and
	// it admits probes only (admission.Degraded).
	AccountDegraded bool
	// Receipts is set while the process asks the providers for delivery
	// receipts (RECEIPTS_ADDR is set).
	Receipts     bool
	BudgetTokens float64
	// OTPWaiting is how many messages of the first class wait for a send
	// slot (dispatch.Dispatcher.OTPWaiting).
	OTPWaiting int
	// Waiting is, by class, how many messages wait for a send slot; nil:
	// no sms_waiting series.
	Waiting map[admission.Class]int
	// Deferred is, by class with send windows or a cap, how many messages
	// the deferral store holds, and Overdue those due more than 15 min
	// ago and not released; read from Redis every 10 s.
	Deferred, Overdue      map[string]int
	ContractRPS, TargetRPS float64
	MarketingRPS           float64
	// Classes are the account's classes with their ceilings and reserves
	// when Accounts is empty (as AccountState.Classes).
	Classes []admission.ClassLimit
	// LearnedRPS is the learned rate in force, 0 when none (the target
	// holds).
	LearnedRPS float64
	Accounts   []AccountState
	// GuardBlocks is, by reason, how many ranges the pumping guard blocks
	// as this process holds them (guard.Guard.Held); nil: no guarded
	// class, no sms_guard_blocks series.
	GuardBlocks map[string]int
}

// AccountState is one account's part of State.
type AccountState struct {
	Name                                  string
	PenaltyActive, FallbackActive, Paused bool
	Degraded                              bool // admission.Degraded: probes only
	Receipts                              bool // the account's sends ask for delivery receipts
	ContractRPS, TargetRPS, MarketingRPS  float64
	LearnedRPS                            float64
	// Classes are the account's classes in priority order with their
	// ceilings (an RPS of 0 is TargetRPS) and reserves, as the limiter is
	// given them (admission.Config.Classes); nil: the default classes,
	// otp at TargetRPS and marketing at MarketingRPS.
	Classes []admission.ClassLimit
}

// limits returns a's classes with their ceilings, the defaults filled in.
func (a AccountState) limits() []admission.ClassLimit {
	list := a.Classes
	if len(list) == 0 {
		list = []admission.ClassLimit{{Name: admission.OTP}, {Name: admission.Marketing, RPS: a.MarketingRPS}}
	}
	out := make([]admission.ClassLimit, len(list))
	for i, l := range list {
		l.RPS = cmp.Or(l.RPS, a.TargetRPS)
		out[i] = l
	}
	return out
}

// configuredRates are a's configured rates, as sms_configured_rate shows
// them: the contract, the target, each class's ceiling and reserve
// (labelled sms_class), and the marketing class's ceiling on its own
// (sms_limit "marketing", the series of the two default classes).
func (a AccountState) configuredRates() []obs {
	out := []obs{
		{a.ContractRPS, []attribute.KeyValue{AttrLimit.String("contract")}},
		{a.TargetRPS, []attribute.KeyValue{AttrLimit.String("target")}},
	}
	marketing := a.MarketingRPS
	for _, l := range a.limits() {
		class := AttrClass.String(l.Name.String())
		out = append(out, obs{l.RPS, []attribute.KeyValue{AttrLimit.String(LimitCeiling), class}})
		if l.Reserve > 0 {
			out = append(out, obs{l.Reserve, []attribute.KeyValue{AttrLimit.String(LimitReserve), class}})
		}
		if l.Name == admission.Marketing {
			marketing = l.RPS
		}
	}
	return append(out, obs{marketing, []attribute.KeyValue{AttrLimit.String("marketing")}})
}

// accounts returns s's accounts, State's own fields as one unnamed
// account when it lists none.
func (s State) accounts() []AccountState {
	if len(s.Accounts) > 0 {
		return s.Accounts
	}
	return []AccountState{{PenaltyActive: s.PenaltyActive, FallbackActive: s.FallbackActive, Paused: s.AccountPaused, Degraded: s.AccountDegraded, Receipts: s.Receipts,
		ContractRPS: s.ContractRPS, TargetRPS: s.TargetRPS, MarketingRPS: s.MarketingRPS, LearnedRPS: s.LearnedRPS, Classes: s.Classes}}
}

// perAccount observes read(a) for each account, labelled with its name
// when it has one.
func perAccount(s State, read func(AccountState) []obs) []obs {
	var out []obs
	for _, a := range s.accounts() {
		for _, o := range read(a) {
			if a.Name != "" {
				o.attrs = append(o.attrs, AttrAccount.String(a.Name))
			}
			out = append(out, o)
		}
	}
	return out
}

// NewMetrics returns metrics exported on their own Prometheus registry.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	meter := mp.Meter("smsdispatcher")
	m := &Metrics{provider: mp, registry: reg}
	var errs []error
	must := func(err error) { errs = append(errs, err) }
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		must(err)
		return c
	}
	latency := func(name, desc string, bounds ...float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(bounds...), metric.WithDescription(desc))
		must(err)
		return h
	}
	m.messages = counter(MetricMessages, "{message}",
		"Deliveries handled, by class, outcome and action (ack, nack, dead_letter).")
	m.admission = counter(MetricAdmission, "{decision}",
		"Final admission decisions, by class, source (redis, fallback, penalty) and result.")
	m.admissionWait = latency(MetricAdmissionWait, "Time a message waited for a send slot, by class.",
		0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8)
	m.otpLatency = latency(MetricOTPLatency, "Time from an OTP's publication to the provider's acceptance.",
		0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)
	m.providerDuration = latency(MetricProviderDuration, "Provider request duration, by status class (2xx, 429, 4xx, 5xx, error).",
		0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	m.redisCalls = counter(MetricRedisCalls, "{call}",
		"Redis commands, by operation (gcra, penalty, claim, other).")
	m.segments = counter(MetricSegments, "{segment}",
		"Message segments the provider accepted, by class: what Twilio counts against the account's rate (Vonage's carriers, each part).")
	m.pullErrors = counter(MetricPullErrors, "{error}",
		"Pub/Sub pull streams that failed to open or ended in an error, by class and gRPC code: Pub/Sub unreachable (Unavailable), a missing subscription (NotFound), a denied role (PermissionDenied).")
	m.handlerPanics = counter(MetricHandlerPanics, "{panic}",
		"Deliveries whose handling panicked (recovered: the message was nacked, or dead-lettered with invalid: handler_panic), by class.")
	m.expired = counter(MetricExpired, "{message}",
		"Deferred messages (outside their send window, or over their cap) whose deadline came before their release: never sent, by class.")
	m.noRoute = counter(MetricNoRoute, "{message}",
		"Deliveries no account serves (dead-lettered with invalid: no_route), by class and destination country code.")
	m.blocked = counter(MetricBlocked, "{message}",
		"Deliveries the pumping guard refused (acked unsent, status event blocked), by class, reason and destination country code.")
	m.verifications = counter(MetricVerifications, "{verification}",
		"Verifications read from VERIFICATIONS_TOPIC, by result: known (a send of a class judging conversion, in its window, by that class), or unknown (an unknown or old id, ignored).")
	m.guardSends = counter(MetricGuardSends, "{message}",
		"Sends the pumping guard counted in its ranges (classes with max_per_prefix or min_conversion, allowed ranges excepted), by class and destination country code.")
	m.hedges = counter(MetricHedges, "{message}",
		"First-class deliveries sent through the next account too because their home had not answered within the hedge's bound, by the home account.")
	m.suppressed = counter(MetricSuppressed, "{message}",
		"Messages the suppression list stopped, by class and the source of the entry that stopped them: before their send (acked, never sent), or settled suppressed by a receipt saying the recipient opted out (Vonage's err-code 9).")
	m.listChanges = counter(MetricSuppressionChange, "{change}",
		"Changes this process made to the suppression list, by source (inbound, provider), action (add, remove) and the account they came through.")
	m.inbound = counter(MetricInbound, "{message}",
		"Posts to an account's inbound URL, by account, keyword (stop, start, help, none) and outcome: a verified reply changed (the list changed), unchanged, duplicate (a webhook posted again) or failed (answered 503); a post refused unread (keyword none) forged, malformed or too_large.")
	m.receiptInstruments, err = newReceiptInstruments(meter)
	must(err)
	m.attempts, err = meter.Int64Histogram(MetricDeliveryAttempt, metric.WithUnit("{attempt}"),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100),
		metric.WithDescription("Pub/Sub delivery attempt of each delivery, by class (needs the dead-letter policy)."))
	must(err)

	gauge := func(name, desc string, read func(State) []obs) {
		_, err := meter.Float64ObservableGauge(name, metric.WithDescription(desc),
			metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
				var s State
				if f := m.state.Load(); f != nil {
					s = (*f)()
				}
				for _, v := range read(s) {
					o.Observe(v.value, metric.WithAttributes(v.attrs...))
				}
				return nil
			}))
		must(err)
	}
	gauge(MetricPenaltyActive, "1 while a provider 429 penalty (or an account pause) is live for this process, by account.", func(s State) []obs {
		return perAccount(s, func(a AccountState) []obs { return one(b2f(a.PenaltyActive)) })
	})
	gauge(MetricAccountPaused, "1 while the provider's refusal of the account (credentials, suspension, credit) stops sending on it.", func(s State) []obs {
		return perAccount(s, func(a AccountState) []obs { return one(b2f(a.Paused)) })
	})
	gauge(MetricAccountHealth, "The account's health as this process last heard it from Redis (within a second): 0 healthy, 1 degraded (its sends are failing; it admits probes only and OTP fails over).", func(s State) []obs {
		return perAccount(s, func(a AccountState) []obs { return one(b2f(a.Degraded)) })
	})
	gauge(MetricReceiptsEnabled, "1 while the account's sends ask the provider for delivery receipts (RECEIPTS_ADDR is set): its sends should be followed by receipts.", func(s State) []obs {
		return perAccount(s, func(a AccountState) []obs { return one(b2f(a.Receipts)) })
	})
	gauge(MetricFallbackActive, "1 while this process decides locally because Redis is unreachable, by account.", func(s State) []obs {
		return perAccount(s, func(a AccountState) []obs { return one(b2f(a.FallbackActive)) })
	})
	gauge(MetricLearnedRate, "The account's rate as learned from the provider's 429s (per second, in the account's unit); the target when nothing was learned.", func(s State) []obs {
		return perAccount(s, func(a AccountState) []obs {
			if a.LearnedRPS > 0 {
				return one(a.LearnedRPS)
			}
			return one(a.TargetRPS)
		})
	})
	gauge(MetricBudgetTokens, "Retry budget tokens (10 full; retries allowed above 5).", func(s State) []obs { return one(s.BudgetTokens) })
	gauge(MetricOTPWaiting, "Messages of the first class (OTP) of this process waiting for a send slot.", func(s State) []obs { return one(float64(s.OTPWaiting)) })
	gauge(MetricWaiting, "Messages of this process waiting for a send slot, by class.", func(s State) []obs {
		var out []obs
		for class, n := range s.Waiting {
			out = append(out, obs{float64(n), []attribute.KeyValue{AttrClass.String(class.String())}})
		}
		return out
	})
	byClass := func(m map[string]int) []obs {
		var out []obs
		for class, n := range m {
			out = append(out, obs{float64(n), []attribute.KeyValue{AttrClass.String(class)}})
		}
		return out
	}
	gauge(MetricDeferred, "Messages the deferral store holds (outside their send window, or over their cap), by class; the same in every process.",
		func(s State) []obs { return byClass(s.Deferred) })
	gauge(MetricDeferredOverdue, "Deferred messages due more than 15 min ago and not released, by class: no process is releasing them.",
		func(s State) []obs { return byClass(s.Overdue) })
	gauge(MetricGuardBlocks, "Ranges the pumping guard blocks now, by reason (geo never blocks a range: prefix_rate, conversion, operator).", func(s State) []obs {
		if s.GuardBlocks == nil {
			return nil
		}
		var out []obs
		for _, reason := range []string{"prefix_rate", "conversion", "operator"} {
			out = append(out, obs{float64(s.GuardBlocks[reason]), []attribute.KeyValue{AttrBlockReason.String(reason)}})
		}
		return out
	})
	gauge(MetricConfiguredRate, "Configured rates per second, by limit: the contract line, the target, each class's ceiling and reserve (sms_class), and marketing's ceiling.", func(s State) []obs {
		return perAccount(s, AccountState.configuredRates)
	})
	_, err = meter.Float64ObservableGauge(MetricRedisEvicting,
		metric.WithDescription("1 while Redis's maxmemory-policy (read every minute) lets it evict keys: any policy but noeviction."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(b2f(m.redisEvicting.Load()))
			return nil
		}))
	must(err)
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

type obs struct {
	value float64
	attrs []attribute.KeyValue
}

func one(v float64) []obs { return []obs{{value: v}} }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetState makes the gauges read f when scraped.
func (m *Metrics) SetState(f func() State) { m.state.Store(&f) }

// SetRedisEvicting sets the gauge of Redis's maxmemory-policy: whether it
// lets Redis evict keys.
func (m *Metrics) SetRedisEvicting(evicting bool) { m.redisEvicting.Store(evicting) }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Meter is the meter of m's instruments, for a component's own (the
// console's actions), served by Handler with the others.
func (m *Metrics) Meter() metric.Meter { return m.provider.Meter("smsdispatcher") }

// Shutdown flushes and stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// Observe records one delivery's end.
func (m *Metrics) Observe(ev dispatch.Event) {
	ctx := context.Background()
	class := AttrClass.String(ev.Class.String())
	acct := AttrAccount.String(ev.Account)
	m.messages.Add(ctx, 1, metric.WithAttributes(class, acct,
		AttrOutcome.String(ev.Outcome.String()), AttrAction.String(ev.Action.String())))
	if ev.Panicked {
		m.handlerPanics.Add(ctx, 1, metric.WithAttributes(class))
	}
	if ev.NoRoute != "" {
		m.noRoute.Add(ctx, 1, metric.WithAttributes(class, AttrCountry.String(ev.NoRoute)))
	}
	if ev.Outcome == nack.Suppressed {
		m.suppressed.Add(ctx, 1, metric.WithAttributes(class, AttrListSource.String(ev.SuppressedBy)))
	}
	if ev.Blocked != "" {
		m.blocked.Add(ctx, 1, metric.WithAttributes(class, AttrBlockReason.String(ev.Blocked), AttrCountry.String(ev.BlockedCountry)))
	}
	if ev.HedgedFrom != "" {
		m.hedges.Add(ctx, 1, metric.WithAttributes(AttrAccount.String(ev.HedgedFrom)))
	}
	if ev.DeliveryAttempt > 0 {
		m.attempts.Record(ctx, int64(ev.DeliveryAttempt), metric.WithAttributes(class))
	}
	if ev.Outcome == nack.Sent {
		m.segments.Add(ctx, int64(max(ev.Segments, 1)), metric.WithAttributes(class, acct))
	}
	if d := ev.Decision; d.Source != "" {
		result := "denied"
		if d.Allowed {
			result = attrOutcomeResultAllows
		}
		m.admission.Add(ctx, 1, metric.WithAttributes(class, acct, AttrSource.String(string(d.Source)),
			AttrDecision.String(result), AttrReason.String(string(d.Reason))))
		if !ev.Admitted.IsZero() {
			m.admissionWait.Record(ctx, ev.Admitted.Sub(ev.Received).Seconds(), metric.WithAttributes(class))
		}
	}
	if ev.Outcome == nack.Sent && ev.Class == admission.OTP && !ev.PublishTime.IsZero() {
		m.otpLatency.Record(ctx, ev.Finished.Sub(ev.PublishTime).Seconds())
	}
}

// PullError counts a Pub/Sub pull stream of class that failed to open or
// ended with the gRPC code.
func (m *Metrics) PullError(class admission.Class, code string) {
	m.pullErrors.Add(context.Background(), 1, metric.WithAttributes(AttrClass.String(class.String()), AttrPullCode.String(code)))
}

// recordProvider records one provider request; status 0 means no answer.
// throttled counts a throttle answered in a 200 body (Vonage) as a 429.
func (m *Metrics) recordProvider(ctx context.Context, d time.Duration, status int, throttled bool) {
	class := "error"
	switch {
	case status == http.StatusTooManyRequests || throttled:
		class = "429"
	case status >= 200 && status < 600:
		class = strconv.Itoa(status/100) + "xx"
	}
	attrs := []attribute.KeyValue{AttrStatusClass.String(class), semconv.HTTPRequestMethodPost}
	if status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	}
	m.providerDuration.Record(ctx, d.Seconds(), metric.WithAttributes(attrs...))
}
