package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/provider"
)

// config is the dispatcher's whole configuration (docs/contract.md section 4).
// Each field comes from a flag, else its environment variable, else its
// default; parseConfig validates it once.
type config struct {
	ProjectID             string
	OTPTopic              string
	MarketingTopic        string
	OTPSubscription       string
	MarketingSubscription string
	DeadLetterTopic       string
	DeadLetterInspect     string
	DeadLetterRetention   time.Duration // how long setup has the inspect subscription keep dead letters
	RedisURL              string        // from REDIS_URL, or read from RedisURLFile
	RedisURLFile          string
	RedisInsecure         bool // REDIS_INSECURE_SKIP_VERIFY: a rediss:// server's certificate is not checked
	RedisCAFile           string
	RedisCA               []byte // PEM certificates read from RedisCAFile; nil: the system's roots
	Provider              string // generic, twilio or vonage
	ProviderURL           string
	ProviderToken         string // from SMS_PROVIDER_TOKEN, or read from ProviderTokenFile
	ProviderTokenFile     string
	TwilioAccountSID      string
	TwilioAuthToken       string
	TwilioAuthTokenFile   string
	TwilioFrom            string
	TwilioServiceSID      string
	TwilioAPIURL          string
	VonageAPIKey          string
	VonageAPISecret       string
	VonageAPISecretFile   string
	VonageFrom            string
	VonageAPIURL          string
	RateUnit              string // message or segment
	MaxSegments           int
	AccountPause          time.Duration
	MaxRetryAfter         time.Duration // the longest one 429 stops the account
	Account               string
	ContractRPS           float64
	TargetRPS             float64
	MarketingRPS          float64
	Burst                 int
	ArrivalJitter         time.Duration // spread of admission-to-arrival time the start-up check allows for
	MaxSenders            int
	OTPMaxWait            time.Duration
	MarketingMaxWait      time.Duration
	SendTimeout           time.Duration
	RedisTimeout          time.Duration
	MaxInFlight           int
	ShutdownGrace         time.Duration
	HTTPAddr              string
	AccountsFile          string // YAML of several accounts, replacing the single-account settings
	// fileSecrets are the credential files read at start, by the
	// variable naming each (SMS_PROVIDER_TOKEN_FILE, ...): the adapter
	// reads them again when they change.
	fileSecrets map[string]*provider.Secret
}

// A configError names the variable whose value cannot work. Its text is the
// one line the process prints before it exits with status 2.
type configError struct {
	Env, Flag, Msg string
}

func (e *configError) Error() string {
	return fmt.Sprintf("invalid configuration: %s (--%s): %s", e.Env, e.Flag, e.Msg)
}

// Bounds beyond which a value is taken for a mistake: past them the
// limiter's microsecond and nanosecond arithmetic would overflow, and a
// typo would pass for a setting.
const (
	maxRPS      = 1e6 // the limiter counts in microseconds: one slot per µs at most
	maxBurst    = 1_000_000
	maxSenders  = 100_000
	maxDuration = 24 * time.Hour
	// maxFileSize bounds what is read of a token or CA file, so that a path
	// to /dev/zero or a log file neither hangs nor bloats the process.
	maxFileSize = 1 << 20
	// maxSegments bounds MAX_SEGMENTS: a body of 1,600 emoji is 49
	// segments, none is longer.
	maxSegments = 100
	// maxArrivalJitter bounds PROVIDER_ARRIVAL_JITTER: a spread of more
	// than a second is not jitter but an outage, and would make the rate
	// check meaningless.
	maxArrivalJitter = time.Second
	// minRetention and maxRetention bound DEAD_LETTER_RETENTION: what
	// Pub/Sub allows a subscription's message retention.
	minRetention = 10 * time.Minute
	maxRetention = 7 * 24 * time.Hour
)

// setting is one row of the configuration table.
type setting struct {
	env, flag, def, usage string
	secret                bool
	parse                 func(c *config, v string) error
}

func str(dst func(*config) *string) func(*config, string) error {
	return func(c *config, v string) error { *dst(c) = v; return nil }
}

func num(dst func(*config) *float64) func(*config, string) error {
	return func(c *config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", v)
		}
		*dst(c) = f
		return nil
	}
}

func integer(dst func(*config) *int) func(*config, string) error {
	return func(c *config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*dst(c) = n
		return nil
	}
}

