package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A Group is a set of settings that commands read together; a command
// registers the flags of its groups only.
type Group uint16

const (
	Pubsub        Group = 1 << iota // the Google Cloud project
	Topics                          // the topics producers publish to
	Subscriptions                   // the dispatcher's two subscriptions and the dead letters' inspect subscription
	DeadLetters                     // the dead-letter topic and how long the inspect subscription keeps a letter
	Redis                           // the limiter's Redis
	Accounts                        // the accounts, their provider and rates, and the limiter's settings
	Credentials                     // the provider's URLs and credentials, which only a sender reads
	Waits                           // the classes' waits and the send timeout (which size the ack deadline)
	Serving                         // what only a serving process reads: the pause, the grace, the HTTP address
	All           = Pubsub | Topics | Subscriptions | DeadLetters | Redis | Accounts | Credentials | Waits | Serving
)

// setting is one row of the configuration table.
type setting struct {
	env, flag string
	// key is the setting's key in an account of ACCOUNTS_FILE; "" for a
	// setting of the process.
	key, def, usage string
	secret          bool
	groups          Group // the commands that read it
	// field is the name admission.Config's or the adapter's errors give
	// the value, so that they can be said in the setting's own name.
	field string
	parse func(s *Settings, v string) error
}

func str(dst func(*Settings) *string) func(*Settings, string) error {
	return func(s *Settings, v string) error { *dst(s) = v; return nil }
}

func num(dst func(*Settings) *float64) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", v)
		}
		*dst(s) = f
		return nil
	}
}

func integer(dst func(*Settings) *int) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want an integer, got %q", v)
		}
		*dst(s) = n
		return nil
	}
}

func boolean(dst func(*Settings) *bool) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		switch v {
		case "true":
			*dst(s) = true
		case "false":
			*dst(s) = false
		default:
			return fmt.Errorf("want true or false, got %q", v)
		}
		return nil
	}
}

// optionalInteger is integer for a setting whose default is computed
// (dependentDefaults): "" leaves 0 until then.
func optionalInteger(dst func(*Settings) *int) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		if v == "" {
			*dst(s) = 0
			return nil
		}
		return integer(dst)(s, v)
	}
}

func duration(dst func(*Settings) *time.Duration) func(*Settings, string) error {
	return func(s *Settings, v string) error {
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
		*dst(s) = d
		return nil
	}
}

// anyDuration parses a duration and leaves its range to validate, for a
// setting where 0 means something (PROVIDER_ARRIVAL_JITTER).
func anyDuration(dst func(*Settings) *time.Duration) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 20ms, got %q", v)
		}
		*dst(s) = d
		return nil
	}
}

