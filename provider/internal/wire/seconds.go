package wire

import (
	"strconv"
	"time"
)

// FormatSeconds writes d as a Retry-After in decimal seconds ("1",
// "0.25"), rounded up to the millisecond so that the caller never waits
// less than d.
func FormatSeconds(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
}
