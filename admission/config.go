package admission

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"smsdispatcher/config/policy"
)

// Defaults of Config; docs/contract.md section 4 names them.
const (
	DefaultAccount         = "default"
	DefaultTargetRPS       = 90
	DefaultMarketingRPS    = 70
	DefaultBurst           = 5
	DefaultMaxSenders      = 23
	DefaultRedisTimeout    = 100 * time.Millisecond
	DefaultRedisRetryAfter = time.Second
	DefaultLeaseTTL        = 30 * time.Second
	DefaultMaxRetryAfter   = 5 * time.Minute
)

// MinRPS is the lowest rate a Limiter takes: one message in 100 s (a lower
// one would overflow the microsecond arithmetic of a fallback share).
const MinRPS = 0.01

// Config is the limiter's configuration. A zero field means its default.
type Config struct {
	// Account names the provider account; all its keys share the hash tag
	// {sms:<Account>}. Default "default".
	Account string
	// TargetRPS is what all processes together may send, every class.
	// Default 90.
	TargetRPS float64
	// MarketingRPS is what marketing may use of TargetRPS, with the
	// default classes. Default 70.
	MarketingRPS float64
	// Classes are the account's classes in priority order, each with its
	// ceiling and reserve (docs/decisions.md, "Classes"). Default: OTP, then
	// Marketing at MarketingRPS.
	Classes []ClassLimit
	// Burst is how many messages may go at once after a quiet spell. Default 5.
	Burst int
	// MaxSenders is the most processes that can ever send on the account at
	// once; each falls back to TargetRPS/MaxSenders while Redis is down.
	// Default 23.
	MaxSenders int
	// RedisTimeout bounds each script call. Default 100ms. The Redis client
	// must honour context deadlines (go-redis: ContextTimeoutEnabled).
	RedisTimeout time.Duration
	// RedisRetryAfter is how long Redis is left alone after an error before
	// it is tried again. Default 1s.
	RedisRetryAfter time.Duration
	// MaxInFlight is the most sends in flight on the account across all
	// processes (the provider's simultaneous connections); 0 means no
	// limit. Each admission then holds a lease until Settle or LeaseTTL.
	// In the Redis-down fallback each process holds at most
	// MaxInFlight/MaxSenders (at least 1).
	MaxInFlight int
	// MaxCost is the most units one send may take (MAX_SEGMENTS when rates
	// count segments). An account pause that ends early (ResumeAccount)
	// leaves the account that much debt, so that sends from before the
	// pause and after it never add up past the bound. Default 1.
	MaxCost int
	// RecordTTL is how long an id's record of what became of it (sent,
	// refused) lives, and with it the send-once guarantee. Default 24h.
	RecordTTL time.Duration
	// LeaseTTL is how long a lease outlives a process that died mid-send.
	// It must exceed the longest send. Default 30s.
	LeaseTTL time.Duration
	// Senders is the account's sender pool, if it has one: each admission
	// then also takes a slot of one sender (the one whose slot opens
	// first, Decision.Sender), which sends at most its RPS in any second
	// as the provider sees it (ArrivalJitter allowed for).
	Senders []Sender
	// ArrivalJitter is the spread of the time from admission to arrival
	// at the provider; a sender's slots are spaced so that its rate holds
	// at the provider despite it.
	ArrivalJitter time.Duration
	// MaxRetryAfter is the longest one 429 stops the account
	// (ReportThrottled): a longer Retry-After counts as this long, in this
	// process and in Redis, so that a provider's mistake cannot stop the
	// account for a day. Default 5m.
	MaxRetryAfter time.Duration
	// Adaptive, when enabled, learns the rate the provider really allows
	// below TargetRPS (docs/decisions.md, "Accounts, sender pools and a limit that learns").
	Adaptive Adaptive
	// Health is the rule that says when the account's sends are failing
	// and it admits probes only (docs/decisions.md, "An account's health").
	Health HealthRule
	// Route is the rule that says when the account's route to a
	// destination prefix is skipped for the first class and probed until
	// a probe is delivered (route.go). The skip lives Health.Keep past its
	// last change.
	Route RouteRule
	// Logger receives at most one line per RedisRetryAfter about Redis
	// failures, and one per 429 whose Retry-After MaxRetryAfter cut. If
	// nil, slog.Default() is used.
	Logger *slog.Logger
}

// A ClassLimit is one class of the account's, in Config.Classes.
type ClassLimit struct {
	Name Class
	// Policy is the class's rules as config computes them (policy.Of):
	// the limiter reads them, never the class's name or position. The
	// default classes have policy.Default's.
	Policy policy.Class
	// RPS is the class's ceiling on the account. 0: what the reserves of
	// the classes before it leave it (TargetRPS without one).
	RPS float64
	// Reserve is the rate that the classes after this one may never take
	// together on the account: they share at most TargetRPS - Reserve.
	// 0: none.
	Reserve float64
}

