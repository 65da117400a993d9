//go:build !race

package dispatch

// raceDetector reports whether the tests run with the race detector: it
// slows three processes on one busy machine below some rates the tests
// measure, and stalls them for longer.
const raceDetector = false
