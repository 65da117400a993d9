package main

// ACCOUNTS_FILE: several provider accounts in one process. Each account of
// the file is checked as the single-account variables are: its keys are
// written into a copy of the process's config, which validate, checkProvider
// and readFiles then judge, and the variable an error names is turned back
// into the key of the file.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"smsdispatcher/admission"
)

// accountSetup is one provider account: cfg holds the process's settings
// with the account's written into them, ready for newProvider and for the
// account's admission.Config; classes are the classes it serves, in the
// order the file lists them.
type accountSetup struct {
	cfg      config
	classes  []admission.Class
	senders  []admission.Sender
	adaptive admission.Adaptive
}

// The file's shape. Pointers tell a key left out (its default) from one
// given as zero.
type (
	accountsYAML struct {
		Accounts []accountYAML `yaml:"accounts"`
	}
	accountYAML struct {
		Name        string        `yaml:"name"`
		Provider    string        `yaml:"provider"`
		Generic     *genericYAML  `yaml:"generic"`
		Twilio      *twilioYAML   `yaml:"twilio"`
		Vonage      *vonageYAML   `yaml:"vonage"`
		ContractRPS *float64      `yaml:"contract_rps"`
		TargetRPS   *float64      `yaml:"target_rps"`
		Burst       *int          `yaml:"burst"`
		RateUnit    *string       `yaml:"rate_unit"`
		MaxSegments *int          `yaml:"max_segments"`
		MaxInFlight *int          `yaml:"max_inflight"`
		Classes     []string      `yaml:"classes"`
		ClassRPS    *classRPSYAML `yaml:"class_rps"`
		Senders     []senderYAML  `yaml:"senders"`
		Adaptive    *adaptiveYAML `yaml:"adaptive"`
	}
	genericYAML struct {
		URL       string `yaml:"url"`
		Token     string `yaml:"token"`
		TokenFile string `yaml:"token_file"`
	}
	twilioYAML struct {
		AccountSID          string `yaml:"account_sid"`
		AuthToken           string `yaml:"auth_token"`
		AuthTokenFile       string `yaml:"auth_token_file"`
		From                string `yaml:"from"`
		MessagingServiceSID string `yaml:"messaging_service_sid"`
		APIURL              string `yaml:"api_url"`
	}
	vonageYAML struct {
		APIKey        string `yaml:"api_key"`
		APISecret     string `yaml:"api_secret"`
		APISecretFile string `yaml:"api_secret_file"`
		From          string `yaml:"from"`
		APIURL        string `yaml:"api_url"`
	}
	classRPSYAML struct {
		OTP       *float64 `yaml:"otp"`
		Marketing *float64 `yaml:"marketing"`
	}
	senderYAML struct {
		From string   `yaml:"from"`
		RPS  *float64 `yaml:"rps"`
	}
	adaptiveYAML struct {
		Enabled       bool     `yaml:"enabled"`
		MinRPS        *float64 `yaml:"min_rps"`
		ProbeInterval string   `yaml:"probe_interval"`
		Step          string   `yaml:"step"`
	}
)

// accountKeyOf names, for each single-account variable, the key of an
// account that replaces it. An account's config starts from these
// variables' defaults, whatever the environment says.
var accountKeyOf = map[string]string{
	"SMS_ACCOUNT":                  "name",
	"SMS_PROVIDER":                 "provider",
	"SMS_PROVIDER_URL":             "generic.url",
	"SMS_PROVIDER_TOKEN":           "generic.token",
	"SMS_PROVIDER_TOKEN_FILE":      "generic.token_file",
	"TWILIO_ACCOUNT_SID":           "twilio.account_sid",
	"TWILIO_AUTH_TOKEN":            "twilio.auth_token",
	"TWILIO_AUTH_TOKEN_FILE":       "twilio.auth_token_file",
	"TWILIO_FROM":                  "twilio.from",
	"TWILIO_MESSAGING_SERVICE_SID": "twilio.messaging_service_sid",
	"TWILIO_API_URL":               "twilio.api_url",
	"VONAGE_API_KEY":               "vonage.api_key",
	"VONAGE_API_SECRET":            "vonage.api_secret",
	"VONAGE_API_SECRET_FILE":       "vonage.api_secret_file",
	"VONAGE_FROM":                  "vonage.from",
	"VONAGE_API_URL":               "vonage.api_url",
	"CONTRACT_RPS":                 "contract_rps",
	"TARGET_RPS":                   "target_rps",
	"MARKETING_RPS":                "class_rps.marketing",
	"BURST":                        "burst",
	"RATE_UNIT":                    "rate_unit",
	"MAX_SEGMENTS":                 "max_segments",
	"PROVIDER_MAX_INFLIGHT":        "max_inflight",
}