func boolean(dst func(*config) *bool) func(*config, string) error {
	return func(c *config, v string) error {
		switch v {
		case "true":
			*dst(c) = true
		case "false":
			*dst(c) = false
		default:
			return fmt.Errorf("want true or false, got %q", v)
		}
		return nil
	}
}

// optionalInteger is integer for a setting whose default is computed
// (dependentDefaults): "" leaves 0 until then.
func optionalInteger(dst func(*config) *int) func(*config, string) error {
	return func(c *config, v string) error {
		if v == "" {
			*dst(c) = 0
			return nil
		}
		return integer(dst)(c, v)
	}
}

func duration(dst func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 500ms or 8s, got %q", v)
		}
		if d <= 0 {
			return fmt.Errorf("must be positive, got %v", d)
		}
		if d > maxDuration {
			return fmt.Errorf("must be at most %v, got %v", maxDuration, d)
		}
		*dst(c) = d
		return nil
	}
}

// anyDuration parses a duration and leaves its range to validate, for a
// setting where 0 means something (PROVIDER_ARRIVAL_JITTER).
func anyDuration(dst func(*config) *time.Duration) func(*config, string) error {
	return func(c *config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 20ms, got %q", v)
		}
		*dst(c) = d
		return nil
	}
}

var settings = []setting{
	{"PUBSUB_PROJECT_ID", "project", "local", "Google Cloud project of the topics (GOOGLE_CLOUD_PROJECT is read too)", false, str(func(c *config) *string { return &c.ProjectID })},
	{"OTP_TOPIC", "otp-topic", "sms-otp", "topic producers publish OTP to", false, str(func(c *config) *string { return &c.OTPTopic })},
	{"MARKETING_TOPIC", "marketing-topic", "sms-marketing", "topic producers publish marketing to", false, str(func(c *config) *string { return &c.MarketingTopic })},
	{"OTP_SUBSCRIPTION", "otp-subscription", "sms-otp-dispatcher", "subscription the dispatcher pulls OTP from", false, str(func(c *config) *string { return &c.OTPSubscription })},
	{"MARKETING_SUBSCRIPTION", "marketing-subscription", "sms-marketing-dispatcher", "subscription the dispatcher pulls marketing from", false, str(func(c *config) *string { return &c.MarketingSubscription })},
	{"DEAD_LETTER_TOPIC", "dead-letter-topic", "sms-dead-letter", "topic of messages that will never be sent", false, str(func(c *config) *string { return &c.DeadLetterTopic })},
	{"DEAD_LETTER_SUBSCRIPTION", "dead-letter-subscription", "sms-dead-letter-inspect", "subscription for people to read dead letters", false, str(func(c *config) *string { return &c.DeadLetterInspect })},
	{"DEAD_LETTER_RETENTION", "dead-letter-retention", "168h", "how long the dead-letter subscription keeps a dead letter (it holds numbers and bodies: codes), set by setup; 10m to 168h", false, anyDuration(func(c *config) *time.Duration { return &c.DeadLetterRetention })},
	{"REDIS_URL", "redis-url", "", "redis:// or rediss:// URL; redis+cluster:// or a comma list of host:port for Redis Cluster", true, str(func(c *config) *string { return &c.RedisURL })},
	{"REDIS_URL_FILE", "redis-url-file", "", "file holding REDIS_URL, such as a mounted Secret; surrounding spaces and newlines are trimmed (instead of REDIS_URL)", false, str(func(c *config) *string { return &c.RedisURLFile })},
	{"REDIS_INSECURE_SKIP_VERIFY", "redis-insecure-skip-verify", "false", "true: do not check a rediss:// server's certificate (the only way skip_verify=true in the URL is accepted); anyone on the path can then read the password", false, boolean(func(c *config) *bool { return &c.RedisInsecure })},
	{"REDIS_CA_FILE", "redis-ca-file", "", "PEM file of the CA certificates a rediss:// server's certificate must chain to (default: the system's roots)", false, str(func(c *config) *string { return &c.RedisCAFile })},
	{"SMS_PROVIDER_URL", "provider-url", "", "base URL of the SMS provider", false, str(func(c *config) *string { return &c.ProviderURL })},
	{"SMS_PROVIDER_TOKEN", "provider-token", "", "bearer token of the SMS provider (secret)", true, str(func(c *config) *string { return &c.ProviderToken })},
	{"SMS_PROVIDER_TOKEN_FILE", "provider-token-file", "", "file holding the provider's bearer token, such as a mounted Secret; a trailing newline is trimmed (instead of SMS_PROVIDER_TOKEN)", false, str(func(c *config) *string { return &c.ProviderTokenFile })},
	{"SMS_PROVIDER", "provider", "generic", "the provider's API: generic, twilio or vonage", false, str(func(c *config) *string { return &c.Provider })},
	{"TWILIO_ACCOUNT_SID", "twilio-account-sid", "", "Twilio account SID (AC...)", false, str(func(c *config) *string { return &c.TwilioAccountSID })},
	{"TWILIO_AUTH_TOKEN", "twilio-auth-token", "", "Twilio auth token (secret)", true, str(func(c *config) *string { return &c.TwilioAuthToken })},
	{"TWILIO_AUTH_TOKEN_FILE", "twilio-auth-token-file", "", "file holding the Twilio auth token, read again when it changes (instead of TWILIO_AUTH_TOKEN)", false, str(func(c *config) *string { return &c.TwilioAuthTokenFile })},
	{"TWILIO_FROM", "twilio-from", "", "sender number or id (or TWILIO_MESSAGING_SERVICE_SID)", false, str(func(c *config) *string { return &c.TwilioFrom })},
	{"TWILIO_MESSAGING_SERVICE_SID", "twilio-messaging-service-sid", "", "Twilio Messaging Service SID (MG...), instead of TWILIO_FROM", false, str(func(c *config) *string { return &c.TwilioServiceSID })},
	{"TWILIO_API_URL", "twilio-api-url", "https://api.twilio.com", "base URL of Twilio's REST API", false, str(func(c *config) *string { return &c.TwilioAPIURL })},
	{"VONAGE_API_KEY", "vonage-api-key", "", "Vonage API key", false, str(func(c *config) *string { return &c.VonageAPIKey })},
	{"VONAGE_API_SECRET", "vonage-api-secret", "", "Vonage API secret (secret)", true, str(func(c *config) *string { return &c.VonageAPISecret })},
	{"VONAGE_API_SECRET_FILE", "vonage-api-secret-file", "", "file holding the Vonage API secret, read again when it changes (instead of VONAGE_API_SECRET)", false, str(func(c *config) *string { return &c.VonageAPISecretFile })},
	{"VONAGE_FROM", "vonage-from", "", "Vonage sender id or number", false, str(func(c *config) *string { return &c.VonageFrom })},
	{"VONAGE_API_URL", "vonage-api-url", "https://rest.nexmo.com", "base URL of Vonage's SMS API", false, str(func(c *config) *string { return &c.VonageAPIURL })},
	{"RATE_UNIT", "rate-unit", "", "what every rate counts: message, or segment (as Twilio counts); default segment with SMS_PROVIDER twilio or vonage, message otherwise", false, str(func(c *config) *string { return &c.RateUnit })},
	{"MAX_SEGMENTS", "max-segments", "", "with RATE_UNIT=segment, the most segments a body may have (longer ones are dead-lettered); default 6, or fewer when the rates leave less room under CONTRACT_RPS", false, optionalInteger(func(c *config) *int { return &c.MaxSegments })},
	{"ACCOUNT_PAUSE", "account-pause", "1m", "how long every pod stops sending after the provider refuses the account (credentials, suspension, credit); a changed credential file ends it earlier", false, duration(func(c *config) *time.Duration { return &c.AccountPause })},
	{"MAX_RETRY_AFTER", "max-retry-after", "5m", "the longest one 429 stops every pod: a longer Retry-After counts as this (1s to 24h); dispatcher override --clear-penalty ends a penalty earlier", false, duration(func(c *config) *time.Duration { return &c.MaxRetryAfter })},
	{"ACCOUNTS_FILE", "accounts-file", "", "YAML file of the provider accounts (docs/operating.md, \"Accounts\"); replaces SMS_ACCOUNT, SMS_PROVIDER and the provider's settings, the rates, BURST, RATE_UNIT, MAX_SEGMENTS and PROVIDER_MAX_INFLIGHT", false, str(func(c *config) *string { return &c.AccountsFile })},
	{"SMS_ACCOUNT", "account", "default", "provider account name; keys in Redis are {sms:<account>}:*", false, str(func(c *config) *string { return &c.Account })},
	{"CONTRACT_RPS", "contract-rps", "100", "the provider contract, messages per second", false, num(func(c *config) *float64 { return &c.ContractRPS })},
	{"TARGET_RPS", "target-rps", "90", "what all processes together may send, every class", false, num(func(c *config) *float64 { return &c.TargetRPS })},
	{"MARKETING_RPS", "marketing-rps", "70", "what marketing may use of TARGET_RPS", false, num(func(c *config) *float64 { return &c.MarketingRPS })},
	{"BURST", "burst", "5", "messages that may go at once after a quiet spell", false, integer(func(c *config) *int { return &c.Burst })},
	{"PROVIDER_ARRIVAL_JITTER", "provider-arrival-jitter", "20ms", "spread of the time from admission to arrival at the provider (scheduling, network) that the start-up rate check allows for; 0 to 1s", false, anyDuration(func(c *config) *time.Duration { return &c.ArrivalJitter })},
	{"MAX_SENDERS", "max-senders", "23", "most processes that can ever send on the account at once", false, integer(func(c *config) *int { return &c.MaxSenders })},
	{"OTP_MAX_WAIT", "otp-max-wait", "1s", "how long an OTP may wait for a send slot before it is nacked", false, duration(func(c *config) *time.Duration { return &c.OTPMaxWait })},
	{"MARKETING_MAX_WAIT", "marketing-max-wait", "8s", "how long a marketing message may wait for a send slot", false, duration(func(c *config) *time.Duration { return &c.MarketingMaxWait })},
	{"PROVIDER_MAX_INFLIGHT", "provider-max-inflight", "0", "most sends in flight on the account across all pods (the provider's simultaneous connections); 0: no limit", false, integer(func(c *config) *int { return &c.MaxInFlight })},
	{"REDIS_TIMEOUT", "redis-timeout", "100ms", "bound of one limiter call; slower counts as Redis down (fallback)", false, duration(func(c *config) *time.Duration { return &c.RedisTimeout })},
	{"SEND_TIMEOUT", "send-timeout", "10s", "bound of one provider call", false, duration(func(c *config) *time.Duration { return &c.SendTimeout })},
	{"SHUTDOWN_GRACE", "shutdown-grace", "10s", "how long sends in flight may finish after SIGTERM", false, duration(func(c *config) *time.Duration { return &c.ShutdownGrace })},
	{"HTTP_ADDR", "http-addr", ":8080", "address of /metrics, /healthz and /readyz", false, str(func(c *config) *string { return &c.HTTPAddr })},
}

