package config

// ACCOUNTS_FILE: several provider accounts in one process. Each account of
// the file is read into an Account over the defaults of the table's rows,
// then checked by the path the single-account variables take (check,
// checkProvider, readFiles, sender), its errors naming the rows' keys.

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
)

// loadAccounts reads the accounts of the YAML file at path under p, the
// process's settings, and returns them in file order with the file's
// route. An account's keys replace the single-account variables (the rows
// with a key); every setting of p applies to every account. Any error is
// an *Error for ACCOUNTS_FILE whose one line names the file, the account
// and the key.
func loadAccounts(p Process, path string) (Routing, error) {
	l := &accountsLoader{path: path}
	data, err := readSmall(path)
	if err != nil {
		return Routing{}, SettingError("ACCOUNTS_FILE", OneLine(err.Error())) // os errors name the path
	}
	f, err := l.decode(data)
	if err != nil {
		return Routing{}, err
	}
	if len(f.Accounts) == 0 {
		return Routing{}, l.fail(l.lineOfKey("accounts"), "", "accounts", "required: at least one account")
	}
	var route dispatch.RouteMode
	if f.Route != nil {
		if route, err = dispatch.ParseRouteMode(strings.TrimSpace(*f.Route)); err != nil {
			return Routing{}, l.fail(l.lineOfKey("route"), "", "route", "want first or longest_prefix, got %q", *f.Route)
		}
	}
	lanes, err := l.classes(p, f.Classes)
	if err != nil {
		return Routing{}, err
	}
	all := classNames(Process{Lanes: lanes}.ClassList())
	accounts := make([]Account, 0, len(f.Accounts))
	names := map[string]int{}
	owners := map[string]int{} // by providerAccount: the entry that holds it
	for i, a := range f.Accounts {
		name := strings.TrimSpace(a.Name)
		if j, ok := names[name]; ok && name != "" {
			return Routing{}, l.fail(0, label(i, name), "name", "%q is also the name of the account at line %d: both would use the Redis keys {sms:%s}:*",
				name, l.itemLine(j), name)
		}
		names[name] = i
		s, err := l.account(p, all, i, a)
		if err != nil {
			return Routing{}, err
		}
		id, key := providerAccount(s)
		if j, ok := owners[id]; ok {
			return Routing{}, l.fail(0, label(i, name), key, "the same %s account as %s (line %d): each entry has a limiter of its own, and together they could send twice the contract; make them one entry (its classes, a sender pool)",
				s.Provider, label(j, strings.TrimSpace(f.Accounts[j].Name)), l.itemLine(j))
		}
		owners[id] = i
		accounts = append(accounts, s)
	}
	// A class needs an account, for some destination at least: a number
	// that none serving the class serves has no route (dead-lettered).
	for _, c := range all {
		if len(dispatch.Route(Served(accounts), c)) == 0 {
			return Routing{}, l.fail(0, "", "classes", "no account serves %s: list it in the classes of one", c)
		}
	}
	return Routing{Accounts: accounts, Route: route, Classes: lanes}, nil
}

// providerAccount identifies the provider's account behind c, and names
// the key that says it: Twilio's account SID, Vonage's API key, the
// generic API's URL and token. The id holds the token: it is compared,
// never shown.
func providerAccount(c Account) (id, key string) {
	switch c.Provider {
	case "twilio":
		return "twilio " + strings.ToLower(c.TwilioAccountSID), "twilio.account_sid"
	case "vonage":
		return "vonage " + strings.ToLower(c.VonageAPIKey), "vonage.api_key"
	}
	return "generic " + sameAPI(c.ProviderURL) + " " + c.ProviderToken, "generic.url"
}

// sameAPI is raw spelled as every spelling of its API is: scheme and host
// in lower case, without the scheme's default port, the host's trailing
// dot or the path's trailing slash. https://SMS.example.com.:443/ and
// https://sms.example.com are one API.
func sameAPI(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	if port == map[string]string{"http": "80", "https": "443"}[u.Scheme] {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]" // an IPv6 literal keeps its brackets
	default:
		u.Host = host
	}
	u.Path, u.RawPath = strings.TrimRight(u.Path, "/"), ""
	return u.String()
}