// accountKeyOfField names the key behind each admission.Config field an
// account sets; the others come from the environment.
var accountKeyOfField = map[string]string{
	"Account": "name", "TargetRPS": "target_rps", "MarketingRPS": "class_rps.marketing",
	"Burst": "burst", "MaxInFlight": "max_inflight", "MaxCost": "max_segments",
	"Senders": "senders", "Adaptive.MinRPS": "adaptive.min_rps",
	"Adaptive.ProbeInterval": "adaptive.probe_interval", "Adaptive.Step": "adaptive.step",
	"ArrivalJitter": "PROVIDER_ARRIVAL_JITTER",
}

// Bounds of the adaptive durations.
const (
	minProbeInterval = time.Second
	// minAdaptiveStep: a step shorter than the time a rate a little above
	// the provider's limit takes to draw a 429 (about a second at a
	// sliding second) would prove that rate good and settle above the
	// limit.
	minAdaptiveStep = time.Second
)

// accountsLoader reads one ACCOUNTS_FILE; its errors are one line naming
// the file, the account and the key.
type accountsLoader struct {
	path  string
	root  yaml.Node    // the file as parsed, for positions
	keys  []keyPos     // every key of the file, in document order
	items []*yaml.Node // the accounts' nodes
}

// keyPos is where a key of the file is, and what it holds.
type keyPos struct {
	account    int    // index of the account holding it; -1: outside any
	path       string // twilio.auth_token, senders[1].rps, ...
	key, value *yaml.Node
}

// loadAccounts reads the accounts of the YAML file at path over base, the
// process's configuration, and returns them in file order. An account's
// keys replace the single-account variables (accountKeyOf); every other
// setting of base applies to every account. Any error is a *configError
// for ACCOUNTS_FILE whose one line names the file, the account and the key.
func loadAccounts(base config, path string) ([]accountSetup, error) {
	l := &accountsLoader{path: path}
	data, err := readSmall(path)
	if err != nil {
		return nil, &configError{"ACCOUNTS_FILE", "accounts-file", oneLine(err.Error())} // os errors name the path
	}
	f, err := l.decode(data)
	if err != nil {
		return nil, err
	}
	if len(f.Accounts) == 0 {
		return nil, l.fail(l.lineOfKey("accounts"), "", "accounts", "required: at least one account")
	}
	setups := make([]accountSetup, 0, len(f.Accounts))
	names := map[string]int{}
	owners := map[string]int{} // by providerAccount: the entry that holds it
	for i, a := range f.Accounts {
		name := strings.TrimSpace(a.Name)
		if j, ok := names[name]; ok && name != "" {
			return nil, l.fail(0, label(i, name), "name", "%q is also the name of the account at line %d: both would use the Redis keys {sms:%s}:*",
				name, l.itemLine(j), name)
		}
		names[name] = i
		s, err := l.account(base, i, a)
		if err != nil {
			return nil, err
		}
		id, key := providerAccount(s.cfg)
		if j, ok := owners[id]; ok {
			return nil, l.fail(0, label(i, name), key, "the same %s account as %s (line %d): each entry has a limiter of its own, and together they could send twice the contract; make them one entry (its classes, a sender pool)",
				s.cfg.Provider, label(j, strings.TrimSpace(f.Accounts[j].Name)), l.itemLine(j))
		}
		owners[id] = i
		setups = append(setups, s)
	}
	r := routes(setups)
	for _, c := range []admission.Class{admission.OTP, admission.Marketing} {
		if len(r[c]) == 0 {
			return nil, l.fail(0, "", "classes", "no account serves %s: list it in the classes of one", c)
		}
	}
	return setups, nil
}