// perAccount are the settings an ACCOUNTS_FILE sets per account.
var perAccount = map[string]bool{
	"SMS_ACCOUNT": true, "SMS_PROVIDER": true, "SMS_PROVIDER_URL": true, "SMS_PROVIDER_TOKEN": true, "SMS_PROVIDER_TOKEN_FILE": true,
	"TWILIO_ACCOUNT_SID": true, "TWILIO_AUTH_TOKEN": true, "TWILIO_AUTH_TOKEN_FILE": true, "TWILIO_FROM": true,
	"TWILIO_MESSAGING_SERVICE_SID": true, "TWILIO_API_URL": true, "VONAGE_API_KEY": true, "VONAGE_API_SECRET": true,
	"VONAGE_API_SECRET_FILE": true, "VONAGE_FROM": true, "VONAGE_API_URL": true, "RATE_UNIT": true, "MAX_SEGMENTS": true,
	"CONTRACT_RPS": true, "TARGET_RPS": true, "MARKETING_RPS": true, "BURST": true, "PROVIDER_MAX_INFLIGHT": true,
}

// configFlags registers every setting on fs. The returned function parses
// and validates once fs.Parse has run: a flag given wins over the variable,
// which wins over the default.
func configFlags(fs *flag.FlagSet, getenv func(string) string) func() (config, error) {
	given := map[string]*string{}
	for _, s := range settings {
		def := s.def
		if s.secret {
			def = "" // never print a secret's value in -help
		}
		given[s.flag] = fs.String(s.flag, def, s.usage+" ["+s.env+"]")
	}
	return func() (config, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		explicit := map[string]bool{} // by variable: given as a flag or in the environment
		var c config
		for _, s := range settings {
			explicit[s.env] = getenv(s.env) != "" || set[s.flag]
			v := s.def
			if e := getenv(s.env); e != "" {
				v = e
			} else if s.env == "PUBSUB_PROJECT_ID" && getenv("GOOGLE_CLOUD_PROJECT") != "" {
				v = getenv("GOOGLE_CLOUD_PROJECT")
			}
			if set[s.flag] {
				v = *given[s.flag]
			}
			if err := s.parse(&c, strings.TrimSpace(v)); err != nil {
				return config{}, &configError{s.env, s.flag, err.Error()}
			}
		}
		if c.AccountsFile != "" {
			// The file replaces these: one given as well is a mistake
			// (which would win?), said before anything else.
			for _, s := range settings {
				if perAccount[s.env] && explicit[s.env] {
					return config{}, &configError{s.env, s.flag, "not used with ACCOUNTS_FILE: set it on the account in the file"}
				}
			}
		}
		c.dependentDefaults(explicit["RATE_UNIT"], explicit["MAX_SEGMENTS"])
		if err := c.readRedisURLFile(); err != nil {
			return config{}, err
		}
		if err := c.validate(); err != nil {
			return c, err
		}
		return c, c.readFiles()
	}
}