// A Sender is one number (or sender id) of an account's sender pool.
type Sender struct {
	// From is what the provider is told to send from.
	From string
	// RPS is the sender's own rate, in the account's unit (messages, or
	// segments).
	RPS float64
}

// Adaptive configures the limit that learns: a 429 lowers the account's
// rate, shared by every process, and it searches upward again while the
// account is pressed against it, never above TargetRPS nor below MinRPS.
type Adaptive struct {
	Enabled bool
	// MinRPS is the lowest the learned rate goes. Default TargetRPS/10.
	MinRPS float64
	// ProbeInterval is how often a settled rate tries one step higher.
	// Default 10m.
	ProbeInterval time.Duration
	// Step is how long a rate must hold, under load and without a 429,
	// before the search moves on. Default 10s.
	Step time.Duration
}

// Defaults of Adaptive.
const (
	DefaultProbeInterval = 10 * time.Minute
	DefaultAdaptiveStep  = 10 * time.Second
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Account = cmp.Or(c.Account, DefaultAccount)
	c.TargetRPS = cmp.Or(c.TargetRPS, DefaultTargetRPS)
	c.MarketingRPS = cmp.Or(c.MarketingRPS, DefaultMarketingRPS)
	if len(c.Classes) == 0 {
		c.Classes = []ClassLimit{
			{Name: OTP, Policy: policy.Default(OTP.String())},
			{Name: Marketing, RPS: c.MarketingRPS, Policy: policy.Default(Marketing.String())},
		}
	} else {
		c.Classes = slices.Clone(c.Classes)
	}
	// A class without a ceiling of its own has what the reserves before
	// it leave it.
	room := c.TargetRPS
	for i, k := range c.Classes {
		c.Classes[i].RPS = cmp.Or(k.RPS, room)
		if k.Reserve > 0 {
			room = min(room, c.TargetRPS-k.Reserve)
		}
	}
	c.Burst = cmp.Or(c.Burst, DefaultBurst)
	c.MaxSenders = cmp.Or(c.MaxSenders, DefaultMaxSenders)
	c.RedisTimeout = cmp.Or(c.RedisTimeout, DefaultRedisTimeout)
	c.RedisRetryAfter = cmp.Or(c.RedisRetryAfter, DefaultRedisRetryAfter)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, DefaultLeaseTTL)
	c.RecordTTL = cmp.Or(c.RecordTTL, DefaultRecordTTL)
	c.MaxCost = cmp.Or(c.MaxCost, 1)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, DefaultMaxRetryAfter)
	if c.Adaptive.Enabled {
		c.Adaptive.MinRPS = cmp.Or(c.Adaptive.MinRPS, c.TargetRPS/10)
		c.Adaptive.ProbeInterval = cmp.Or(c.Adaptive.ProbeInterval, DefaultProbeInterval)
		c.Adaptive.Step = cmp.Or(c.Adaptive.Step, DefaultAdaptiveStep)
	}
	c.Health = c.Health.withDefaults()
	c.Route = c.Route.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// A ConfigError names the field of Config that cannot work.
type ConfigError struct {
	Field  string // "TargetRPS", "MarketingRPS", ...
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("admission: %s %s", e.Field, e.Reason)
}

