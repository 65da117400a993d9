package providertest

import (
	"slices"
	"testing"
	"time"
)

func TestMaxInAnyWindow(t *testing.T) {
	ms := time.Millisecond
	at := func(offsets ...time.Duration) []time.Time {
		ts := make([]time.Time, len(offsets))
		for i, o := range offsets {
			ts[i] = t0.Add(o)
		}
		return ts
	}
	tests := []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"empty", nil, time.Second, 0},
		{"one", at(0), time.Second, 1},
		{"zero window", at(0, 0, 0), 0, 0},
		{"negative window", at(0, 1), -time.Second, 0},
		{"same instant", at(0, 0, 0, 0, 0), time.Nanosecond, 5},
		{"just inside", at(0, 999*ms, 999*ms+999999), time.Second, 3},
		{"end excluded", at(0, time.Second), time.Second, 1},
		{"one apart each", at(0, time.Second, 2*time.Second), time.Second, 1},
		{"any phase", at(0, 600*ms, 1200*ms, 1400*ms), time.Second, 3},
		{"burst across a fixed boundary", at(900*ms, 950*ms, 1000*ms, 1050*ms), time.Second, 4},
		{"unsorted", at(1400*ms, 0, 1200*ms, 600*ms), time.Second, 3},
		{"long window", at(0, time.Minute, 2*time.Minute), time.Hour, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.times)
			if got := MaxInAnyWindow(tt.times, tt.w); got != tt.want {
				t.Errorf("MaxInAnyWindow = %d, want %d", got, tt.want)
			}
			if !slices.Equal(in, tt.times) {
				t.Error("MaxInAnyWindow modified its input")
			}
		})
	}
}

// TestMaxInWindow checks MaxInWindow on a hand-made list, including the
// edge the Simulator's sliding window defines: a is accepted at t0 and at
// t0+1s, exactly a window apart, which never share a window.
func TestMaxInWindow(t *testing.T) {
	ms := time.Millisecond
	const a, b = "+12025550101", "+18885550100"
	arr := func(at time.Duration, from string, segments int, outcome string) Arrival {
		return Arrival{At: t0.Add(at), From: from, Segments: segments, Outcome: outcome, Status: 200}
	}
	arrivals := []Arrival{
		arr(0, a, 1, "accepted"),
		arr(0, "", 1, "accepted"),
		arr(100*ms, b, 1, "accepted"),
		arr(200*ms, b, 1, "accepted"),
		arr(300*ms, b, 1, "accepted"),
		arr(500*ms, a, 2, "accepted"),
		arr(600*ms, a, 5, "throttled"), // not a send
		arr(700*ms, a, 5, "duplicate"), // not a send either
		arr(800*ms, b, 5, "refused"),
		arr(time.Second, a, 1, "accepted"),
	}
	tests := []struct {
		name       string
		m          Window
		want       int
		wantSender string
	}{
		// [t0, t0+1s) holds all the accepted but a's at t0+1s.
		{"account", Window{Length: time.Second}, 6, ""},
		{"account in segments", Window{Length: time.Second, Segments: true}, 7, ""},
		// a: t0 and t0+500ms, or t0+500ms and t0+1s; never all three.
		{"by sender", Window{Length: time.Second, BySender: true}, 3, b},
		// a: 1+2 or 2+1, b: 3: a tie, won by the least sender.
		{"by sender in segments", Window{Length: time.Second, BySender: true, Segments: true}, 3, a},
		{"just over the window", Window{Length: time.Second + 1, BySender: true, Segments: true}, 4, a},
		{"short window", Window{Length: 150 * ms, BySender: true}, 2, b},
		{"instant", Window{Length: time.Nanosecond}, 2, ""},
		{"zero window", Window{BySender: true}, 0, ""},
		{"negative window", Window{Length: -time.Second}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, in := range [][]Arrival{arrivals, reversed(arrivals)} {
				before := slices.Clone(in)
				most, sender := MaxInWindow(in, tt.m)
				if most != tt.want || sender != tt.wantSender {
					t.Errorf("MaxInWindow = %d, %q; want %d, %q", most, sender, tt.want, tt.wantSender)
				}
				if !slices.Equal(before, in) {
					t.Error("MaxInWindow modified its input")
				}
			}
		})
	}
	if most, sender := MaxInWindow(nil, Window{Length: time.Second, BySender: true}); most != 0 || sender != "" {
		t.Errorf("MaxInWindow(nil) = %d, %q; want 0, \"\"", most, sender)
	}
	// Segments below 1 count as 1, as the Simulator counts a body it could not read.
	zero := []Arrival{arr(0, a, 0, "accepted"), arr(0, a, 0, "accepted")}
	if most, _ := MaxInWindow(zero, Window{Length: time.Second, Segments: true}); most != 2 {
		t.Errorf("MaxInWindow(0 segments each) = %d, want 2", most)
	}
}

func reversed[T any](s []T) []T {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

func TestRing(t *testing.T) {
	r := newRing[int](3)
	for i := range 5 {
		r.push(i)
	}
	if got := r.appendValues(nil); !slices.Equal(got, []int{2, 3, 4}) {
		t.Errorf("after 5 pushes into 3: %v", got)
	}
	r.popFront()
	r.push(5)
	if got := r.appendValues(nil); !slices.Equal(got, []int{3, 4, 5}) || r.front() != 3 {
		t.Errorf("after pop and push: %v", got)
	}
	r.reset()
	if r.len() != 0 {
		t.Errorf("len after reset = %d", r.len())
	}
	big := newRing[int](1000)
	for i := range 100 {
		big.push(i)
		if i%3 == 0 {
			big.popFront()
		}
	}
	if big.len() != 66 || big.front() != 34 {
		t.Errorf("growing ring: len %d, front %d; want 66, 34", big.len(), big.front())
	}
}
