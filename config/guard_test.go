package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"smsdispatcher/config/policy"
)

const guardAccount = "accounts:\n  - name: main\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, marketing]\n"

// The guard's keys of a class load into its policy; a class without them
// has none.
func TestAClassGuardLoads(t *testing.T) {
	path := writeFile(t, "accounts.yaml", `classes:
  - name: otp
    countries: ["+1", "+44", "+81"]
    allow_prefixes: ["+4477009"]
    max_per_prefix: {digits: 6, count: 300, per: 10m, block_for: 1h}
    min_conversion: {ratio: 0.2, min_sends: 50, per: 30m, digits: 5, block_for: 1h}
  - name: marketing
`+guardAccount)
	cfg, err := loadConfig(map[string]string{"ACCOUNTS_FILE": path})
	if err != nil {
		t.Fatal(err)
	}
	want := &policy.Guard{Countries: []string{"+1", "+44", "+81"}, AllowPrefixes: []string{"+4477009"},
		MaxPerPrefix:  policy.PrefixRate{Digits: 6, Count: 300, Per: 10 * time.Minute, BlockFor: time.Hour},
		MinConversion: policy.Conversion{Ratio: 0.2, MinSends: 50, Per: 30 * time.Minute, Digits: 5, Grace: DefaultConversionGrace, BlockFor: time.Hour}}
	if got := cfg.Policy("otp").Guard; !reflect.DeepEqual(got, want) {
		t.Fatalf("otp's guard %+v, want %+v", got, want)
	}
	if got := cfg.Policy("marketing").Guard; got != nil {
		t.Fatalf("marketing's guard %+v, want none", got)
	}
}

// A guard key that cannot work names the file, the line, the class and
// the key.
func TestAClassGuardErrors(t *testing.T) {
	for _, tt := range []struct{ name, class, want string }{
		{"both country lists", `{name: otp, countries: ["+44"], deny_countries: ["+7"]}`, `classes[0].deny_countries: set countries (allowed) or deny_countries, not both`},
		{"a country code too long", `{name: otp, countries: ["+4477"]}`, `classes[0].countries[0]: want a country code, + then 1 to 3 digits, got "+4477"`},
		{"an allowed prefix without +", `{name: otp, allow_prefixes: ["4477"]}`, `classes[0].allow_prefixes[0]: want an E.164 prefix`},
		{"no digits", `{name: otp, max_per_prefix: {count: 3, per: 1m, block_for: 1h}}`, `classes[0].max_per_prefix.digits: want 1 to 15 digits after the +, got 0`},
		{"no count", `{name: otp, max_per_prefix: {digits: 6, per: 1m, block_for: 1h}}`, `classes[0].max_per_prefix.count: want at least 1 send, got 0`},
		{"no per", `{name: otp, max_per_prefix: {digits: 6, count: 3, block_for: 1h}}`, `classes[0].max_per_prefix.per: required: a duration such as 10m`},
		{"a bad block_for", `{name: otp, max_per_prefix: {digits: 6, count: 3, per: 1m, block_for: soon}}`, `classes[0].max_per_prefix.block_for: want a duration such as 10m, got "soon"`},
		{"a ratio over 1", `{name: otp, min_conversion: {ratio: 2, min_sends: 5, per: 30m, digits: 5, block_for: 1h}}`, `classes[0].min_conversion.ratio: want a share above 0 and at most 1, got 2`},
		{"a grace past per", `{name: otp, min_conversion: {ratio: 0.2, min_sends: 5, per: 1m, grace: 2m, digits: 5, block_for: 1h}}`, `classes[0].min_conversion.grace: 2m0s leaves no send of per (1m0s) to judge`},
		{"an unknown key", `{name: otp, max_per_prefix: {digits: 6, count: 3, per: 1m, block_for: 1h, burst: 2}}`, `burst`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "accounts.yaml", "classes:\n  - "+tt.class+"\n  - {name: marketing}\n"+guardAccount)
			_, err := loadConfig(map[string]string{"ACCOUNTS_FILE": path})
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != "ACCOUNTS_FILE" {
				t.Fatalf("%v; want a configuration error for ACCOUNTS_FILE", err)
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, path) || !strings.Contains(msg, tt.want) {
				t.Errorf("error\n %s\nwant one line naming the file and\n %s", msg, tt.want)
			}
		})
	}
}