// providerAccount identifies the provider's account behind c, and names
// the key that says it: Twilio's account SID, Vonage's API key, the
// generic API's URL and token. The id holds the token: it is compared,
// never shown.
func providerAccount(c config) (id, key string) {
	switch c.Provider {
	case "twilio":
		return "twilio " + strings.ToLower(c.TwilioAccountSID), "twilio.account_sid"
	case "vonage":
		return "vonage " + strings.ToLower(c.VonageAPIKey), "vonage.api_key"
	}
	u := c.ProviderURL
	if p, err := url.Parse(u); err == nil {
		// https://SMS.example.com/ and https://sms.example.com are one API.
		p.Scheme, p.Host, p.Path = strings.ToLower(p.Scheme), strings.ToLower(p.Host), strings.TrimRight(p.Path, "/")
		u = p.String()
	}
	return "generic " + u + " " + c.ProviderToken, "generic.url"
}

// singleAccount is the account the single-account variables describe: the
// one named by SMS_ACCOUNT, serving both classes with marketing capped at
// MARKETING_RPS, without a sender pool or an adaptive limit.
func singleAccount(base config) accountSetup {
	return accountSetup{cfg: base, classes: []admission.Class{admission.OTP, admission.Marketing}}
}

// routes returns, for each class (indexed by admission.Class), the indexes
// of the setups that serve it, in their order: the first is the class's
// home, the next ones take what it cannot.
func routes(setups []accountSetup) [2][]int {
	var r [2][]int
	for i, s := range setups {
		for _, c := range s.classes {
			if c >= 0 && int(c) < len(r) {
				r[c] = append(r[c], i)
			}
		}
	}
	return r
}

// decode parses data strictly: a syntax error, an unknown or repeated key,
// a value of the wrong type or a second document is an error.
func (l *accountsLoader) decode(data []byte) (accountsYAML, error) {
	var f accountsYAML
	if err := yaml.Unmarshal(data, &l.root); err != nil {
		return f, l.yamlError(err)
	}
	l.index(&l.root, -1, "")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return f, l.yamlError(err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return f, l.yamlError(err)
	default:
		return f, l.fail(more.Line, "", "", "a second YAML document: the file holds one")
	}
	return f, nil
}

