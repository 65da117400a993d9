package config

import (
	"fmt"
	"slices"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
	"smsdispatcher/provider"
)

// Process holds the settings of the whole process (docs/contract.md
// section 4): Pub/Sub's names, Redis, the waits and timeouts, the HTTP
// address. Every account shares them.
type Process struct {
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
	AccountPause          time.Duration
	MaxRetryAfter         time.Duration // the longest one 429 stops the account
	ArrivalJitter         time.Duration // spread of admission-to-arrival time the start-up check allows for
	MaxSenders            int
	OTPMaxWait            time.Duration
	MarketingMaxWait      time.Duration
	SendTimeout           time.Duration
	RedisTimeout          time.Duration
	ShutdownGrace         time.Duration
	HTTPAddr              string
	AccountsFile          string // YAML of several accounts, replacing the single-account settings
	// ReceiptsAddr is the delivery receipts' listener; "": receipts off.
	ReceiptsAddr string
	// ReceiptsPublicURL is the base URL providers post receipts to, with
	// no trailing slash; set exactly when ReceiptsAddr is.
	ReceiptsPublicURL string
	StatusTopic       string // the topic of the messages' final delivery states
	SuppressionsTopic string // the topic of every change of the suppression list
	InboundTopic      string // the topic of every message the recipients send
	// VerificationsTopic is where applications say which OTPs' codes
	// were used (the guard's min_conversion).
	VerificationsTopic string
	// Lanes are ACCOUNTS_FILE's classes in priority order; empty: otp and
	// marketing of the variables (ClassList).
	Lanes []Class
}

// A Class is one class of the process's, in priority order: its name, the
// topic producers publish it to, the subscription the dispatcher pulls it
// from and how long a message of it may wait for a send slot.
type Class struct {
	Name         admission.Class
	Topic        string
	Subscription string
	MaxWait      time.Duration
	// Unsuppressed: the file's suppression: false, for messages the
	// recipient asked for this minute; the list does not stop them
	// (docs/suppressions.md).
	Unsuppressed bool
	// Sending is the class's send windows and cap (send_hours,
	// max_per_recipient...), the zero value when it has none.
	Sending policy.Sending
	// Guard is the class's pumping guard, its keys of ACCOUNTS_FILE
	// (countries, max_per_prefix...); nil: none.
	Guard *policy.Guard
}

// ClassList returns p's classes in priority order: Lanes, or otp
// (OTP_TOPIC, OTP_SUBSCRIPTION, OTP_MAX_WAIT) then marketing (MARKETING_*).
func (p Process) ClassList() []Class {
	if len(p.Lanes) > 0 {
		return p.Lanes
	}
	return []Class{
		{Name: admission.OTP, Topic: p.OTPTopic, Subscription: p.OTPSubscription, MaxWait: p.OTPMaxWait},
		{Name: admission.Marketing, Topic: p.MarketingTopic, Subscription: p.MarketingSubscription, MaxWait: p.MarketingMaxWait},
	}
}

// Policy returns class's rules (policy.Of) at its place in p's ClassList:
// the one reading of a class's name and position that the packages below
// config take their rules from. A class p does not list has a later
// class's rules.
func (p Process) Policy(class admission.Class) policy.Class {
	list := p.ClassList()
	i := slices.IndexFunc(list, func(c Class) bool { return c.Name == class })
	c := policy.Of(class.String(), i)
	if i >= 0 {
		if list[i].Unsuppressed {
			c = c.Unsuppressed()
		}
		c.Sending = list[i].Sending
		c.Guard = list[i].Guard
	}
	return c
}

