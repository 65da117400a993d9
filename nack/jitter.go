package nack

import (
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

var _ backoff.BackOff = (*FullJitter)(nil)

// FullJitter is a backoff.BackOff whose NextBackOff returns a uniformly
// random duration in [0, cap], where cap is the next value of an exponential
// backoff without jitter: initial, then doubling at each call, capped at
// maxInterval.
// It never returns backoff.Stop. ("Full jitter" spreads retries of many
// clients over the whole interval; backoff.ExponentialBackOff's
// RandomizationFactor only spreads them around the cap.)
//
// A FullJitter is not safe for concurrent use: give each retrying loop its
// own.
type FullJitter struct {
	caps *backoff.ExponentialBackOff // RandomizationFactor 0: yields the caps
	rand func() float64
}

// JitterOption configures a FullJitter.
type JitterOption func(*FullJitter)

// WithRand makes FullJitter draw its random numbers from f, which should
// return values in [0, 1); values outside [0, 1] are clamped to it. The
// default is math/rand/v2's Float64. Tests inject a fixed value.
func WithRand(f func() float64) JitterOption {
	return func(j *FullJitter) { j.rand = f }
}

// NewFullJitter returns a FullJitter whose caps start at initial and double
// up to maxInterval. An initial above maxInterval is lowered to it; an
// initial or maxInterval of zero or less makes every wait zero.
func NewFullJitter(initial, maxInterval time.Duration, opts ...JitterOption) *FullJitter {
	maxInterval = max(maxInterval, 0)
	initial = min(max(initial, 0), maxInterval)
	j := &FullJitter{
		caps: backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(initial),
			backoff.WithRandomizationFactor(0),
			backoff.WithMultiplier(2),
			backoff.WithMaxInterval(maxInterval),
			backoff.WithMaxElapsedTime(0),
			// With MaxElapsedTime 0 the clock is never consulted for a
			// decision; a fixed one keeps the wall clock out entirely.
			backoff.WithClockProvider(fixedClock{}),
		),
		rand: rand.Float64,
	}
	for _, opt := range opts {
		opt(j)
	}
	return j
}

// NextBackOff returns the next wait, uniformly random in [0, cap].
func (j *FullJitter) NextBackOff() time.Duration {
	c := j.caps.NextBackOff()
	r := j.rand()
	switch {
	case !(r > 0): // also NaN
		return 0
	case r >= 1:
		return c
	}
	// Above 2^53 ns float64 cannot hold c exactly; min keeps a rounding
	// up from ever exceeding the cap.
	return min(time.Duration(r*float64(c)), c)
}

// Reset starts the caps again from initial.
func (j *FullJitter) Reset() { j.caps.Reset() }

// fixedClock is a backoff.Clock that never moves.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Time{} }
