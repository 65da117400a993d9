package provider

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the fixed instant the tests count from: a whole second, so fixed
// windows with Phase 0 start on it.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock stopped at one instant, so that what an adapter
// stamps or compares with the time is the same on every run.
type fakeClock struct{ t time.Time }

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time { return c.t }
