package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisconn"
)

// validate reports the first value of s that cannot work, as an *Error.
func (s Settings) validate() error {
	if err := s.Process.check(); err != nil {
		return asError(err)
	}
	if err := s.Process.checkReceipts(); err != nil {
		return asError(err)
	}
	if err := s.Account.check(s.Process, variables); err != nil {
		return asError(err)
	}
	if s.AccountsFile == "" {
		// With ACCOUNTS_FILE, the loader checks each account's.
		if err := s.Account.checkReceipts(s.Process, variables); err != nil {
			return asError(err)
		}
	}
	return asError(s.Process.checkRedis())
}

// check reports the first of p's own values that cannot work.
func (p Process) check() error {
	switch {
	case p.DeadLetterRetention < minRetention || p.DeadLetterRetention > maxRetention:
		return badf("DEAD_LETTER_RETENTION", "must be %v to %v (what Pub/Sub allows a subscription), got %v", minRetention, maxRetention, p.DeadLetterRetention)
	case p.ArrivalJitter < 0 || p.ArrivalJitter > maxArrivalJitter:
		return badf("PROVIDER_ARRIVAL_JITTER", "must be 0 to %v, got %v", maxArrivalJitter, p.ArrivalJitter)
	case p.MaxRetryAfter < time.Second:
		// Below the 1 s a 429 without a Retry-After stops the account.
		return badf("MAX_RETRY_AFTER", "must be at least 1s, got %v", p.MaxRetryAfter)
	case p.MaxSenders < 1:
		return badf("MAX_SENDERS", "must be at least 1, got %d", p.MaxSenders)
	case p.MaxSenders > maxSenders:
		return badf("MAX_SENDERS", "must be at most %d, got %d", maxSenders, p.MaxSenders)
	}
	return nil
}

// checkRedis reports a Redis URL, CA file or TLS setting that cannot work.
func (p Process) checkRedis() error {
	if p.RedisURL == "" {
		return nil
	}
	opts, err := redisconn.Options(p.RedisURL)
	var tlsConfig *tls.Config
	if err == nil {
		tlsConfig = opts.TLSConfig
	}
	env := p.redisURLVariable()
	switch {
	case err != nil:
		return badf(env, "%v", err) // the message never holds the URL: it may carry a password
	case p.RedisCAFile != "" && tlsConfig == nil:
		return badf("REDIS_CA_FILE", "applies to TLS only, and %s is not a rediss:// URL", env)
	case p.RedisInsecure && tlsConfig == nil:
		return badf("REDIS_INSECURE_SKIP_VERIFY", "applies to TLS only, and %s is not a rediss:// URL", env)
	case p.RedisInsecure && p.RedisCAFile != "":
		return badf("REDIS_INSECURE_SKIP_VERIFY", "set either it or REDIS_CA_FILE, not both: a CA file is for checking the certificate")
	case tlsConfig != nil && tlsConfig.InsecureSkipVerify && !p.RedisInsecure:
		return badf(env, "skip_verify=true turns off the check of the server's certificate, and anyone on the path could read the password and the limiter's state: give the server's CA in REDIS_CA_FILE, or set REDIS_INSECURE_SKIP_VERIFY=true to accept it")
	}
	return nil
}