// account checks the account a, the i-th of the file, and returns its setup.
func (l *accountsLoader) account(base config, i int, a accountYAML) (accountSetup, error) {
	who := label(i, strings.TrimSpace(a.Name))
	fail := func(key, format string, args ...any) (accountSetup, error) {
		return accountSetup{}, l.fail(0, who, key, format, args...)
	}
	switch {
	case strings.TrimSpace(a.Name) == "":
		return fail("name", "required: the account's name in Redis keys {sms:<name>}:*")
	case strings.TrimSpace(a.Provider) == "":
		return fail("provider", "required: generic, twilio or vonage, with the block of that name")
	case len(a.Classes) == 0:
		return fail("classes", "required: the classes the account serves, otp, marketing or both")
	}

	var s accountSetup
	serves := map[admission.Class]bool{}
	for j, name := range a.Classes {
		c, err := admission.ParseClass(strings.TrimSpace(name))
		if err != nil {
			return fail(fmt.Sprintf("classes[%d]", j), "want otp or marketing, got %q", name)
		}
		if serves[c] {
			return fail(fmt.Sprintf("classes[%d]", j), "%s is listed twice", c)
		}
		serves[c] = true
		s.classes = append(s.classes, c)
	}
	if r := a.ClassRPS; r != nil {
		switch {
		case r.OTP != nil:
			return fail("class_rps.otp", "OTP is capped only by target_rps: remove the key")
		case r.Marketing != nil && !serves[admission.Marketing]:
			return fail("class_rps.marketing", "the account does not serve marketing (see its classes)")
		}
	}

	provider := strings.TrimSpace(a.Provider)
	blocks := []struct {
		name  string
		given bool
	}{{"generic", a.Generic != nil}, {"twilio", a.Twilio != nil}, {"vonage", a.Vonage != nil}}
	known := false
	for _, b := range blocks {
		known = known || b.name == provider
	}
	if known {
		for _, b := range blocks {
			if b.given && b.name != provider {
				return fail(b.name, "given with provider %s: only the %s block may be given", provider, provider)
			}
		}
		for _, b := range blocks {
			if !b.given && b.name == provider {
				return fail(b.name, "required with provider %s: its URL and credentials", provider)
			}
		}
	}

	s.cfg = accountConfig(base, a)
	if err := s.cfg.validate(); err != nil {
		return accountSetup{}, l.settingFail(who, err)
	}
	if err := checkProvider(s.cfg); err != nil {
		return accountSetup{}, l.settingFail(who, err)
	}

	var err error
	if s.senders, err = senders(a.Senders, s.cfg.RateUnit); err != nil {
		return accountSetup{}, l.keyFail(who, err)
	}
	if s.adaptive, err = adaptive(a.Adaptive, s.cfg.TargetRPS); err != nil {
		return accountSetup{}, l.keyFail(who, err)
	}
	maxCost := 1
	if s.cfg.RateUnit == "segment" {
		maxCost = s.cfg.MaxSegments
	}
	lim := admission.Config{
		Account: s.cfg.Account, TargetRPS: s.cfg.TargetRPS, MarketingRPS: s.cfg.MarketingRPS,
		Burst: s.cfg.Burst, MaxSenders: s.cfg.MaxSenders, RedisTimeout: s.cfg.RedisTimeout,
		MaxInFlight: s.cfg.MaxInFlight, MaxCost: maxCost,
		Senders: s.senders, ArrivalJitter: s.cfg.ArrivalJitter, Adaptive: s.adaptive,
	}
	if err := lim.Validate(); err != nil {
		var ce *admission.ConfigError
		if !errors.As(err, &ce) {
			return fail("", "%v", err)
		}
		key, ok := accountKeyOfField[ce.Field]
		if !ok {
			key = ce.Field // a setting of the environment, checked before
		}
		return fail(key, "%s", ce.Reason)
	}

	// Last, what reads files or builds the adapter: the credential files
	// are read once here, and newProvider takes them from s.cfg.
	if err := s.cfg.readFiles(); err != nil {
		return accountSetup{}, l.settingFail(who, err)
	}
	sender, _, err := newProvider(s.cfg, nil)
	if err != nil {
		return accountSetup{}, l.settingFail(who, err)
	}
	sender.CloseIdleConnections()
	return s, nil
}