// readRedisURLFile reads REDIS_URL_FILE into RedisURL, before validate
// checks the URL. Its errors name the variable, never the file's content.
func (c *config) readRedisURLFile() error {
	if c.RedisURLFile == "" {
		return nil
	}
	if c.RedisURL != "" {
		return settingError("REDIS_URL_FILE", "set either it or REDIS_URL, not both")
	}
	b, err := readSmall(c.RedisURLFile)
	if err != nil {
		return settingError("REDIS_URL_FILE", err.Error())
	}
	if c.RedisURL = strings.TrimSpace(string(b)); c.RedisURL == "" {
		return settingError("REDIS_URL_FILE", c.RedisURLFile+": empty")
	}
	return nil
}

// redisURLVariable is the variable RedisURL came from, for its errors.
func (c config) redisURLVariable() string {
	if c.RedisURLFile != "" {
		return "REDIS_URL_FILE"
	}
	return "REDIS_URL"
}

// readFiles reads the token and CA files that c names. Its errors name the
// variable and never hold a file's content.
func (c *config) readFiles() error {
	// Files written by echo or an editor end with a newline, which
	// provider.FileSecret trims; a Secret mounted by Kubernetes holds the
	// bytes as they were given. The adapter reads the file again when it
	// changes (newProvider).
	c.fileSecrets = map[string]*provider.Secret{}
	for _, f := range []struct{ env, path string }{
		{"SMS_PROVIDER_TOKEN_FILE", c.ProviderTokenFile},
		{"TWILIO_AUTH_TOKEN_FILE", c.TwilioAuthTokenFile},
		{"VONAGE_API_SECRET_FILE", c.VonageAPISecretFile},
	} {
		if f.path == "" {
			continue
		}
		s, err := provider.FileSecret(f.path)
		if err != nil {
			return settingError(f.env, err.Error())
		}
		c.fileSecrets[f.env] = s
	}
	if s := c.fileSecrets["SMS_PROVIDER_TOKEN_FILE"]; s != nil {
		c.ProviderToken = s.Value()
	}
	if c.RedisCAFile != "" {
		b, err := readSmall(c.RedisCAFile)
		if err != nil {
			return &configError{"REDIS_CA_FILE", "redis-ca-file", err.Error()}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return &configError{"REDIS_CA_FILE", "redis-ca-file", "no PEM certificate in the file"}
		}
		c.RedisCA = b
	}
	return nil
}