var settings = []setting{
	{"PUBSUB_PROJECT_ID", "project", "", "local", "Google Cloud project of the topics (GOOGLE_CLOUD_PROJECT is read too)", false, Pubsub, "", str(func(s *Settings) *string { return &s.ProjectID })},
	{"OTP_TOPIC", "otp-topic", "", "sms-otp", "topic producers publish OTP to", false, Topics, "", str(func(s *Settings) *string { return &s.OTPTopic })},
	{"MARKETING_TOPIC", "marketing-topic", "", "sms-marketing", "topic producers publish marketing to", false, Topics, "", str(func(s *Settings) *string { return &s.MarketingTopic })},
	{"OTP_SUBSCRIPTION", "otp-subscription", "", "sms-otp-dispatcher", "subscription the dispatcher pulls OTP from", false, Subscriptions, "", str(func(s *Settings) *string { return &s.OTPSubscription })},
	{"MARKETING_SUBSCRIPTION", "marketing-subscription", "", "sms-marketing-dispatcher", "subscription the dispatcher pulls marketing from", false, Subscriptions, "", str(func(s *Settings) *string { return &s.MarketingSubscription })},
	{"DEAD_LETTER_TOPIC", "dead-letter-topic", "", "sms-dead-letter", "topic of messages that will never be sent", false, DeadLetters, "", str(func(s *Settings) *string { return &s.DeadLetterTopic })},
	{"DEAD_LETTER_SUBSCRIPTION", "dead-letter-subscription", "", "sms-dead-letter-inspect", "subscription for people to read dead letters", false, Subscriptions, "", str(func(s *Settings) *string { return &s.DeadLetterInspect })},
	{"DEAD_LETTER_RETENTION", "dead-letter-retention", "", "168h", "how long the dead-letter subscription keeps a dead letter (it holds numbers and bodies: codes), set by setup; 10m to 168h", false, DeadLetters, "", anyDuration(func(s *Settings) *time.Duration { return &s.DeadLetterRetention })},
	{"REDIS_URL", "redis-url", "", "", "redis:// or rediss:// URL; redis+cluster:// or a comma list of host:port for Redis Cluster", true, Redis, "", str(func(s *Settings) *string { return &s.RedisURL })},
	{"REDIS_URL_FILE", "redis-url-file", "", "", "file holding REDIS_URL, such as a mounted Secret; surrounding spaces and newlines are trimmed (instead of REDIS_URL)", false, Redis, "", str(func(s *Settings) *string { return &s.RedisURLFile })},
	{"REDIS_INSECURE_SKIP_VERIFY", "redis-insecure-skip-verify", "", "false", "true: do not check a rediss:// server's certificate (the only way skip_verify=true in the URL is accepted); anyone on the path can then read the password", false, Redis, "", boolean(func(s *Settings) *bool { return &s.RedisInsecure })},
	{"REDIS_CA_FILE", "redis-ca-file", "", "", "PEM file of the CA certificates a rediss:// server's certificate must chain to (default: the system's roots)", false, Redis, "", str(func(s *Settings) *string { return &s.RedisCAFile })},
	{"SMS_PROVIDER_URL", "provider-url", "generic.url", "", "base URL of the SMS provider", false, Credentials, "", str(func(s *Settings) *string { return &s.ProviderURL })},
	{"SMS_PROVIDER_TOKEN", "provider-token", "generic.token", "", "bearer token of the SMS provider (secret)", true, Credentials, "", str(func(s *Settings) *string { return &s.ProviderToken })},
	{"SMS_PROVIDER_TOKEN_FILE", "provider-token-file", "generic.token_file", "", "file holding the provider's bearer token, such as a mounted Secret; a trailing newline is trimmed (instead of SMS_PROVIDER_TOKEN)", false, Credentials, "", str(func(s *Settings) *string { return &s.ProviderTokenFile })},
	{"SMS_RECEIPT_SECRET_FILE", "receipt-secret-file", "generic.receipt_secret_file", "", "file holding the key of the generic API's receipt signature (X-Signature), read again when it changes; required with RECEIPTS_ADDR", false, Credentials, "", str(func(s *Settings) *string { return &s.ReceiptSecretFile })},
	{"SMS_PROVIDER", "provider", "provider", "generic", "the provider's API: generic, twilio or vonage", false, Accounts, "", str(func(s *Settings) *string { return &s.Provider })},
	{"TWILIO_ACCOUNT_SID", "twilio-account-sid", "twilio.account_sid", "", "Twilio account SID (AC...)", false, Credentials, "TwilioConfig.AccountSID", str(func(s *Settings) *string { return &s.TwilioAccountSID })},
	{"TWILIO_AUTH_TOKEN", "twilio-auth-token", "twilio.auth_token", "", "Twilio auth token (secret)", true, Credentials, "TwilioConfig.AuthToken", str(func(s *Settings) *string { return &s.TwilioAuthToken })},
	{"TWILIO_AUTH_TOKEN_FILE", "twilio-auth-token-file", "twilio.auth_token_file", "", "file holding the Twilio auth token, read again when it changes (instead of TWILIO_AUTH_TOKEN)", false, Credentials, "", str(func(s *Settings) *string { return &s.TwilioAuthTokenFile })},
	{"TWILIO_FROM", "twilio-from", "twilio.from", "", "sender number or id (or TWILIO_MESSAGING_SERVICE_SID)", false, Credentials, "", str(func(s *Settings) *string { return &s.TwilioFrom })},
	{"TWILIO_MESSAGING_SERVICE_SID", "twilio-messaging-service-sid", "twilio.messaging_service_sid", "", "Twilio Messaging Service SID (MG...), instead of TWILIO_FROM", false, Credentials, "MessagingServiceSID", str(func(s *Settings) *string { return &s.TwilioServiceSID })},
	{"TWILIO_API_URL", "twilio-api-url", "twilio.api_url", "https://api.twilio.com", "base URL of Twilio's REST API", false, Credentials, "TwilioConfig.BaseURL", str(func(s *Settings) *string { return &s.TwilioAPIURL })},
	{"VONAGE_API_KEY", "vonage-api-key", "vonage.api_key", "", "Vonage API key", false, Credentials, "vonage: APIKey", str(func(s *Settings) *string { return &s.VonageAPIKey })},
	{"VONAGE_API_SECRET", "vonage-api-secret", "vonage.api_secret", "", "Vonage API secret (secret)", true, Credentials, "vonage: APISecret", str(func(s *Settings) *string { return &s.VonageAPISecret })},
	{"VONAGE_API_SECRET_FILE", "vonage-api-secret-file", "vonage.api_secret_file", "", "file holding the Vonage API secret, read again when it changes (instead of VONAGE_API_SECRET)", false, Credentials, "", str(func(s *Settings) *string { return &s.VonageAPISecretFile })},
	{"VONAGE_FROM", "vonage-from", "vonage.from", "", "Vonage sender id or number", false, Credentials, "vonage: From", str(func(s *Settings) *string { return &s.VonageFrom })},
	{"VONAGE_SIGNATURE_SECRET_FILE", "vonage-signature-secret-file", "vonage.signature_secret_file", "", "file holding the secret Vonage signs delivery receipts with (the account's signature secret), read again when it changes; required with RECEIPTS_ADDR", false, Credentials, "", str(func(s *Settings) *string { return &s.VonageSignatureSecretFile })},
	{"VONAGE_SIGNATURE_METHOD", "vonage-signature-method", "vonage.signature_method", "md5hash", "how Vonage signs delivery receipts, as set on the account: md5hash, md5, sha1, sha256 or sha512", false, Credentials, "SignatureMethod", str(func(s *Settings) *string { return &s.VonageSignatureMethod })},
	{"VONAGE_API_URL", "vonage-api-url", "vonage.api_url", "https://rest.nexmo.com", "base URL of Vonage's SMS API", false, Credentials, "vonage BaseURL", str(func(s *Settings) *string { return &s.VonageAPIURL })},
	{"RATE_UNIT", "rate-unit", "rate_unit", "", "what every rate counts: message, or segment (as Twilio counts); default segment with SMS_PROVIDER twilio or vonage, message otherwise", false, Accounts, "", str(func(s *Settings) *string { return &s.RateUnit })},
	{"MAX_SEGMENTS", "max-segments", "max_segments", "", "with RATE_UNIT=segment, the most segments a body may have (longer ones are dead-lettered); default 6, or fewer when the rates leave less room under CONTRACT_RPS", false, Accounts, "MaxCost", optionalInteger(func(s *Settings) *int { return &s.MaxSegments })},
	{"ACCOUNT_PAUSE", "account-pause", "", "1m", "how long every pod stops sending after the provider refuses the account (credentials, suspension, credit); a changed credential file ends it earlier", false, Serving, "", duration(func(s *Settings) *time.Duration { return &s.AccountPause })},
	{"MAX_RETRY_AFTER", "max-retry-after", "", "5m", "the longest one 429 stops every pod: a longer Retry-After counts as this (1s to 24h); dispatcher override --clear-penalty ends a penalty earlier", false, Accounts, "", duration(func(s *Settings) *time.Duration { return &s.MaxRetryAfter })},
	{"ACCOUNTS_FILE", "accounts-file", "", "", "YAML file of the provider accounts (docs/configuring.md, \"Accounts\"); replaces SMS_ACCOUNT, SMS_PROVIDER and the provider's settings, the rates, BURST, RATE_UNIT, MAX_SEGMENTS and PROVIDER_MAX_INFLIGHT", false, Accounts, "", str(func(s *Settings) *string { return &s.AccountsFile })},
	{"SMS_ACCOUNT", "account", "name", "default", "provider account name; keys in Redis are {sms:<account>}:*", false, Accounts, "Account", str(func(s *Settings) *string { return &s.Name })},
	{"CONTRACT_RPS", "contract-rps", "contract_rps", "100", "the provider contract, messages per second", false, Accounts, "", num(func(s *Settings) *float64 { return &s.ContractRPS })},
	{"TARGET_RPS", "target-rps", "target_rps", "90", "what all processes together may send, every class", false, Accounts, "TargetRPS", num(func(s *Settings) *float64 { return &s.TargetRPS })},
	{"MARKETING_RPS", "marketing-rps", "class_rps.marketing", "70", "what marketing may use of TARGET_RPS", false, Accounts, "MarketingRPS", num(func(s *Settings) *float64 { return &s.MarketingRPS })},
	{"MIN_DELIVERED_RATIO", "min-delivered-ratio", "min_delivered_ratio", "0.5", "with receipts: the share of the account's OTP to one country code that must be delivered, of those delivered or failed for the route (judged on the last 20 s, once route failures went to at least 10 numbers); under it the account is skipped for OTP to that country until a probe is delivered, unless it is the last account of the route; 0 turns it off", false, Accounts, "", num(func(s *Settings) *float64 { return &s.MinDeliveredRatio })},
	{"BURST", "burst", "burst", "5", "messages that may go at once after a quiet spell", false, Accounts, "Burst", integer(func(s *Settings) *int { return &s.Burst })},
	{"PROVIDER_ARRIVAL_JITTER", "provider-arrival-jitter", "", "20ms", "spread of the time from admission to arrival at the provider (scheduling, network) that the start-up rate check allows for; 0 to 1s", false, Accounts, "ArrivalJitter", anyDuration(func(s *Settings) *time.Duration { return &s.ArrivalJitter })},
	{"MAX_SENDERS", "max-senders", "", "23", "most processes that can ever send on the account at once", false, Accounts, "MaxSenders", integer(func(s *Settings) *int { return &s.MaxSenders })},
	{"OTP_MAX_WAIT", "otp-max-wait", "", "1s", "how long an OTP may wait for a send slot before it is nacked", false, Waits, "", duration(func(s *Settings) *time.Duration { return &s.OTPMaxWait })},
	{"MARKETING_MAX_WAIT", "marketing-max-wait", "", "8s", "how long a marketing message may wait for a send slot", false, Waits, "", duration(func(s *Settings) *time.Duration { return &s.MarketingMaxWait })},
	{"PROVIDER_MAX_INFLIGHT", "provider-max-inflight", "max_inflight", "0", "most sends in flight on the account across all pods (the provider's simultaneous connections); 0: no limit", false, Accounts, "MaxInFlight", integer(func(s *Settings) *int { return &s.MaxInFlight })},
	{"REDIS_TIMEOUT", "redis-timeout", "", "100ms", "bound of one limiter call; slower counts as Redis down (fallback)", false, Redis | Accounts, "RedisTimeout", duration(func(s *Settings) *time.Duration { return &s.RedisTimeout })},
	{"SEND_TIMEOUT", "send-timeout", "", "10s", "bound of one provider call", false, Accounts | Waits, "", duration(func(s *Settings) *time.Duration { return &s.SendTimeout })},
	{"SHUTDOWN_GRACE", "shutdown-grace", "", "10s", "how long sends in flight may finish after SIGTERM", false, Serving, "", duration(func(s *Settings) *time.Duration { return &s.ShutdownGrace })},
	{"HTTP_ADDR", "http-addr", "", ":8080", "address of /metrics, /healthz and /readyz", false, Serving, "", str(func(s *Settings) *string { return &s.HTTPAddr })},
	{"RECEIPTS_ADDR", "receipts-addr", "", "", "address of the delivery receipts' listener (POST /v1/receipts/<account>), apart from HTTP_ADDR; unset: receipts off", false, Serving, "", str(func(s *Settings) *string { return &s.ReceiptsAddr })},
	{"RECEIPTS_PUBLIC_URL", "receipts-public-url", "", "", "base URL the providers post receipts to, https:// unless the host is loopback; required with RECEIPTS_ADDR", false, Serving, "", baseURL(func(s *Settings) *string { return &s.ReceiptsPublicURL })},
	{"SUPPRESSIONS_TOPIC", "suppressions-topic", "", "sms-suppressions", "topic of every change of the suppression list, the deployment's own record of it (setup creates it with the subscription sms-suppressions-inspect)", false, Topics, "", str(func(s *Settings) *string { return &s.SuppressionsTopic })},
	{"INBOUND_TOPIC", "inbound-topic", "", "sms-inbound", "topic of every message the recipients send to the accounts' numbers, once per provider id (setup creates it with the subscription sms-inbound-inspect)", false, Topics, "", str(func(s *Settings) *string { return &s.InboundTopic })},
	{"STATUS_TOPIC", "status-topic", "", "sms-status", "topic of each message's final delivery state (setup creates it with the subscription sms-status-inspect)", false, Topics, "", str(func(s *Settings) *string { return &s.StatusTopic })},
	{"VERIFICATIONS_TOPIC", "verifications-topic", "", "sms-verifications", "topic applications publish {\"id\"} of each OTP whose code was used to, for the guard's min_conversion (setup creates it with the subscription sms-verifications-dispatcher)", false, Topics, "", str(func(s *Settings) *string { return &s.VerificationsTopic })},
}

