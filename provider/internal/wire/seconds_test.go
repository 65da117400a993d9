package wire

import (
	"testing"
	"time"
)

func TestFormatSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second:                 "1",
		250 * time.Millisecond:      "0.25",
		1500 * time.Millisecond:     "1.5",
		100 * time.Millisecond:      "0.1",
		time.Nanosecond:             "0.001", // rounded up
		0:                           "0",
		time.Hour + time.Nanosecond: "3600.001",
	} {
		if got := FormatSeconds(d); got != want {
			t.Errorf("FormatSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}