// account checks the account a, the i-th of the file, and returns it; all
// are the configured classes, in priority order.
func (l *accountsLoader) account(p Process, all []admission.Class, i int, a accountYAML) (Account, error) {
	who := label(i, strings.TrimSpace(a.Name))
	fail := func(key, format string, args ...any) (Account, error) {
		return Account{}, l.fail(0, who, key, format, args...)
	}
	switch {
	case strings.TrimSpace(a.Name) == "":
		return fail("name", "required: the account's name in Redis keys {sms:<name>}:*")
	case strings.TrimSpace(a.Provider) == "":
		return fail("provider", "required: generic, twilio or vonage, with the block of that name")
	case len(a.Classes) == 0:
		return fail("classes", "required: the classes the account serves, some of %s", strings.Join(strs(all), ", "))
	}

	classes, serves, err := servedClasses(a.Classes, all)
	if err != nil {
		return Account{}, l.keyFail(who, err)
	}
	for _, key := range []string{"class_rps", "reserve_rps"} {
		m := a.ClassRPS
		if key == "reserve_rps" {
			m = a.ReserveRPS
		}
		for _, name := range sortedKeys(m) {
			if !slices.Contains(all, admission.Class(name)) {
				return Account{}, l.fail(l.line(i, key+"."+name), who, key+"."+name, "unknown key (%s takes %s)", key, strings.Join(strs(all), ", "))
			}
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

	destinations, err := l.destinations(i, a.Destinations)
	if err != nil {
		return Account{}, l.keyFail(who, err)
	}
	failover, err := failoverClasses(a.FailoverClasses, serves, all)
	if err != nil {
		return Account{}, l.keyFail(who, err)
	}

	s := a.account(p)
	s.Classes, s.Destinations, s.FailoverClasses = classes, destinations, failover
	if err := s.check(p, keys); err != nil {
		return Account{}, l.settingFail(who, err)
	}
	if err := s.checkProvider(keys); err != nil {
		return Account{}, l.settingFail(who, err)
	}
	if err := s.checkReceipts(p, keys); err != nil {
		return Account{}, l.settingFail(who, err)
	}
	if s.ClassRPS, s.ReserveRPS, err = classRates(a.ClassRPS, a.ReserveRPS, classes, all, s.TargetRPS, s.MarketingRPS); err != nil {
		return Account{}, l.keyFail(who, err)
	}

	if s.Senders, err = senders(a.Senders, s.RateUnit); err != nil {
		return Account{}, l.keyFail(who, err)
	}
	if s.Adaptive, err = adaptive(a.Adaptive, s.TargetRPS); err != nil {
		return Account{}, l.keyFail(who, err)
	}
	if s.OptOutKeywords, s.OptInKeywords, s.HelpKeywords, err = keywords(a.OptOutKeywords, a.OptInKeywords, a.HelpKeywords); err != nil {
		return Account{}, l.keyFail(who, err)
	}
	if err := p.Limiter(s).Validate(); err != nil {
		var ce *admission.ConfigError
		if !errors.As(err, &ce) {
			return fail("", "%v", err)
		}
		if ce.Field == "Classes" {
			return fail(classesKey(ce.Reason), "%s", ce.Reason)
		}
		return fail(keyOfField(ce.Field), "%s", ce.Reason)
	}

	// Last, what reads files or builds the adapter: the credential files
	// are read once here, and Sender takes them from the account.
	if err := s.readFiles(); err != nil {
		return Account{}, l.settingFail(who, err)
	}
	sender, _, err := s.sender(p.SendTimeout)
	if err != nil {
		return Account{}, l.settingFail(who, err)
	}
	sender.CloseIdleConnections()
	return s, nil
}

// account is the Account of a: the defaults of the single-account
// variables (whatever the environment says), a's keys written over them.
func (a accountYAML) account(p Process) Account {
	var s Settings
	for _, row := range settings {
		if row.key == "" {
			continue
		}
		if err := row.parse(&s, row.def); err != nil {
			panic("config: default of " + row.env + ": " + err.Error())
		}
	}
	c := s.Account
	trim := strings.TrimSpace
	c.Name = trim(a.Name)
	c.Provider = trim(a.Provider)
	if g := a.Generic; g != nil {
		c.ProviderURL, c.ProviderToken, c.ProviderTokenFile = trim(g.URL), trim(g.Token), trim(g.TokenFile)
		c.ReceiptSecretFile = trim(g.ReceiptSecretFile)
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
		c.VonageSignatureSecretFile = trim(v.SignatureSecretFile)
		if v.SignatureMethod != nil {
			c.VonageSignatureMethod = trim(*v.SignatureMethod)
		}
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
	c.dependentDefaults(a.RateUnit != nil, a.MaxSegments != nil, p)
	// Marketing's cap: class_rps.marketing, else MARKETING_RPS's default
	// within target_rps (an account that does not serve marketing keeps it
	// too, unused).
	if v, ok := a.ClassRPS[admission.Marketing.String()]; ok {
		c.MarketingRPS = v
	} else if c.TargetRPS < c.MarketingRPS {
		c.MarketingRPS = c.TargetRPS
	}
	return c
}

// keyOfField is the key of the file behind an admission.Config field: the
// key of the row that feeds it (its variable for a setting of the
// process), else the field said as the file says it (Adaptive.MinRPS is
// adaptive.min_rps).
func keyOfField(field string) string {
	for _, s := range settings {
		if s.field == field {
			return keys(s.env)
		}
	}
	var b strings.Builder
	for i, r := range field {
		if r >= 'A' && r <= 'Z' && i > 0 && field[i-1] >= 'a' && field[i-1] <= 'z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToLower(b.String())
}

// settingFail is the error for a problem of account, named by its key.
func (l *accountsLoader) settingFail(account string, err error) error {
	var p *problem
	if !errors.As(err, &p) {
		return l.fail(0, account, "", "%v", err)
	}
	return l.fail(0, account, keys(p.env), "%s", p.msg)
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
	return SettingError("ACCOUNTS_FILE", OneLine(strings.Join(parts, ": ")))
}

// keyFail is the error for a *keyError of account.
func (l *accountsLoader) keyFail(account string, err error) error {
	var ke *keyError
	if errors.As(err, &ke) {
		return l.fail(0, account, ke.key, "%s", ke.msg)
	}
	return l.fail(0, account, "", "%v", err)
}

// OneLine replaces control characters, so that an error is one line.
func OneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