// Validate reports the first field of c (after defaults) that cannot work,
// as a *ConfigError.
func (c Config) Validate() error {
	defaultClasses := len(c.Classes) == 0
	c = c.withDefaults()
	for _, check := range []func() error{
		func() error { return c.validateRates(defaultClasses) }, c.validatePool, c.validateAdaptive,
		c.validateClasses, c.Route.validate, c.validateAccount,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// configError is a *ConfigError of field, its reason formatted.
func configError(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// validateRates reports the first of c's rates, limits and durations that
// cannot work; MarketingRPS counts with the default classes only.
func (c Config) validateRates(defaultClasses bool) error {
	switch {
	case !(c.TargetRPS >= MinRPS) || math.IsInf(c.TargetRPS, 0):
		return configError("TargetRPS", "must be a finite number of at least %v, got %v", MinRPS, c.TargetRPS)
	case defaultClasses && (!(c.MarketingRPS >= MinRPS) || c.MarketingRPS > c.TargetRPS):
		return configError("MarketingRPS", "must be at least %v and at most TargetRPS (%v), got %v", MinRPS, c.TargetRPS, c.MarketingRPS)
	case c.Burst < 1:
		return configError("Burst", "must be at least 1, got %d", c.Burst)
	case c.MaxSenders < 1:
		return configError("MaxSenders", "must be at least 1, got %d", c.MaxSenders)
	case c.RedisTimeout < 0:
		return configError("RedisTimeout", "must not be negative, got %v", c.RedisTimeout)
	case c.MaxCost < 1:
		return configError("MaxCost", "must be at least 1, got %d", c.MaxCost)
	case c.MaxInFlight < 0:
		return configError("MaxInFlight", "must not be negative, got %d", c.MaxInFlight)
	case c.LeaseTTL < time.Millisecond:
		return configError("LeaseTTL", "must be at least 1ms, got %v", c.LeaseTTL)
	case c.RedisRetryAfter < 0:
		return configError("RedisRetryAfter", "must not be negative, got %v", c.RedisRetryAfter)
	case c.MaxRetryAfter < time.Millisecond:
		return configError("MaxRetryAfter", "must be at least 1ms, got %v", c.MaxRetryAfter)
	}
	return nil
}

// validatePool reports the first sender of c's pool that cannot work.
func (c Config) validatePool() error {
	if len(c.Senders) > MaxPoolSize {
		return configError("Senders", "%d senders: a pool holds at most %d", len(c.Senders), MaxPoolSize)
	}
	seen, rates := map[string]bool{}, map[float64]bool{}
	for _, s := range c.Senders {
		switch {
		case s.From == "":
			return configError("Senders", "a sender has no From")
		case seen[s.From]:
			return configError("Senders", "%q is listed twice", s.From)
		case !(s.RPS >= MinRPS) || s.RPS > 1e6:
			return configError("Senders", "%q: RPS must be %v to 1e6, got %v", s.From, MinRPS, s.RPS)
		}
		seen[s.From], rates[s.RPS] = true, true
	}
	if len(rates) > MaxPoolRates {
		return configError("Senders", "%d different rates: a pool has at most %d", len(rates), MaxPoolRates)
	}
	if c.ArrivalJitter < 0 || c.ArrivalJitter > time.Second {
		return configError("ArrivalJitter", "must be 0 to 1s, got %v", c.ArrivalJitter)
	}
	return nil
}

// validateAdaptive reports the first setting of c's learned rate that
// cannot work, when it is enabled.
func (c Config) validateAdaptive() error {
	if a := c.Adaptive; a.Enabled {
		switch {
		case !(a.MinRPS >= MinRPS) || a.MinRPS > c.TargetRPS:
			return configError("Adaptive.MinRPS", "must be at least %v and at most TargetRPS (%v), got %v", MinRPS, c.TargetRPS, a.MinRPS)
		case a.ProbeInterval < time.Second:
			return configError("Adaptive.ProbeInterval", "must be at least 1s, got %v", a.ProbeInterval)
		case a.Step < 100*time.Millisecond:
			return configError("Adaptive.Step", "must be at least 100ms, got %v", a.Step)
		}
	}
	return nil
}

// validateAccount reports an account name that cannot be part of its keys'
// hash tag.
func (c Config) validateAccount() error {
	for _, r := range c.Account {
		if r == '{' || r == '}' || r < 0x21 || r > 0x7e {
			return configError("Account", "must be printable ASCII without braces, got %q", c.Account)
		}
	}
	return nil
}

// validateClasses reports the first class of c (after defaults) whose
// ceiling or reserve cannot work, as a *ConfigError of Field "Classes".
func (c Config) validateClasses() error {
	bad := func(format string, args ...any) error {
		return &ConfigError{Field: "Classes", Reason: fmt.Sprintf(format, args...)}
	}
	seen := map[Class]bool{}
	for i, k := range c.Classes {
		if _, err := ParseClass(string(k.Name)); err != nil {
			return bad("%q: must be 1 to 32 of [a-z0-9_-]", k.Name)
		}
		switch {
		case k.Name == "global":
			return bad("%q names the account's own level ({sms:<account>}:tat:global)", k.Name)
		case seen[k.Name]:
			return bad("%q is listed twice", k.Name)
		case !(k.RPS >= MinRPS) || k.RPS > c.TargetRPS:
			return bad("%q: RPS must be at least %v and at most TargetRPS (%v), got %v", k.Name, MinRPS, c.TargetRPS, k.RPS)
		case !(k.Reserve >= 0) || k.Reserve >= c.TargetRPS:
			return bad("%q: Reserve must be at least 0 and below TargetRPS (%v), got %v", k.Name, c.TargetRPS, k.Reserve)
		case k.Reserve > 0 && i == len(c.Classes)-1:
			return bad("%q: Reserve is for the classes after it, and it is the last", k.Name)
		}
		seen[k.Name] = true
		for _, e := range c.Classes[:i] {
			if room := c.TargetRPS - e.Reserve; k.RPS > room+1e-9 {
				return bad("%q: RPS %v cannot hold with %q's Reserve %v (the classes after it share %v)", k.Name, k.RPS, e.Name, e.Reserve, room)
			}
		}
	}
	return nil
}

// senderInterval is the emission interval of a sender of rps units a
// second: spaced by the arrival jitter as well, so that the provider, which
// sees the sends up to that much later, never sees more than rps in a
// second.
func senderInterval(rps float64, jitter time.Duration) time.Duration {
	return time.Duration(math.Ceil(1e6*(1+jitter.Seconds())/rps)) * time.Microsecond
}

// interval returns the GCRA emission interval for rate, rounded up to the
// microsecond so that rounding never raises the rate.
func interval(rate float64) time.Duration {
	return time.Duration(math.Ceil(1e6/rate)) * time.Microsecond
}