// readSmall reads a file of at most maxFileSize bytes. Its errors say what
// went wrong with the path (os errors name it), never what the file holds.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileSize)
	}
	return b, nil
}

// validate reports the first value that cannot work.
func (c config) validate() error {
	bad := func(env, format string, args ...any) error {
		for _, s := range settings {
			if s.env == env {
				return &configError{env, s.flag, fmt.Sprintf(format, args...)}
			}
		}
		panic("validate: unknown setting " + env)
	}
	for env, v := range map[string]float64{"CONTRACT_RPS": c.ContractRPS, "TARGET_RPS": c.TargetRPS, "MARKETING_RPS": c.MarketingRPS} {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return bad(env, "must be a finite number, got %v", v)
		}
	}
	switch {
	case !(c.ContractRPS > 0):
		return bad("CONTRACT_RPS", "must be above 0, got %v", c.ContractRPS)
	case c.ContractRPS > maxRPS:
		return bad("CONTRACT_RPS", "must be at most %v (the limiter counts in microseconds), got %v", maxRPS, c.ContractRPS)
	case !(c.TargetRPS >= admission.MinRPS):
		return bad("TARGET_RPS", "must be at least %v, got %v", admission.MinRPS, c.TargetRPS)
	case c.TargetRPS > c.ContractRPS:
		return bad("TARGET_RPS", "%v is above CONTRACT_RPS (%v): the dispatcher would break the contract", c.TargetRPS, c.ContractRPS)
	case !(c.MarketingRPS >= admission.MinRPS):
		return bad("MARKETING_RPS", "must be at least %v, got %v", admission.MinRPS, c.MarketingRPS)
	case c.MarketingRPS > c.TargetRPS:
		return bad("MARKETING_RPS", "%v is above TARGET_RPS (%v): OTP would have no room", c.MarketingRPS, c.TargetRPS)
	case c.Burst < 1:
		return bad("BURST", "must be at least 1, got %d", c.Burst)
	case c.Burst > maxBurst:
		return bad("BURST", "must be at most %d, got %d", maxBurst, c.Burst)
	case c.DeadLetterRetention < minRetention || c.DeadLetterRetention > maxRetention:
		return bad("DEAD_LETTER_RETENTION", "must be %v to %v (what Pub/Sub allows a subscription), got %v", minRetention, maxRetention, c.DeadLetterRetention)
	case c.ArrivalJitter < 0 || c.ArrivalJitter > maxArrivalJitter:
		return bad("PROVIDER_ARRIVAL_JITTER", "must be 0 to %v, got %v", maxArrivalJitter, c.ArrivalJitter)
	case c.reach(0) > c.ContractRPS:
		// Admissions within any W+J seconds may reach the provider within
		// W: a provider counting a sliding window of W seconds sees at
		// most TARGET_RPS×(W + J) + BURST; over one second, that must fit
		// the contract.
		return bad("TARGET_RPS", "TARGET_RPS (%v) × (1s + PROVIDER_ARRIVAL_JITTER (%v)) + BURST (%d) = %.4g messages could reach the provider within one second, above CONTRACT_RPS (%v): lower TARGET_RPS, BURST or PROVIDER_ARRIVAL_JITTER",
			c.TargetRPS, c.ArrivalJitter, c.Burst, c.reach(0), c.ContractRPS)
	case c.MaxRetryAfter < time.Second:
		// Below the 1 s a 429 without a Retry-After stops the account.
		return bad("MAX_RETRY_AFTER", "must be at least 1s, got %v", c.MaxRetryAfter)
	case c.MaxSenders < 1:
		return bad("MAX_SENDERS", "must be at least 1, got %d", c.MaxSenders)
	case c.MaxSenders > maxSenders:
		return bad("MAX_SENDERS", "must be at most %d, got %d", maxSenders, c.MaxSenders)
	case c.ProviderToken != "" && c.ProviderTokenFile != "":
		return bad("SMS_PROVIDER_TOKEN_FILE", "set either it or SMS_PROVIDER_TOKEN, not both")
	case c.TwilioAuthToken != "" && c.TwilioAuthTokenFile != "":
		return bad("TWILIO_AUTH_TOKEN_FILE", "set either it or TWILIO_AUTH_TOKEN, not both")
	case c.TwilioFrom != "" && c.TwilioServiceSID != "":
		return bad("TWILIO_MESSAGING_SERVICE_SID", "set either it or TWILIO_FROM, not both")
	case c.VonageAPISecret != "" && c.VonageAPISecretFile != "":
		return bad("VONAGE_API_SECRET_FILE", "set either it or VONAGE_API_SECRET, not both")
	case c.Provider != "generic" && c.Provider != "twilio" && c.Provider != "vonage":
		return bad("SMS_PROVIDER", "want generic, twilio or vonage, got %q", c.Provider)
	case c.RateUnit != "message" && c.RateUnit != "segment":
		return bad("RATE_UNIT", "want message or segment, got %q", c.RateUnit)
	case c.MaxSegments < 1 || c.MaxSegments > maxSegments:
		return bad("MAX_SEGMENTS", "must be 1-%d, got %d", maxSegments, c.MaxSegments)
	case c.RateUnit == "segment" && c.reach(c.MaxSegments-1) > c.ContractRPS:
		// Any window of W seconds sees at most TARGET_RPS×(W + J) + BURST
		// - 1 + the longest message's segments: over one second, that
		// must fit the contract.
		return bad("MAX_SEGMENTS", "TARGET_RPS (%v) × (1s + PROVIDER_ARRIVAL_JITTER (%v)) + BURST (%d) + MAX_SEGMENTS (%d) - 1 = %.4g segments could reach the provider within one second, above CONTRACT_RPS (%v): lower TARGET_RPS, BURST, MAX_SEGMENTS or PROVIDER_ARRIVAL_JITTER",
			c.TargetRPS, c.ArrivalJitter, c.Burst, c.MaxSegments, c.reach(c.MaxSegments-1), c.ContractRPS)
	case !validAccount(c.Account):
		return bad("SMS_ACCOUNT", "must be non-empty printable ASCII without braces or spaces, got %q", c.Account)
	}
	for _, u := range []struct{ env, url string }{
		{"SMS_PROVIDER_URL", c.ProviderURL}, {"TWILIO_API_URL", c.TwilioAPIURL}, {"VONAGE_API_URL", c.VonageAPIURL},
	} {
		if u.url == "" {
			continue
		}
		if err := checkURL(u.url, "http", "https"); err != nil {
			return bad(u.env, "%v", err)
		}
	}
	if c.RedisURL != "" {
		o, err := redisconn.Options(c.RedisURL)
		env := c.redisURLVariable()
		switch {
		case err != nil:
			return bad(env, "%v", err) // the message never holds the URL: it may carry a password
		case c.RedisCAFile != "" && o.TLSConfig == nil:
			return bad("REDIS_CA_FILE", "applies to TLS only, and %s is not a rediss:// URL", env)
		case c.RedisInsecure && o.TLSConfig == nil:
			return bad("REDIS_INSECURE_SKIP_VERIFY", "applies to TLS only, and %s is not a rediss:// URL", env)
		case c.RedisInsecure && c.RedisCAFile != "":
			return bad("REDIS_INSECURE_SKIP_VERIFY", "set either it or REDIS_CA_FILE, not both: a CA file is for checking the certificate")
		case o.TLSConfig != nil && o.TLSConfig.InsecureSkipVerify && !c.RedisInsecure:
			return bad(env, "skip_verify=true turns off the check of the server's certificate, and anyone on the path could read the password and the limiter's state: give the server's CA in REDIS_CA_FILE, or set REDIS_INSECURE_SKIP_VERIFY=true to accept it")
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
func (c *config) dependentDefaults(rateUnitGiven, maxSegmentsGiven bool) {
	if !rateUnitGiven {
		c.RateUnit = defaultRateUnit(c.Provider)
	}
	if !maxSegmentsGiven {
		c.MaxSegments = defaultMaxSegments
		if c.RateUnit == "segment" {
			c.MaxSegments = c.fittingSegments()
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
// most segments, at least 1, for which the segment check of validate holds
// (at the default rates, 4: 90 × 1.02 + 5 + 4 - 1 = 99.8). Rates that
// leave no room for one segment fail validate's message check first.
func (c config) fittingSegments() int {
	n := defaultMaxSegments
	for n > 1 && c.reach(n-1) > c.ContractRPS {
		n--
	}
	return n
}

// reach is the most units a provider counting a sliding window of one
// second can see: TARGET_RPS × (1 s + PROVIDER_ARRIVAL_JITTER) + BURST +
// extra (the longest message's segments beyond its first, with rates in
// segments). The jitter's share is added apart so that a product such as
// 50 × 1.02 does not round above 51.
func (c config) reach(extra int) float64 {
	return c.TargetRPS + c.TargetRPS*c.ArrivalJitter.Seconds() + float64(c.Burst) + float64(extra)
}

// validAccount reports whether account can go in a Redis hash tag
// {sms:<account>} as admission requires.
func validAccount(account string) bool {
	for i := 0; i < len(account); i++ {
		if b := account[i]; b < 0x21 || b > 0x7e || b == '{' || b == '}' {
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

// environ is os.Getenv, replaced in tests.
var environ = os.Getenv