// accountConfig is base with the single-account settings back at their
// defaults, then a's keys written over them.
func accountConfig(base config, a accountYAML) config {
	c := base
	c.fileSecrets = nil
	for _, s := range settings {
		if _, ok := accountKeyOf[s.env]; !ok {
			continue
		}
		if err := s.parse(&c, s.def); err != nil {
			panic("accountConfig: default of " + s.env + ": " + err.Error())
		}
	}
	trim := strings.TrimSpace
	c.Account = trim(a.Name)
	c.Provider = trim(a.Provider)
	if g := a.Generic; g != nil {
		c.ProviderURL, c.ProviderToken, c.ProviderTokenFile = trim(g.URL), trim(g.Token), trim(g.TokenFile)
	}
	if t := a.Twilio; t != nil {
		c.TwilioAccountSID, c.TwilioAuthToken, c.TwilioAuthTokenFile = trim(t.AccountSID), trim(t.AuthToken), trim(t.AuthTokenFile)
		c.TwilioFrom, c.TwilioServiceSID = trim(t.From), trim(t.MessagingServiceSID)
		if u := trim(t.APIURL); u != "" {
			c.TwilioAPIURL = u
		}
	}
	if v := a.Vonage; v != nil {
		c.VonageAPIKey, c.VonageAPISecret, c.VonageAPISecretFile = trim(v.APIKey), trim(v.APISecret), trim(v.APISecretFile)
		c.VonageFrom = trim(v.From)
		if u := trim(v.APIURL); u != "" {
			c.VonageAPIURL = u
		}
	}
	set(&c.ContractRPS, a.ContractRPS)
	set(&c.TargetRPS, a.TargetRPS)
	set(&c.Burst, a.Burst)
	set(&c.MaxSegments, a.MaxSegments)
	set(&c.MaxInFlight, a.MaxInFlight)
	if a.RateUnit != nil {
		c.RateUnit = trim(*a.RateUnit)
	}
	c.dependentDefaults(a.RateUnit != nil, a.MaxSegments != nil)
	// Marketing's cap: class_rps.marketing, else MARKETING_RPS's default
	// within target_rps (an account that does not serve marketing keeps it
	// too, unused).
	if a.ClassRPS != nil && a.ClassRPS.Marketing != nil {
		c.MarketingRPS = *a.ClassRPS.Marketing
	} else if c.TargetRPS < c.MarketingRPS {
		c.MarketingRPS = c.TargetRPS
	}
	return c
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// keyError is a problem with one key of an account.
type keyError struct{ key, msg string }

func (e *keyError) Error() string { return e.key + ": " + e.msg }

func keyErrorf(key, format string, args ...any) error {
	return &keyError{key, fmt.Sprintf(format, args...)}
}

// senders checks an account's sender pool; rates are in unit.
func senders(list []senderYAML, unit string) ([]admission.Sender, error) {
	var out []admission.Sender
	seen := map[string]int{}
	for j, s := range list {
		from := strings.TrimSpace(s.From)
		key := fmt.Sprintf("senders[%d]", j)
		switch {
		case from == "":
			return nil, keyErrorf(key+".from", "required: the number or sender id to send from")
		case strings.IndexFunc(from, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return nil, keyErrorf(key+".from", "must not hold control characters, got %q", from)
		case s.RPS == nil:
			return nil, keyErrorf(key+".rps", "required: the sender's own rate, %ss per second", unit)
		case !(*s.RPS >= admission.MinRPS) || math.IsInf(*s.RPS, 0):
			return nil, keyErrorf(key+".rps", "must be a finite number of at least %v, got %v", admission.MinRPS, *s.RPS)
		case *s.RPS > maxRPS:
			return nil, keyErrorf(key+".rps", "must be at most %v (the limiter counts in microseconds), got %v", maxRPS, *s.RPS)
		}
		if k, ok := seen[from]; ok {
			return nil, keyErrorf(key+".from", "%q is also senders[%d].from", from, k)
		}
		seen[from] = j
		out = append(out, admission.Sender{From: from, RPS: *s.RPS})
	}
	return out, nil
}

// adaptive checks an account's adaptive block (nil: off) and fills in its
// defaults.
func adaptive(a *adaptiveYAML, target float64) (admission.Adaptive, error) {
	out := admission.Adaptive{
		MinRPS:        max(target/10, admission.MinRPS),
		ProbeInterval: admission.DefaultProbeInterval,
		Step:          admission.DefaultAdaptiveStep,
	}
	if a == nil {
		return admission.Adaptive{}, nil
	}
	out.Enabled = a.Enabled
	if a.MinRPS != nil {
		out.MinRPS = *a.MinRPS
	}
	switch {
	case !(out.MinRPS >= admission.MinRPS) || math.IsInf(out.MinRPS, 0):
		return out, keyErrorf("adaptive.min_rps", "must be a finite number of at least %v, got %v", admission.MinRPS, out.MinRPS)
	case out.MinRPS > target:
		return out, keyErrorf("adaptive.min_rps", "%v is above target_rps (%v): the learned rate stays within target_rps", out.MinRPS, target)
	}
	for _, d := range []struct {
		key, value string
		least      time.Duration
		dst        *time.Duration
	}{
		{"adaptive.probe_interval", a.ProbeInterval, minProbeInterval, &out.ProbeInterval},
		{"adaptive.step", a.Step, minAdaptiveStep, &out.Step},
	} {
		v := strings.TrimSpace(d.value)
		if v == "" {
			continue
		}
		p, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return out, keyErrorf(d.key, "want a duration such as %v, got %q", *d.dst, v)
		case p < d.least:
			return out, keyErrorf(d.key, "must be at least %v, got %v", d.least, p)
		case p > maxDuration:
			return out, keyErrorf(d.key, "must be at most %v, got %v", maxDuration, p)
		}
		*d.dst = p
	}
	return out, nil
}

// label names the i-th account of the file in an error.
func label(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("account %d (no name)", i+1)
	}
	return fmt.Sprintf("account %q", name)
}