// check reports the first of a's values that cannot work under p; n says
// the settings its messages name.
func (a Account) check(p Process, n names) error {
	for env, v := range map[string]float64{"CONTRACT_RPS": a.ContractRPS, "TARGET_RPS": a.TargetRPS, "MARKETING_RPS": a.MarketingRPS} {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return badf(env, "must be a finite number, got %v", v)
		}
	}
	switch {
	case !(a.MinDeliveredRatio >= 0 && a.MinDeliveredRatio <= 1):
		return badf("MIN_DELIVERED_RATIO", "must be from 0 (off) to 1, got %v", a.MinDeliveredRatio)
	case !(a.ContractRPS > 0):
		return badf("CONTRACT_RPS", "must be above 0, got %v", a.ContractRPS)
	case a.ContractRPS > maxRPS:
		return badf("CONTRACT_RPS", "must be at most %v (the limiter counts in microseconds), got %v", maxRPS, a.ContractRPS)
	case !(a.TargetRPS >= admission.MinRPS):
		return badf("TARGET_RPS", "must be at least %v, got %v", admission.MinRPS, a.TargetRPS)
	case a.TargetRPS > a.ContractRPS:
		return badf("TARGET_RPS", "%v is above %s (%v): the dispatcher would break the contract", a.TargetRPS, n("CONTRACT_RPS"), a.ContractRPS)
	case !(a.MarketingRPS >= admission.MinRPS):
		return badf("MARKETING_RPS", "must be at least %v, got %v", admission.MinRPS, a.MarketingRPS)
	case a.MarketingRPS > a.TargetRPS:
		return badf("MARKETING_RPS", "%v is above %s (%v): OTP would have no room", a.MarketingRPS, n("TARGET_RPS"), a.TargetRPS)
	case a.Burst < 1:
		return badf("BURST", "must be at least 1, got %d", a.Burst)
	case a.Burst > maxBurst:
		return badf("BURST", "must be at most %d, got %d", maxBurst, a.Burst)
	case a.reach(p, 0) > a.ContractRPS:
		// Admissions within any W+J seconds may reach the provider within
		// W: a provider counting a sliding window of W seconds sees at
		// most TARGET_RPS×(W + J) + BURST; over one second, that must fit
		// the contract.
		return badf("TARGET_RPS", "%s (%v) × (1s + PROVIDER_ARRIVAL_JITTER (%v)) + %s (%d) = %.4g messages could reach the provider within one second, above %s (%v): lower %s, %s or PROVIDER_ARRIVAL_JITTER",
			n("TARGET_RPS"), a.TargetRPS, p.ArrivalJitter, n("BURST"), a.Burst, a.reach(p, 0), n("CONTRACT_RPS"), a.ContractRPS, n("TARGET_RPS"), n("BURST"))
	case a.ProviderToken != "" && a.ProviderTokenFile != "":
		return badf("SMS_PROVIDER_TOKEN_FILE", "set either it or %s, not both", n("SMS_PROVIDER_TOKEN"))
	case a.TwilioAuthToken != "" && a.TwilioAuthTokenFile != "":
		return badf("TWILIO_AUTH_TOKEN_FILE", "set either it or %s, not both", n("TWILIO_AUTH_TOKEN"))
	case a.TwilioFrom != "" && a.TwilioServiceSID != "":
		return badf("TWILIO_MESSAGING_SERVICE_SID", "set either it or %s, not both", n("TWILIO_FROM"))
	case a.VonageAPISecret != "" && a.VonageAPISecretFile != "":
		return badf("VONAGE_API_SECRET_FILE", "set either it or %s, not both", n("VONAGE_API_SECRET"))
	case a.Provider != "generic" && a.Provider != "twilio" && a.Provider != "vonage":
		return badf("SMS_PROVIDER", "want generic, twilio or vonage, got %q", a.Provider)
	case a.RateUnit != "message" && a.RateUnit != "segment":
		return badf("RATE_UNIT", "want message or segment, got %q", a.RateUnit)
	case a.MaxSegments < 1 || a.MaxSegments > maxSegments:
		return badf("MAX_SEGMENTS", "must be 1-%d, got %d", maxSegments, a.MaxSegments)
	case a.RateUnit == "segment" && a.reach(p, a.MaxSegments-1) > a.ContractRPS:
		// Any window of W seconds sees at most TARGET_RPS×(W + J) + BURST
		// - 1 + the longest message's segments: over one second, that
		// must fit the contract.
		return badf("MAX_SEGMENTS", "%s (%v) × (1s + PROVIDER_ARRIVAL_JITTER (%v)) + %s (%d) + %s (%d) - 1 = %.4g segments could reach the provider within one second, above %s (%v): lower %s, %s, %s or PROVIDER_ARRIVAL_JITTER",
			n("TARGET_RPS"), a.TargetRPS, p.ArrivalJitter, n("BURST"), a.Burst, n("MAX_SEGMENTS"), a.MaxSegments, a.reach(p, a.MaxSegments-1), n("CONTRACT_RPS"), a.ContractRPS,
			n("TARGET_RPS"), n("BURST"), n("MAX_SEGMENTS"))
	case !validAccount(a.Name):
		return badf("SMS_ACCOUNT", "must be non-empty printable ASCII without spaces, braces or / \\ %% ? # (a Redis hash tag, a segment of the receipts path), and not . or .., got %q", a.Name)
	}
	for _, u := range []struct{ env, url string }{
		{"SMS_PROVIDER_URL", a.ProviderURL}, {"TWILIO_API_URL", a.TwilioAPIURL}, {"VONAGE_API_URL", a.VonageAPIURL},
	} {
		if u.url == "" {
			continue
		}
		if err := checkURL(u.url, "http", "https"); err != nil {
			return badf(u.env, "%v", err)
		}
	}
	return nil
}

// defaultMaxSegments is MAX_SEGMENTS's default when the rates leave room
// for it: 918 GSM-7 or 402 UCS-2 characters.
const defaultMaxSegments = 6

