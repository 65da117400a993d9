package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file's shape. Pointers tell a key left out (its default) from one
// given as zero.
type (
	accountsYAML struct {
		Accounts []accountYAML `yaml:"accounts"`
		Route    *string       `yaml:"route"`
		Classes  []classYAML   `yaml:"classes"`
	}
	classYAML struct {
		Name         string `yaml:"name"`
		Topic        string `yaml:"topic"`
		Subscription string `yaml:"subscription"`
		MaxWait      string `yaml:"max_wait"`
		Suppression  *bool  `yaml:"suppression"`
		// Send windows and caps (classes_sending.go).
		SendHours           string              `yaml:"send_hours"`
		SendHoursByPrefix   map[string]string   `yaml:"send_hours_by_prefix"`
		DefaultZone         string              `yaml:"default_zone"`
		ClosedDates         []string            `yaml:"closed_dates"`
		ClosedDatesByPrefix map[string][]string `yaml:"closed_dates_by_prefix"`
		MaxPerRecipient     *capYAML            `yaml:"max_per_recipient"`
		ReleaseSpread       string              `yaml:"release_spread"`
		guardYAML           `yaml:",inline"`
	}
	capYAML struct {
		Count int    `yaml:"count"`
		Per   string `yaml:"per"`
		OnCap string `yaml:"on_cap"`
	}
	accountYAML struct {
		Name        string       `yaml:"name"`
		Provider    string       `yaml:"provider"`
		Generic     *genericYAML `yaml:"generic"`
		Twilio      *twilioYAML  `yaml:"twilio"`
		Vonage      *vonageYAML  `yaml:"vonage"`
		ContractRPS *float64     `yaml:"contract_rps"`
		TargetRPS   *float64     `yaml:"target_rps"`
		Burst       *int         `yaml:"burst"`
		RateUnit    *string      `yaml:"rate_unit"`
		MaxSegments *int         `yaml:"max_segments"`
		MaxInFlight *int         `yaml:"max_inflight"`
		Classes     []string     `yaml:"classes"`
		// Destinations and FailoverClasses: nil when the key is left out
		// (or given no value), which the loader tells from an empty list
		// by the file's keys.
		Destinations    []string `yaml:"destinations"`
		FailoverClasses []string `yaml:"failover_classes"`
		// ClassRPS and ReserveRPS: by class name.
		ClassRPS   map[string]float64 `yaml:"class_rps"`
		ReserveRPS map[string]float64 `yaml:"reserve_rps"`
		Senders    []senderYAML       `yaml:"senders"`
		Adaptive   *adaptiveYAML      `yaml:"adaptive"`
		// The words of the inbound replies (docs/suppressions.md); nil:
		// the defaults.
		OptOutKeywords []string `yaml:"opt_out_keywords"`
		OptInKeywords  []string `yaml:"opt_in_keywords"`
		HelpKeywords   []string `yaml:"help_keywords"`
	}
	genericYAML struct {
		URL       string `yaml:"url"`
		Token     string `yaml:"token"`
		TokenFile string `yaml:"token_file"`
		// ReceiptSecretFile: SMS_RECEIPT_SECRET_FILE.
		ReceiptSecretFile string `yaml:"receipt_secret_file"`
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
		// SignatureSecretFile and SignatureMethod:
		// VONAGE_SIGNATURE_SECRET_FILE and VONAGE_SIGNATURE_METHOD.
		SignatureSecretFile string  `yaml:"signature_secret_file"`
		SignatureMethod     *string `yaml:"signature_method"`
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

// given reports whether the i-th account has the key at path, with a
// value or without.
func (l *accountsLoader) given(i int, path string) bool {
	for _, k := range l.keys {
		if k.account == i && k.path == path {
			return true
		}
	}
	return false
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
	for _, v := range []any{accountsYAML{}, accountYAML{}, classYAML{}, capYAML{}, prefixRateYAML{}, conversionYAML{}, genericYAML{}, twilioYAML{}, vonageYAML{}, senderYAML{}, adaptiveYAML{}} {
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