// lookup is the row of the variable env.
func lookup(env string) *setting {
	for i := range settings {
		if settings[i].env == env {
			return &settings[i]
		}
	}
	panic("config: unknown setting " + env)
}

// known reports whether env is the variable of a setting.
func known(env string) bool {
	for _, s := range settings {
		if s.env == env {
			return true
		}
	}
	return false
}

// SettingError is the *Error for the variable env, a setting of the
// table.
func SettingError(env, msg string) *Error {
	return &Error{env, lookup(env).flag, msg}
}

// Flags registers the flags of the settings in groups on fs. The returned
// function parses and validates every setting once fs.Parse has run: a
// flag given wins over the variable, which wins over the default. A
// setting outside groups is read from its variable as well, so that one
// environment is judged alike by every command. Errors are *Error.
func Flags(fs *flag.FlagSet, groups Group, getenv func(string) string) func() (Settings, error) {
	given := map[string]*string{}
	for _, s := range settings {
		if s.groups&groups == 0 {
			continue
		}
		def := s.def
		if s.secret {
			def = "" // never print a secret's value in -help
		}
		given[s.flag] = fs.String(s.flag, def, s.usage+" ["+s.env+"]")
	}
	return func() (Settings, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		explicit := map[string]bool{} // by variable: given as a flag or in the environment
		var c Settings
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
				return Settings{}, &Error{s.env, s.flag, err.Error()}
			}
		}
		if c.AccountsFile != "" {
			// The file replaces these: one given as well is a mistake
			// (which would win?), said before anything else.
			for _, s := range settings {
				if s.key != "" && explicit[s.env] {
					return Settings{}, &Error{s.env, s.flag, "not used with ACCOUNTS_FILE: set it on the account in the file"}
				}
			}
		}
		c.Classes = bothClasses()
		c.dependentDefaults(explicit["RATE_UNIT"], explicit["MAX_SEGMENTS"], c.Process)
		if err := c.readRedisURLFile(); err != nil {
			return Settings{}, err
		}
		if err := c.validate(); err != nil {
			return c, err
		}
		if err := c.readFiles(); err != nil {
			return c, err
		}
		// The classes name the topics and subscriptions: a command that
		// reads those reads ACCOUNTS_FILE's classes too.
		if c.AccountsFile != "" && groups&(Topics|Subscriptions) != 0 {
			lanes, err := LoadClasses(c.Process, c.AccountsFile)
			if err != nil {
				return c, err
			}
			c.Lanes = lanes
		}
		return c, nil
	}
}

// A problem is a value that cannot work: the variable it comes from (its
// row) and why.
type problem struct {
	env, msg string
}

func (p *problem) Error() string { return p.env + ": " + p.msg }

// badf is the problem of the variable env.
func badf(env, format string, args ...any) *problem {
	return &problem{env, fmt.Sprintf(format, args...)}
}

// names says a setting in an account's errors: by its variable
// (variables) or, for an account of ACCOUNTS_FILE, by its key (keys).
type names func(env string) string

func variables(env string) string { return env }

func keys(env string) string {
	if k := lookup(env).key; k != "" {
		return k
	}
	return env // a setting of the process
}

// asError is the *Error of a problem of the environment.
func asError(err error) error {
	if p, ok := err.(*problem); ok {
		return SettingError(p.env, p.msg)
	}
	return err
}