// dependentDefaults fills in the defaults that follow other settings, for
// those not given: RATE_UNIT's from SMS_PROVIDER, then, with rates in
// segments, MAX_SEGMENTS's from the rates (docs/contract.md section 4).
func (a *Account) dependentDefaults(rateUnitGiven, maxSegmentsGiven bool, p Process) {
	if !rateUnitGiven {
		a.RateUnit = defaultRateUnit(a.Provider)
	}
	if !maxSegmentsGiven {
		a.MaxSegments = defaultMaxSegments
		if a.RateUnit == "segment" {
			a.MaxSegments = a.fittingSegments(p)
		}
	}
}

// defaultRateUnit is RATE_UNIT's default for provider: segment for Twilio,
// which counts throughput in segments, and Vonage, whose carriers count
// each part as a message; message for the generic API.
func defaultRateUnit(provider string) string {
	if provider == "twilio" || provider == "vonage" {
		return "segment"
	}
	return "message"
}

// fittingSegments is MAX_SEGMENTS's default: defaultMaxSegments, or the
// most segments, at least 1, for which the segment check of check holds
// (at the default rates, 4: 90 × 1.02 + 5 + 4 - 1 = 99.8). Rates that
// leave no room for one segment fail check's message check first.
func (a Account) fittingSegments(p Process) int {
	n := defaultMaxSegments
	for n > 1 && a.reach(p, n-1) > a.ContractRPS {
		n--
	}
	return n
}

// reach is the most units a provider counting a sliding window of one
// second can see: TARGET_RPS × (1 s + PROVIDER_ARRIVAL_JITTER) + BURST +
// extra (the longest message's segments beyond its first, with rates in
// segments). The jitter's share is added apart so that a product such as
// 50 × 1.02 does not round above 51.
func (a Account) reach(p Process, extra int) float64 {
	return a.TargetRPS + a.TargetRPS*p.ArrivalJitter.Seconds() + float64(a.Burst) + float64(extra)
}

// validAccount reports whether account can go in a Redis hash tag
// {sms:<account>} as admission requires, and be the last segment of its
// receipts path as it is: no / \ % ? #, which a path splits or escapes,
// and neither . nor .., which a router cleans away with a redirect (a
// provider does not follow it: every receipt would be lost).
func validAccount(account string) bool {
	if account == "." || account == ".." {
		return false
	}
	for i := 0; i < len(account); i++ {
		if b := account[i]; b < 0x21 || b > 0x7e || strings.IndexByte(`{}/\%?#`, b) >= 0 {
			return false
		}
	}
	return account != ""
}

func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	for _, s := range schemes {
		if u.Scheme == s && u.Host != "" {
			return nil
		}
	}
	return fmt.Errorf("want an absolute %s URL", strings.Join(schemes, " or "))
}

// Limiter is the admission.Config of account a under p's settings.
func (p Process) Limiter(a Account) admission.Config {
	return admission.Config{
		Account: a.Name, TargetRPS: a.TargetRPS, MarketingRPS: a.MarketingRPS,
		Burst: a.Burst, MaxSenders: p.MaxSenders, RedisTimeout: p.RedisTimeout,
		MaxInFlight: a.MaxInFlight, LeaseTTL: p.SendTimeout + 10*time.Second,
		MaxCost: a.MaxCost(), Senders: a.Senders, ArrivalJitter: p.ArrivalJitter, Adaptive: a.Adaptive,
		MaxRetryAfter: p.MaxRetryAfter, Route: routeRule(a.MinDeliveredRatio), Classes: p.limits(a),
	}
}

// limits are the admission classes of a: the classes it serves, in
// priority order, with their ceilings, reserves and rules under p; nil
// (the default two) when it names none.
func (p Process) limits(a Account) []admission.ClassLimit {
	var out []admission.ClassLimit
	for _, c := range a.Classes {
		out = append(out, admission.ClassLimit{Name: c, RPS: a.ceiling(c), Reserve: a.ReserveRPS[c], Policy: p.Policy(c)})
	}
	return out
}

// routeRule is the route skip's rule of an account whose OTP must be
// delivered at ratio at least: 0 is off, which admission says with a
// negative ratio (its zero is the default).
func routeRule(ratio float64) admission.RouteRule {
	if ratio == 0 {
		ratio = -1
	}
	return admission.RouteRule{MinDeliveredRatio: ratio}
}

// LimiterError is err, an error of admission.Config.Validate or
// admission.New for an account of the single-account variables, said as an
// *Error naming the variable behind its field; any other error is returned
// as it is. Of the fields it names, MaxCost (MAX_SEGMENTS) and
// ArrivalJitter (PROVIDER_ARRIVAL_JITTER) never fail here: the start-up
// checks refuse a MAX_SEGMENTS outside 1-100 and a jitter outside 0-1s
// first, and MaxCost is 1 when the rates count messages.
func LimiterError(err error) error {
	var ce *admission.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	for _, s := range settings {
		if s.field == ce.Field {
			return &Error{s.env, s.flag, ce.Reason}
		}
	}
	return err
}
