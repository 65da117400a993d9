package provider

import (
	"slices"
	"time"
)

// MaxInAnyWindow returns the largest number of times that fall in one
// half-open window [t, t+w) of length w, for any t: the measure of "no
// window of any phase sees more than N". Times need not be sorted (an
// unsorted slice is sorted in a copy; times is never modified). It returns
// 0 if w is not positive or times is empty.
func MaxInAnyWindow(times []time.Time, w time.Duration) int {
	if w <= 0 || len(times) == 0 {
		return 0
	}
	if !slices.IsSortedFunc(times, time.Time.Compare) {
		times = slices.Clone(times)
		slices.SortFunc(times, time.Time.Compare)
	}
	// A set of times fits in some window [t, t+w) exactly when its last
	// and first are less than w apart: slide i so times[i..j] is the
	// largest such run ending at j.
	best, i := 0, 0
	for j := range times {
		for times[j].Sub(times[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}
