package config

// ACCOUNTS_FILE's keys of a class's pumping guard (docs/guard.md): the
// countries a message may go to, the ranges always allowed, a range's
// brake and its share of verified codes.

import (
	"fmt"
	"strings"
	"time"

	"smsdispatcher/config/policy"
)

type (
	guardYAML struct {
		Countries     []string        `yaml:"countries"`
		DenyCountries []string        `yaml:"deny_countries"`
		AllowPrefixes []string        `yaml:"allow_prefixes"`
		MaxPerPrefix  *prefixRateYAML `yaml:"max_per_prefix"`
		MinConversion *conversionYAML `yaml:"min_conversion"`
	}
	prefixRateYAML struct {
		Digits   int    `yaml:"digits"`
		Count    int    `yaml:"count"`
		Per      string `yaml:"per"`
		BlockFor string `yaml:"block_for"`
	}
	conversionYAML struct {
		Ratio    float64 `yaml:"ratio"`
		MinSends int     `yaml:"min_sends"`
		Per      string  `yaml:"per"`
		Digits   int     `yaml:"digits"`
		Grace    string  `yaml:"grace"`
		BlockFor string  `yaml:"block_for"`
	}
)

// DefaultConversionGrace is min_conversion's grace left out: the time a
// person takes to type a code.
const DefaultConversionGrace = 60 * time.Second

// The bounds of a range's digits (after the +): a country code at least,
// a whole number at most.
const (
	minRangeDigits = 1
	maxRangeDigits = 15
)

// guardFail reports a class's key (relative to the class) with its reason.
type guardFail func(field, format string, args ...any) ([]Class, error)

// guardOf checks a class's guard keys and returns its rules; fail names
// the file, the class and the key.
func guardOf(y guardYAML, fail guardFail) (*policy.Guard, error) {
	var g policy.Guard
	bad := func(field, format string, args ...any) (*policy.Guard, error) {
		_, err := fail(field, format, args...)
		return nil, err
	}
	if len(y.Countries) > 0 && len(y.DenyCountries) > 0 {
		return bad("deny_countries", "set countries (allowed) or deny_countries, not both")
	}
	for _, list := range []struct {
		key   string
		in    []string
		out   *[]string
		codes bool
	}{{"countries", y.Countries, &g.Countries, true}, {"deny_countries", y.DenyCountries, &g.DenyCountries, true}, {"allow_prefixes", y.AllowPrefixes, &g.AllowPrefixes, false}} {
		for i, v := range list.in {
			v = strings.TrimSpace(v)
			if !e164Prefix(v, list.codes) {
				want := "an E.164 prefix, + then 1 to 15 digits"
				if list.codes {
					want = "a country code, + then 1 to 3 digits"
				}
				return bad(fmt.Sprintf("%s[%d]", list.key, i), "want %s, got %q", want, v)
			}
			*list.out = append(*list.out, v)
		}
	}
	if r := y.MaxPerPrefix; r != nil {
		per, err := guardDuration(r.Per, "max_per_prefix.per", 0, bad)
		if err != nil {
			return nil, err
		}
		blockFor, err := guardDuration(r.BlockFor, "max_per_prefix.block_for", 0, bad)
		if err != nil {
			return nil, err
		}
		switch {
		case r.Digits < minRangeDigits || r.Digits > maxRangeDigits:
			return bad("max_per_prefix.digits", "want %d to %d digits after the +, got %d", minRangeDigits, maxRangeDigits, r.Digits)
		case r.Count < 1:
			return bad("max_per_prefix.count", "want at least 1 send, got %d", r.Count)
		}
		g.MaxPerPrefix = policy.PrefixRate{Digits: r.Digits, Count: r.Count, Per: per, BlockFor: blockFor}
	}
	if c := y.MinConversion; c != nil {
		per, err := guardDuration(c.Per, "min_conversion.per", 0, bad)
		if err != nil {
			return nil, err
		}
		blockFor, err := guardDuration(c.BlockFor, "min_conversion.block_for", 0, bad)
		if err != nil {
			return nil, err
		}
		grace, err := guardDuration(c.Grace, "min_conversion.grace", DefaultConversionGrace, bad)
		if err != nil {
			return nil, err
		}
		switch {
		case !(c.Ratio > 0 && c.Ratio <= 1):
			return bad("min_conversion.ratio", "want a share above 0 and at most 1, got %v", c.Ratio)
		case c.MinSends < 1:
			return bad("min_conversion.min_sends", "want at least 1 send, got %d", c.MinSends)
		case c.Digits < minRangeDigits || c.Digits > maxRangeDigits:
			return bad("min_conversion.digits", "want %d to %d digits after the +, got %d", minRangeDigits, maxRangeDigits, c.Digits)
		case grace >= per:
			return bad("min_conversion.grace", "%v leaves no send of per (%v) to judge: keep it under per", grace, per)
		}
		g.MinConversion = policy.Conversion{Ratio: c.Ratio, MinSends: c.MinSends, Digits: c.Digits, Per: per, Grace: grace, BlockFor: blockFor}
	}
	if !g.On() && len(g.AllowPrefixes) == 0 {
		return nil, nil
	}
	return &g, nil
}

// guardDuration parses a guard's duration at key; "" is def, or an error
// when def is 0 (required).
func guardDuration(v, key string, def time.Duration, bad func(string, string, ...any) (*policy.Guard, error)) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		if def > 0 {
			return def, nil
		}
		_, err := bad(key, "required: a duration such as 10m")
		return 0, err
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		_, err = bad(key, "want a duration such as 10m, got %q", v)
		return 0, err
	case d <= 0 || d > maxDuration:
		_, err = bad(key, "want a positive duration of at most %v, got %v", maxDuration, d)
		return 0, err
	}
	return d, nil
}

// e164Prefix reports whether s is + then 1 to 15 digits, or 1 to 3 for a
// country code.
func e164Prefix(s string, code bool) bool {
	most := maxRangeDigits
	if code {
		most = 3
	}
	if len(s) < 2 || len(s) > 1+most || s[0] != '+' {
		return false
	}
	return strings.Trim(s[1:], "0123456789") == ""
}