// fail is the one-line error for the file: line (0: none), account (""
// for the file itself) and key ("": none) come before the message.
func (l *accountsLoader) fail(line int, account, key, format string, args ...any) error {
	parts := []string{l.path}
	if line > 0 {
		parts = append(parts, "line "+strconv.Itoa(line))
	}
	if account != "" {
		parts = append(parts, account)
	}
	if key != "" {
		parts = append(parts, key)
	}
	parts = append(parts, fmt.Sprintf(format, args...))
	return &configError{"ACCOUNTS_FILE", "accounts-file", oneLine(strings.Join(parts, ": "))}
}

// settingFail turns an error naming a variable into one naming the
// account's key, and the variables its message names into keys.
func (l *accountsLoader) settingFail(account string, err error) error {
	var ce *configError
	if !errors.As(err, &ce) {
		return l.fail(0, account, "", "%v", err)
	}
	key, ok := accountKeyOf[ce.Env]
	if !ok {
		key = ce.Env // a setting of the environment
	}
	return l.fail(0, account, key, "%s", renameVariables(ce.Msg))
}

// keyFail is the error for a *keyError of account.
func (l *accountsLoader) keyFail(account string, err error) error {
	var ke *keyError
	if errors.As(err, &ke) {
		return l.fail(0, account, ke.key, "%s", ke.msg)
	}
	return l.fail(0, account, "", "%v", err)
}

// renameVariables replaces, in msg, each single-account variable by its key
// (TARGET_RPS by target_rps, ...), leaving quoted values alone.
func renameVariables(msg string) string {
	var b strings.Builder
	word := func(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' }
	for i := 0; i < len(msg); {
		switch c := msg[i]; {
		case c == '"':
			q, err := strconv.QuotedPrefix(msg[i:])
			if err != nil {
				q = msg[i : i+1]
			}
			b.WriteString(q)
			i += len(q)
		case word(c) && (i == 0 || !word(msg[i-1])):
			j := i
			for j < len(msg) && word(msg[j]) {
				j++
			}
			if key, ok := accountKeyOf[msg[i:j]]; ok {
				b.WriteString(key)
			} else {
				b.WriteString(msg[i:j])
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// oneLine replaces control characters, so that an error is one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// index records every key under n, a node of account (-1: none) at path.
func (l *accountsLoader) index(n *yaml.Node, account int, path string) {
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			l.index(c, account, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(k.Value)
			l.keys = append(l.keys, keyPos{account, p, k, v})
			if account < 0 && path == "" && k.Value == "accounts" && v.Kind == yaml.SequenceNode && l.items == nil {
				for j, item := range v.Content {
					l.items = append(l.items, item)
					l.index(item, j, "")
				}
				continue
			}
			l.index(v, account, p)
		}
	case yaml.SequenceNode:
		for j, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, j)
			if c.Kind == yaml.ScalarNode {
				l.keys = append(l.keys, keyPos{account, p, nil, c})
				continue
			}
			l.index(c, account, p)
		}
	}
}

// lineOfKey is the line of the top-level key, 0 when it is absent.
func (l *accountsLoader) lineOfKey(key string) int {
	for _, k := range l.keys {
		if k.account < 0 && k.path == key {
			return k.key.Line
		}
	}
	return 0
}

// itemLine is the line where the i-th account starts, 0 if unknown.
func (l *accountsLoader) itemLine(i int) int {
	if i < 0 || i >= len(l.items) {
		return 0
	}
	return l.items[i].Line
}

// accountAt is the label of the account whose node spans line, "" for none.
func (l *accountsLoader) accountAt(line int) string {
	found := -1
	for i, item := range l.items {
		if item.Line <= line {
			found = i
		}
	}
	if found < 0 {
		return ""
	}
	return l.accountLabel(found)
}

// accountLabel is label for the i-th account, named as its node says.
func (l *accountsLoader) accountLabel(i int) string {
	name := ""
	for _, k := range l.keys {
		if k.account == i && k.path == "name" && k.value.Kind == yaml.ScalarNode {
			name = strings.TrimSpace(k.value.Value)
		}
	}
	return label(i, name)
}

var (
	yamlLine       = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknown    = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	yamlDuplicate  = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
	yamlWrongValue = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `.*`)? into (\\S+)$")
)

// yamlTypes are the file's types by the name the decoder gives them.
var yamlTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, v := range []any{accountsYAML{}, accountYAML{}, genericYAML{}, twilioYAML{}, vonageYAML{}, classRPSYAML{}, senderYAML{}, adaptiveYAML{}} {
		t := reflect.TypeOf(v)
		m[t.String()] = t
	}
	return m
}()

