package guard

import (
	"strconv"
	"strings"
	"time"

	"smsdispatcher/config/policy"
)

// The reasons a message is blocked, as its status event and
// sms_blocked_total say them.
const (
	ReasonGeo        = "geo"         // its country is not allowed
	ReasonPrefixRate = "prefix_rate" // its range passed max_per_prefix
	ReasonConversion = "conversion"  // its range's codes are not used
	ReasonOperator   = "operator"    // an operator blocked its range
)

// A Block is a blocked range of a class: the digits after the + its
// numbers begin with, why, until when, and the figures that set it (the
// sends counted, and the verified ones for a conversion block).
type Block struct {
	Range    string
	Reason   string
	Until    time.Time
	Sends    int
	Verified int
}

// encode is b as the blocks hash keeps it: "reason until_ms sends
// verified" (sent.lua writes the same).
func (b Block) encode() string {
	return b.Reason + " " + strconv.FormatInt(b.Until.UnixMilli(), 10) + " " + strconv.Itoa(b.Sends) + " " + strconv.Itoa(b.Verified)
}

// decodeBlock reads the blocks hash's field r of value v; ok is false for
// a value it cannot read.
func decodeBlock(r, v string) (Block, bool) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return Block{}, false
	}
	until, err1 := strconv.ParseInt(f[1], 10, 64)
	sends, err2 := strconv.Atoi(f[2])
	verified, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return Block{}, false
	}
	return Block{Range: r, Reason: f[0], Until: time.UnixMilli(until), Sends: sends, Verified: verified}, true
}

// Range is the range of digits digits of number to ("+447700900123", 6:
// "447700"), "" when the number is shorter or not E.164.
func Range(to string, digits int) string {
	if digits <= 0 || len(to) < 1+digits || to[0] != '+' {
		return ""
	}
	return to[1 : 1+digits]
}

// decide is the reason g and blocks block a message to number to at now,
// "" when it passes: a country outside g's, then an operator's block of a
// range of to, then (unless to is in one of g's allowed prefixes) an
// automatic block.
func decide(g *policy.Guard, blocks map[string]Block, to string, now time.Time) string {
	if !g.On() && len(blocks) == 0 {
		return ""
	}
	if g != nil && !countryAllowed(g, to) {
		return ReasonGeo
	}
	if len(blocks) == 0 || len(to) < 2 {
		return ""
	}
	allowed := g != nil && hasPrefix(to, g.AllowPrefixes)
	digits := to[1:]
	for r, b := range blocks {
		if !strings.HasPrefix(digits, r) || !now.Before(b.Until) {
			continue
		}
		if b.Reason == ReasonOperator || !allowed {
			return b.Reason
		}
	}
	return ""
}

// countryAllowed reports whether g lets a message go to to's country:
// E.164's country codes are a prefix code, so a number is in a country
// exactly when it begins with the code.
func countryAllowed(g *policy.Guard, to string) bool {
	switch {
	case len(g.Countries) > 0:
		return hasPrefix(to, g.Countries)
	case len(g.DenyCountries) > 0:
		return !hasPrefix(to, g.DenyCountries)
	}
	return true
}

func hasPrefix(to string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(to, p) {
			return true
		}
	}
	return false
}

// counted is what sent.lua is told of one send of to: the ranges of g's
// rules it counts in ("" for a rule g does not have); none at all for a
// number in an allowed prefix.
func counted(g *policy.Guard, to string) (rate, conv string) {
	if g == nil || hasPrefix(to, g.AllowPrefixes) {
		return "", ""
	}
	if g.MaxPerPrefix.Count > 0 {
		rate = Range(to, g.MaxPerPrefix.Digits)
	}
	if g.MinConversion.MinSends > 0 {
		conv = Range(to, g.MinConversion.Digits)
	}
	return rate, conv
}
