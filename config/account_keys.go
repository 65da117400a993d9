package config

// The values of an account's optional keys in ACCOUNTS_FILE, each checked
// and converted on its own: the keyword lists of its inbound replies, its
// sender pool and its adaptive (learned) rate.

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"smsdispatcher/admission"
)

// keywords checks an account's keyword lists, given in that order, and
// returns them upper case: a list given is not empty, each word has a
// letter or digit, and no word is in two lists (a reply must say one
// thing). A list left out stays nil.
func keywords(lists ...[]string) (optOut, optIn, help []string, err error) {
	names := []string{"opt_out_keywords", "opt_in_keywords", "help_keywords"}
	seen := map[string]string{}
	out := make([][]string, len(lists))
	for i, list := range lists {
		if list == nil {
			continue
		}
		if len(list) == 0 {
			return nil, nil, nil, keyErrorf(names[i], "empty: leave the key out for the defaults")
		}
		for _, w := range list {
			word := strings.ToUpper(strings.TrimSpace(w))
			if !strings.ContainsFunc(word, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) {
				return nil, nil, nil, keyErrorf(names[i], "%q is no word: a keyword has a letter or a digit", w)
			}
			if other, ok := seen[word]; ok {
				return nil, nil, nil, keyErrorf(names[i], "%s is in %s too: a reply must say one thing", word, other)
			}
			seen[word] = names[i]
			out[i] = append(out[i], word)
		}
	}
	return out[0], out[1], out[2], nil
}

// senders checks an account's sender pool; rates are in unit.
func senders(list []senderYAML, unit string) ([]admission.Sender, error) {
	if len(list) > admission.MaxPoolSize {
		return nil, keyErrorf("senders", "%d senders: a pool holds at most %d", len(list), admission.MaxPoolSize)
	}
	var out []admission.Sender
	seen := map[string]int{}
	rates := map[float64]int{}
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
		if _, ok := rates[*s.RPS]; !ok && len(rates) == admission.MaxPoolRates {
			return nil, keyErrorf(key+".rps", "%v makes %d different rates: a pool has at most %d", *s.RPS, len(rates)+1, admission.MaxPoolRates)
		}
		rates[*s.RPS] = j
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

// Bounds of the adaptive durations.
const (
	minProbeInterval = time.Second
	// minAdaptiveStep: a step shorter than the time a rate a little above
	// the provider's limit takes to draw a 429 (about a second at a
	// sliding second) would prove that rate good and settle above the
	// limit.
	minAdaptiveStep = time.Second
)