// yamlError is the one-line error for an error of the YAML decoder: the
// first problem, with its line, account and key.
func (l *accountsLoader) yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return l.fail(line, l.accountAt(line), "", "%s", m[2])
		}
		return l.fail(0, "", "", "%s", msg)
	}
	m := yamlLine.FindStringSubmatch(te.Errors[0])
	if m == nil {
		return l.fail(0, "", "", "%s", te.Errors[0])
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	var at *keyPos
	find := func(match func(k keyPos) bool) {
		for i := range l.keys {
			if match(l.keys[i]) {
				at = &l.keys[i]
				return
			}
		}
	}
	if u := yamlUnknown.FindStringSubmatch(msg); u != nil {
		find(func(k keyPos) bool { return k.key != nil && k.key.Line == line && k.key.Value == u[1] })
		msg = "unknown key"
		if t, ok := yamlTypes[u[2]]; ok {
			msg += " (" + owner(at) + " takes " + strings.Join(yamlKeys(t), ", ") + ")"
		}
	} else if d := yamlDuplicate.FindStringSubmatch(msg); d != nil {
		find(func(k keyPos) bool { return k.key != nil && k.key.Line == line && k.key.Value == d[1] })
		msg = "given twice (first at line " + d[2] + ")"
	} else if w := yamlWrongValue.FindStringSubmatch(msg); w != nil {
		find(func(k keyPos) bool { return k.value.Line == line && k.value.ShortTag() == w[1] })
		want := typeWords(w[2])
		msg = "want " + want + ", got " + valueWords(at, w[1], want)
	}
	if at == nil {
		return l.fail(line, l.accountAt(line), "", "%s", msg)
	}
	account := ""
	if at.account >= 0 {
		account = l.accountLabel(at.account)
	}
	return l.fail(line, account, at.path, "%s", msg)
}

// owner names what holds the key at k: the file, an account or a block.
func owner(k *keyPos) string {
	switch {
	case k == nil:
		return "it"
	case !strings.ContainsAny(k.path, ".["):
		if k.account < 0 {
			return "the file"
		}
		return "an account"
	}
	return k.path[:strings.LastIndexAny(k.path, ".[")]
}

// yamlKeys lists the keys of a struct of the file, in order.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" {
			keys = append(keys, tag)
		}
	}
	return keys
}

// typeWords says what a Go type of the file wants.
func typeWords(t string) string {
	switch {
	case t == "float64":
		return "a number"
	case t == "int":
		return "an integer"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map[") || yamlTypes[t] != nil:
		return "a mapping"
	}
	return t
}

// valueWords says what was given instead: the value itself only where a
// number or a boolean was wanted, so that a secret put in the wrong place
// is not shown.
func valueWords(k *keyPos, tag, want string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	}
	if k != nil && (want == "a number" || want == "an integer" || want == "true or false") {
		v := k.value.Value
		if r := []rune(v); len(r) > 40 {
			v = string(r[:40]) + "..."
		}
		return strconv.Quote(v)
	}
	return "a single value"
}
