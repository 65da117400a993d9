package provider

import (
	"net/http"
	"strings"
	"time"

	"smsdispatcher/provider/internal/wire"
)

const (
	// DefaultRetryAfter is how long a 429 asks the caller to wait when its
	// Retry-After header is missing, negative or does not parse
	// (docs/contract.md section 3: "missing or unreadable means 1 s").
	DefaultRetryAfter = time.Second

	// MaxRetryAfter caps any Retry-After as read: a provider answering
	// "wait a year" is broken, and a day is already far past the account's
	// longest penalty (a 60-minute suspension). The limiter caps the stop
	// it causes further, at MAX_RETRY_AFTER (admission.Config.MaxRetryAfter,
	// default 5 m).
	MaxRetryAfter = 24 * time.Hour
)

// ParseRetryAfter reads the value of a Retry-After header, relative to now
// for the HTTP-date form. It accepts integer seconds ("3"), decimal seconds
// ("0.5", "1.", ".25"; digits past nanoseconds are dropped) and an HTTP-date
// ("Sun, 06 Nov 1994 08:49:37 GMT" and the two obsolete forms http.ParseTime
// knows). Surrounding spaces are ignored.
//
// The result is never negative and never above MaxRetryAfter: a date in the
// past gives 0 and true; larger values are capped. The bool is false, and
// the duration 0, when v is empty, negative or not one of those forms; the
// caller then uses DefaultRetryAfter.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if d, ok := parseSeconds(v); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return clampRetryAfter(t.Sub(now)), true
}

// parseSeconds reads digits with at most one '.', by hand: strconv.ParseFloat
// would also take "-1", "1e3", "inf", "0x1p3" and round binary fractions.
func parseSeconds(v string) (time.Duration, bool) {
	intPart, frac, hasDot := strings.Cut(v, ".")
	if intPart == "" && frac == "" {
		return 0, false
	}
	if !wire.AllDigits(intPart) || (hasDot && !wire.AllDigits(frac)) {
		return 0, false
	}
	const maxSeconds = int64(MaxRetryAfter / time.Second)
	var secs int64
	for i := 0; i < len(intPart); i++ {
		secs = secs*10 + int64(intPart[i]-'0')
		if secs > maxSeconds {
			return MaxRetryAfter, true
		}
	}
	var nanos int64
	for i := range 9 {
		nanos *= 10
		if i < len(frac) {
			nanos += int64(frac[i] - '0')
		}
	}
	return clampRetryAfter(time.Duration(secs)*time.Second + time.Duration(nanos)), true
}

func clampRetryAfter(d time.Duration) time.Duration {
	return min(max(d, 0), MaxRetryAfter)
}
