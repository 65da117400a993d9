package provider

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
