package config

// A class's send windows and per-recipient cap in ACCOUNTS_FILE's
// classes: send_hours, send_hours_by_prefix, default_zone, closed_dates,
// closed_dates_by_prefix, max_per_recipient and release_spread
// (docs/windows.md).

import (
	"sort"
	"strings"
	"time"

	"smsdispatcher/config/policy"
	"smsdispatcher/window"
)

// sending checks c's send windows and cap and returns them; the zero
// value when c has none. An error is a *keyError naming the key.
func sending(c classYAML) (policy.Sending, error) {
	var s policy.Sending
	w, err := windows(c)
	if err != nil {
		return s, err
	}
	if w != nil {
		s.Window = w
	}
	if c.MaxPerRecipient != nil {
		if s.Cap, err = recipientCap(*c.MaxPerRecipient); err != nil {
			return s, err
		}
	}
	if v := strings.TrimSpace(c.ReleaseSpread); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 24*time.Hour {
			return s, keyErrorf("release_spread", "want a duration from 0s to 24h such as 10m, got %q", v)
		}
		s.ReleaseSpread = d
	} else if w != nil || s.Cap.Count > 0 {
		s.ReleaseSpread = policy.DefaultReleaseSpread
	}
	return s, nil
}

// windows returns c's send windows, nil when it sets no key of them.
func windows(c classYAML) (*window.Windows, error) {
	if c.SendHours == "" && len(c.SendHoursByPrefix) == 0 {
		switch {
		case c.DefaultZone != "":
			return nil, keyErrorf("default_zone", "set without send_hours or send_hours_by_prefix: it would judge nothing")
		case len(c.ClosedDates) > 0 || len(c.ClosedDatesByPrefix) > 0:
			return nil, keyErrorf("closed_dates", "set without send_hours or send_hours_by_prefix: write send_hours: 00:00-24:00 to close only those dates")
		}
		return nil, nil
	}
	w := &window.Windows{Default: time.UTC}
	if c.DefaultZone != "" {
		loc, err := window.ParseZone(c.DefaultZone)
		if err != nil {
			return nil, keyErrorf("default_zone", "%v", err)
		}
		w.Default = loc
	}
	closed, err := dates("closed_dates", c.ClosedDates)
	if err != nil {
		return nil, err
	}
	base := "00:00-24:00" // a class of prefixes only is open elsewhere at any hour
	if c.SendHours != "" {
		base = c.SendHours
	}
	h, err := window.ParseHours(base)
	if err != nil {
		return nil, keyErrorf("send_hours", "%v", err)
	}
	w.Rule = window.Rule{Hours: h, Closed: closed}
	for p := range c.ClosedDatesByPrefix {
		if _, ok := c.SendHoursByPrefix[p]; !ok {
			c.SendHoursByPrefix = mapWith(c.SendHoursByPrefix, p, base)
		}
	}
	for _, p := range sortedStrings(c.SendHoursByPrefix) {
		key := "send_hours_by_prefix." + p
		if !validPrefix(p) {
			return nil, keyErrorf(key, "want an E.164 prefix: + then 1 to %d digits", maxPrefixDigits)
		}
		h, err := window.ParseHours(c.SendHoursByPrefix[p])
		if err != nil {
			return nil, keyErrorf(key, "%v", err)
		}
		own, err := dates("closed_dates_by_prefix."+p, c.ClosedDatesByPrefix[p])
		if err != nil {
			return nil, err
		}
		if w.ByPrefix == nil {
			w.ByPrefix = map[string]window.Rule{}
		}
		w.ByPrefix[p] = window.Rule{Hours: h, Closed: append(append([]string(nil), closed...), own...)}
	}
	return w, nil
}

func dates(key string, list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	for _, d := range list {
		d = strings.TrimSpace(d)
		if err := window.ParseDate(d); err != nil {
			return nil, keyErrorf(key, "%v", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// recipientCap checks max_per_recipient.
func recipientCap(c capYAML) (policy.Cap, error) {
	per, err := time.ParseDuration(strings.TrimSpace(c.Per))
	switch {
	case c.Count < 1 || c.Count > 1000:
		return policy.Cap{}, keyErrorf("max_per_recipient.count", "want 1 to 1000 sends, got %d", c.Count)
	case err != nil || per < time.Second || per > 31*24*time.Hour:
		return policy.Cap{}, keyErrorf("max_per_recipient.per", "want a duration from 1s to 744h such as 24h, got %q", c.Per)
	}
	k := policy.Cap{Count: c.Count, Per: per}
	switch strings.TrimSpace(c.OnCap) {
	case "", "defer":
	case "drop":
		k.Drop = true
	default:
		return policy.Cap{}, keyErrorf("max_per_recipient.on_cap", "want defer or drop, got %q", c.OnCap)
	}
	return k, nil
}

func mapWith(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

func sortedStrings(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