// Account holds the settings of one provider account: its name (its keys
// in Redis are {sms:<Name>}:*), its provider and credentials, its rates,
// and the classes it serves.
type Account struct {
	Name                string
	Provider            string // generic, twilio or vonage
	ProviderURL         string
	ProviderToken       string // from SMS_PROVIDER_TOKEN, or read from ProviderTokenFile
	ProviderTokenFile   string
	TwilioAccountSID    string
	TwilioAuthToken     string
	TwilioAuthTokenFile string
	TwilioFrom          string
	TwilioServiceSID    string
	TwilioAPIURL        string
	VonageAPIKey        string
	VonageAPISecret     string
	VonageAPISecretFile string
	VonageFrom          string
	VonageAPIURL        string
	// VonageSignatureSecretFile holds the secret Vonage signs receipts
	// with, by VonageSignatureMethod (md5hash, md5, sha1, sha256, sha512).
	VonageSignatureSecretFile string
	VonageSignatureMethod     string
	// ReceiptSecretFile holds the generic API's receipt secret (the
	// HMAC-SHA256 key of X-Signature).
	ReceiptSecretFile string
	RateUnit          string // message or segment
	MaxSegments       int
	ContractRPS       float64
	TargetRPS         float64
	MarketingRPS      float64
	Burst             int
	MaxInFlight       int
	// MinDeliveredRatio is the share of the account's OTP to one country
	// code that must be delivered (receipts): under it the route is
	// skipped (admission.RouteRule); 0 turns the rule off.
	MinDeliveredRatio float64
	// Classes are the classes the account serves, in priority order.
	Classes []admission.Class
	// ClassRPS is, by class, its ceiling on the account (class_rps); a
	// class not in it has TargetRPS, marketing MarketingRPS.
	ClassRPS map[admission.Class]float64
	// ReserveRPS is, by class, the rate the classes after it may never
	// take together on the account (reserve_rps); none by default.
	ReserveRPS map[admission.Class]float64
	// Destinations are the E.164 prefixes ("+81") of the numbers the
	// account sends to; nil: every number. Only ACCOUNTS_FILE sets them.
	Destinations []string
	// FailoverClasses are the classes besides OTP (which always does)
	// that overflow from the account to the next serving them as OTP
	// does: while it is degraded, under a 429 penalty or paused; nil:
	// none. Only ACCOUNTS_FILE sets them.
	FailoverClasses []admission.Class
	Senders         []admission.Sender
	Adaptive        admission.Adaptive
	// OptOutKeywords, OptInKeywords and HelpKeywords are the words of an
	// inbound reply that say STOP, START and HELP on the account, upper
	// case (opt_out_keywords, ...); nil: the defaults of suppress. Only
	// ACCOUNTS_FILE sets them.
	OptOutKeywords, OptInKeywords, HelpKeywords []string
	// secrets are the credential files read at start, by the variable
	// naming each (SMS_PROVIDER_TOKEN_FILE, ...): the adapter reads them
	// again when they change.
	secrets map[string]*provider.Secret
}

// Settings is what the flags and the environment say: the process's
// settings and the account the single-account variables describe (not
// used with ACCOUNTS_FILE: see Accounts).
type Settings struct {
	Process
	Account
}

// MaxCost is the most units one send can take of a's rates: MaxSegments
// when they count segments, else 1.
func (a Account) MaxCost() int {
	if a.RateUnit == "segment" {
		return a.MaxSegments
	}
	return 1
}

// An Error names the variable whose value cannot work. Its text is the
// one line the process prints before it exits with status 2. An error of
// ACCOUNTS_FILE names the file, the account and its key in Msg.
type Error struct {
	Env, Flag, Msg string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid configuration: %s (--%s): %s", e.Env, e.Flag, e.Msg)
}

// ExitCode is the status a process exits with on e: 2, a usage error.
func (e *Error) ExitCode() int { return 2 }

// Bounds beyond which a value is taken for a mistake: past them the
// limiter's microsecond and nanosecond arithmetic would overflow, and a
// typo would pass for a setting.
const (
	maxRPS      = 1e6 // the limiter counts in microseconds: one slot per µs at most
	maxBurst    = 1_000_000
	maxSenders  = 100_000
	maxDuration = 24 * time.Hour
	// maxFileSize bounds what is read of a token, CA or accounts file, so
	// that a path to /dev/zero or a log file neither hangs nor bloats the
	// process.
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
