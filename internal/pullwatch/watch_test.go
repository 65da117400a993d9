package pullwatch

import (
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"smsdispatcher/admission"
)

// TestPullWatchSilence: what counts as an answer from Pub/Sub, on fixed
// instants. A healthy idle stream (its pings answered) and a fresh one are
// never silent; a Pub/Sub that refuses streams, breaks them, or takes
// them and never answers is silent Silence after its last answer.
func TestPullWatchSilence(t *testing.T) {
	const sub = "projects/p/subscriptions/s"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	unavailable := status.Error(codes.Unavailable, "connection refused")

	type step func(t *testing.T, w *Watch, streams map[int]*watchedStream)
	open := func(n int, s float64) step {
		return func(_ *testing.T, w *Watch, ss map[int]*watchedStream) {
			ss[n] = &watchedStream{}
			w.mu.Lock()
			w.subs[sub].open[ss[n]] = struct{}{}
			w.mu.Unlock()
		}
	}
	ping := func(n int, s float64) step {
		return func(_ *testing.T, w *Watch, ss map[int]*watchedStream) { w.sent(at(s), sub, ss[n]) }
	}
	answer := func(n int, s float64) step {
		return func(_ *testing.T, w *Watch, ss map[int]*watchedStream) { w.answered(at(s), sub, ss[n]) }
	}
	end := func(n int, s float64, err error) step {
		return func(_ *testing.T, w *Watch, ss map[int]*watchedStream) { w.ended(at(s), sub, ss[n], err) }
	}
	refused := func(s float64) step {
		return func(_ *testing.T, w *Watch, ss map[int]*watchedStream) { w.ended(at(s), sub, nil, unavailable) }
	}

	silent := func(s float64, want bool) step {
		return func(t *testing.T, w *Watch, _ map[int]*watchedStream) {
			if d, got := w.Silent(sub, at(s)); got != want {
				t.Errorf("at %vs: silent %v (for %v), want %v", s, got, d, want)
			}
		}
	}

	tests := []struct {
		name  string
		steps []step
	}{
		{"fresh stream, no ping yet", []step{open(1, 0.1), silent(29, false), silent(45, false)}},
		{"idle stream, pings answered", []step{open(1, 0.1), ping(1, 30.1), silent(30.15, false), answer(1, 30.2),
			ping(1, 60.1), silent(60.15, false), answer(1, 60.2), ping(1, 90.1), silent(90.19, false),
			silent(120.09, false), silent(120.1, true)}},
		{"nothing listens: no stream ever opens", []step{refused(0.1), refused(1), silent(29.9, false), refused(3), silent(30, true)}},
		{"Pub/Sub stopped: the stream breaks, none opens again", []step{open(1, 0.1), answer(1, 5), end(1, 10, unavailable),
			refused(11), silent(34.9, false), silent(35, true)}},
		{"a stream broken after answers is replaced at once", []step{open(1, 0.1), answer(1, 5), end(1, 100, unavailable),
			open(2, 100.1), silent(100.1, false), silent(200, false)}},
		{"streams taken and never answered", []step{open(1, 0.1), ping(1, 30.1), silent(45, false), end(1, 45, io.EOF),
			open(2, 45.1), silent(45.2, true), silent(60, true)}},
		{"subscription refused after the stream opened (NotFound)", []step{open(1, 0.1),
			end(1, 0.2, status.Error(codes.NotFound, "Resource not found")), open(2, 1.2), silent(29.9, false), silent(30, true)}},
		{"the lane ends its own stream (a pause)", []step{open(1, 0.1), end(1, 10, status.Error(codes.Canceled, "context canceled")),
			open(2, 12), silent(45, false)}},
		{"the lane holds its pulls (an account pause)", []step{open(1, 0.1), answer(1, 5), end(1, 10, status.Error(codes.Canceled, "context canceled")),
			silent(100, false), refused(101), silent(101, true)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(t0, map[string]admission.Class{sub: admission.OTP}, nil)
			ss := map[int]*watchedStream{}
			for _, s := range tt.steps {
				s(t, w, ss)
			}
		})
	}
}

// TestPullWatchCountsAndLogsOnceAMinute: failed streams are counted by
// code (not those the process ended itself), and a silent subscription
// is reported once a minute with the failures since the last report.
func TestPullWatchCountsAndLogsOnceAMinute(t *testing.T) {
	const sub = "projects/p/subscriptions/s"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	counted := map[codes.Code]int{}
	w := New(t0, map[string]admission.Class{sub: admission.Marketing}, func(c admission.Class, code codes.Code) {
		if c != admission.Marketing {
			t.Errorf("class %v", c)
		}
		counted[code]++
	})
	unavailable := status.Error(codes.Unavailable, "connection refused")
	for i := range 3 {
		w.ended(t0.Add(time.Duration(i)*time.Second), sub, nil, unavailable)
	}
	w.ended(t0, sub, &watchedStream{answered: true}, status.Error(codes.Canceled, "context canceled"))
	w.ended(t0, sub, &watchedStream{answered: true}, io.EOF)
	if counted[codes.Unavailable] != 3 || len(counted) != 1 {
		t.Fatalf("counted %v, want 3 Unavailable only", counted)
	}

	reports := func(s int) []report { return w.due(t0.Add(time.Duration(s) * time.Second)) }
	if r := reports(29); len(r) != 0 {
		t.Fatalf("reported before Silence: %+v", r)
	}
	r := reports(30)
	if len(r) != 1 || r[0].name != sub || r[0].errors != 3 || !errors.Is(r[0].lastErr, unavailable) {
		t.Fatalf("at 30s: %+v, want one report of 3 failures, Unavailable", r)
	}
	for _, s := range []int{31, 60, 89} {
		if r := reports(s); len(r) != 0 {
			t.Fatalf("reported again at %ds: %+v", s, r)
		}
	}
	if r := reports(90); len(r) != 1 || r[0].errors != 0 {
		t.Fatalf("at 90s: %+v, want one report, no failure since the last", r)
	}
	w.ended(t0.Add(95*time.Second), sub, nil, unavailable)
	if r := reports(150); len(r) != 1 || r[0].errors != 1 {
		t.Fatalf("at 150s: %+v, want one report of the failure since", r)
	}
}
