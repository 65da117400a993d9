package providertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"smsdispatcher/provider"
)

const validBody = `{"to":"+819012345678","body":"Your code is 482913","client_ref":"%s"}`

// simRequest builds a valid request for id; edit it to make it invalid.
func simRequest(id string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(fmt.Sprintf(validBody, id)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+testToken)
	r.Header.Set("Idempotency-Key", id)
	return r
}

// serve runs r through s on the test goroutine and returns the answer.
func serve(t *testing.T, s *Simulator, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// step is one request at t0+at and the answer it must get.
type step struct {
	at         time.Duration
	id         string
	want       int
	retryAfter string // for 429: the header, "-" for none
}

// run plays steps against s, moving clock to each instant.
func run(t *testing.T, s *Simulator, clock *fakeClock, steps []step) {
	t.Helper()
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		id := st.id
		if id == "" {
			id = fmt.Sprintf("m-%d", i)
		}
		w := serve(t, s, simRequest(id))
		if w.Code != st.want {
			t.Errorf("step %d (t0+%v, %s): status %d, want %d (%s)", i, st.at, id, w.Code, st.want, strings.TrimSpace(w.Body.String()))
		}
		if st.retryAfter != "" {
			got, ok := w.Header()["Retry-After"]
			switch {
			case st.retryAfter == "-" && ok:
				t.Errorf("step %d: Retry-After %q, want none", i, got)
			case st.retryAfter != "-" && (len(got) != 1 || got[0] != st.retryAfter):
				t.Errorf("step %d: Retry-After %q, want %q", i, got, st.retryAfter)
			}
		}
	}
}

func newSim(cfg Config) (*Simulator, *fakeClock) {
	clock := newFakeClock(t0)
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	return NewGeneric(cfg, WithClock(clock.Now)), clock
}

func TestSimulatorSlidingWindow(t *testing.T) {
	ms := time.Millisecond
	s, clock := newSim(Config{Limit: 3, Window: time.Second, RetryAfter: 250 * ms})
	run(t, s, clock, []step{
		{at: 0, want: 200},
		{at: 100 * ms, want: 200},
		{at: 200 * ms, want: 200},
		{at: 999 * ms, want: 429, retryAfter: "0.25"},                            // 3 in (t0-1s+999ms, ...]
		{at: time.Second - time.Nanosecond, want: 429},                           // t0 still inside by 1ns
		{at: time.Second, want: 200},                                             // t0 has left: [t0+1s-1s, ...) is half-open
		{at: time.Second, want: 429},                                             // t0+100ms still inside
		{at: 1100*ms - time.Nanosecond, want: 429},                               //
		{at: 1100 * ms, want: 200},                                               // t0+100ms has left
		{at: 1200 * ms, want: 200},                                               // t0+200ms has left
		{at: 1300 * ms, want: 429},                                               // 1s, 1.1s, 1.2s inside
		{at: 10 * time.Second, want: 200},                                        // long quiet: all left
		{at: 10*time.Second + 1, want: 200}, {at: 10*time.Second + 2, want: 200}, // a burst of Limit at once is fine
		{at: 10*time.Second + 3, want: 429},
	})
	st := s.Stats()
	if st.Accepted != 9 || st.Throttled != 6 || st.MaxInWindow != 3 {
		t.Errorf("stats %+v; want 9 accepted, 6 throttled, max 3 in a window", st)
	}
	// The Simulator's measure agrees with MaxInAnyWindow over what it accepted.
	var accepted []time.Time
	for _, a := range s.Arrivals() {
		if a.Status == http.StatusOK {
			accepted = append(accepted, a.At)
		}
	}
	if got := MaxInAnyWindow(accepted, time.Second); got != 3 {
		t.Errorf("MaxInAnyWindow(accepted, 1s) = %d, want 3", got)
	}
}

func TestSimulatorFixedWindow(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		phase time.Duration
		steps []step
	}{
		{"phase 250ms", 250 * ms, []step{
			{at: 0, want: 200},         // window [t0-750ms, t0+250ms)
			{at: 249 * ms, want: 200},  //
			{at: 249 * ms, want: 429},  // full
			{at: 250 * ms, want: 200},  // new window [t0+250ms, t0+1250ms)
			{at: 1249 * ms, want: 200}, // 2 in it
			{at: 1249 * ms, want: 429},
			{at: 1250 * ms, want: 200}, // new window again
		}},
		{"phase 0", 0, []step{
			{at: 999 * ms, want: 200},
			{at: 999 * ms, want: 200},
			{at: 999 * ms, want: 429},
			{at: time.Second, want: 200},
			{at: time.Second, want: 200},
		}},
		{"negative phase is taken modulo the window", -750 * ms, []step{
			{at: 0, want: 200},
			{at: 249 * ms, want: 200},
			{at: 249 * ms, want: 429},
			{at: 250 * ms, want: 200},
		}},
		{"phase longer than the window", 3250 * ms, []step{
			{at: 0, want: 200},
			{at: 249 * ms, want: 200},
			{at: 249 * ms, want: 429},
			{at: 250 * ms, want: 200},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, clock := newSim(Config{Limit: 2, Window: time.Second, Fixed: true, Phase: tt.phase})
			run(t, s, clock, tt.steps)
			if st := s.Stats(); st.MaxInWindow != 2 {
				t.Errorf("MaxInWindow = %d, want 2", st.MaxInWindow)
			}
		})
	}
	// A fixed window lets 2*Limit through around its edge; a sliding
	// measure catches it.
	s, clock := newSim(Config{Limit: 2, Window: time.Second, Fixed: true, Phase: 250 * ms})
	run(t, s, clock, []step{
		{at: 249 * ms, want: 200}, {at: 249 * ms, want: 200},
		{at: 250 * ms, want: 200}, {at: 250 * ms, want: 200},
	})
	var times []time.Time
	for _, a := range s.Arrivals() {
		if a.Status == 200 {
			times = append(times, a.At)
		}
	}
	if got := MaxInAnyWindow(times, time.Second); got != 4 {
		t.Errorf("MaxInAnyWindow over fixed-window acceptances = %d, want 4", got)
	}
}

func TestSimulatorThrottleNext(t *testing.T) {
	s, clock := newSim(Config{})
	s.ThrottleNext(2, 1500*time.Millisecond)
	run(t, s, clock, []step{
		{want: 429, retryAfter: "1.5"},
		{want: 429, retryAfter: "1.5"},
		{want: 200},
	})
	s.ThrottleNext(1, -1)
	run(t, s, clock, []step{{want: 429, retryAfter: "-"}, {want: 200}})
	s.ThrottleNext(3, time.Second)
	s.ThrottleNext(0, 0) // cancels
	run(t, s, clock, []step{{want: 200}})
	if st := s.Stats(); st.Throttled != 3 || st.Accepted != 3 {
		t.Errorf("stats %+v; want 3 throttled, 3 accepted", st)
	}
}

func TestSimulatorFailFor(t *testing.T) {
	s, clock := newSim(Config{})
	s.FailFor(http.StatusServiceUnavailable, 2*time.Second)
	run(t, s, clock, []step{
		{at: 0, want: 503},
		{at: 2*time.Second - 1, want: 503},
		{at: 2 * time.Second, want: 200},
	})
	clock.Set(t0.Add(10 * time.Second))
	s.FailFor(http.StatusInternalServerError, time.Hour)
	s.FailFor(http.StatusInternalServerError, 0) // stops failing
	run(t, s, clock, []step{{at: 10 * time.Second, want: 200}})
	s.FailFor(42, time.Minute) // not a status net/http can write
	run(t, s, clock, []step{{at: 10 * time.Second, want: 500}})
	if st := s.Stats(); st.Failed != 3 || st.Accepted != 2 {
		t.Errorf("stats %+v; want 3 failed, 2 accepted", st)
	}
}

func TestSimulatorSuspension(t *testing.T) {
	ms := time.Millisecond
	s, clock := newSim(Config{Limit: 1, SuspendAfter: 3, SuspendWindow: 10 * time.Second, SuspendFor: time.Minute})
	run(t, s, clock, []step{
		{at: 0, want: 200},
		{at: 1 * ms, want: 429}, // 1st 429
		{at: 2 * ms, want: 429},
		{at: 3 * ms, want: 429},
	})
	if st := s.Stats(); st.Suspended {
		t.Fatalf("suspended after SuspendAfter 429s: %+v", st)
	}
	run(t, s, clock, []step{{at: 4 * ms, want: 429}}) // the 4th: more than 3
	if st := s.Stats(); !st.Suspended || st.Suspensions != 1 || st.Throttled != 4 {
		t.Fatalf("stats %+v; want suspended once after 4 throttles", st)
	}
	run(t, s, clock, []step{
		{at: 2 * time.Second, want: 429, retryAfter: "58.004"}, // the rate would allow it
		{at: time.Minute + 4*ms - 1, want: 429},
		{at: time.Minute + 4*ms, want: 200}, // over
	})
	st := s.Stats()
	if st.Suspended || st.SuspendedAnswers != 2 || st.Throttled != 4 || st.Accepted != 2 {
		t.Errorf("stats %+v; want not suspended, 2 suspended answers, 4 throttled, 2 accepted", st)
	}
}

func TestSimulatorSuspensionWindow(t *testing.T) {
	s, clock := newSim(Config{SuspendAfter: 1, SuspendWindow: 10 * time.Second})
	force := func(at time.Duration) {
		t.Helper()
		s.ThrottleNext(1, time.Second)
		run(t, s, clock, []step{{at: at, want: 429}})
	}
	force(0)
	force(10 * time.Second) // the first has left the window: 1 in it
	if s.Stats().Suspended {
		t.Fatal("suspended by 429s 10s apart in a 10s window")
	}
	force(10*time.Second + time.Millisecond) // 2 within 10s: more than 1
	if st := s.Stats(); !st.Suspended || st.Throttled != 3 {
		t.Errorf("stats %+v; want suspended after 2 429s within the window", st)
	}

	never, clock2 := newSim(Config{SuspendAfter: -1})
	never.ThrottleNext(1000, time.Second)
	for range 1000 {
		serve(t, never, simRequest("x"))
	}
	clock2.Set(t0.Add(time.Second))
	if st := never.Stats(); st.Suspended || st.Throttled != 1000 {
		t.Errorf("SuspendAfter -1: stats %+v; want 1000 throttled, never suspended", st)
	}
}

func TestSimulatorIdempotency(t *testing.T) {
	tests := []struct {
		honour              bool
		wantSecond          int
		wantSent, wantDupes int
	}{
		{honour: true, wantSecond: 200, wantSent: 1, wantDupes: 1},
		{honour: false, wantSecond: 200, wantSent: 2, wantDupes: 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("honour=", tt.honour), func(t *testing.T) {
			s, clock := newSim(Config{Limit: 2, HonourIdempotencyKey: tt.honour})
			run(t, s, clock, []step{
				{id: "a", want: 200},
				{id: "a", want: tt.wantSecond},
			})
			if got := s.SentCount("a"); got != tt.wantSent {
				t.Errorf("SentCount(a) = %d, want %d", got, tt.wantSent)
			}
			if st := s.Stats(); st.Duplicates != tt.wantDupes || st.Accepted != tt.wantSent {
				t.Errorf("stats %+v; want %d duplicates, %d accepted", st, tt.wantDupes, tt.wantSent)
			}
		})
	}

	// A duplicate does not use the rate; a throttled ID is not a duplicate.
	s, clock := newSim(Config{Limit: 1, HonourIdempotencyKey: true})
	run(t, s, clock, []step{
		{id: "a", want: 200},
		{id: "a", want: 200},
		{id: "b", want: 429},
		{id: "a", want: 200},
		{at: time.Second, id: "b", want: 200},
	})
	if a, b := s.SentCount("a"), s.SentCount("b"); a != 1 || b != 1 {
		t.Errorf("SentCount a, b = %d, %d; want 1, 1", a, b)
	}
	// Without the header, client_ref names the send but is not an idempotency key.
	r := simRequest("c")
	r.Header.Del("Idempotency-Key")
	clock.Set(t0.Add(5 * time.Second))
	serve(t, s, r)
	if got := s.SentCount("c"); got != 1 {
		t.Errorf("SentCount(c) = %d, want 1 (from client_ref)", got)
	}
}

func TestSimulatorValidation(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *http.Request) *http.Request
		want int
	}{
		{"valid", func(r *http.Request) *http.Request { return r }, 200},
		{"8 digits", withBody(`{"to":"+12345678","body":"x"}`), 200},
		{"15 digits", withBody(`{"to":"+123456789012345","body":"x"}`), 200},
		{"unknown fields ignored", withBody(`{"to":"+819012345678","body":"x","extra":[1]}`), 200},
		{"7 digits", withBody(`{"to":"+1234567","body":"x"}`), 400},
		{"16 digits", withBody(`{"to":"+1234567890123456","body":"x"}`), 400},
		{"no plus", withBody(`{"to":"819012345678","body":"x"}`), 400},
		{"letter", withBody(`{"to":"+81901234567a","body":"x"}`), 400},
		{"spaces", withBody(`{"to":"+81 90 1234 5678","body":"x"}`), 400},
		{"to missing", withBody(`{"body":"x"}`), 400},
		{"to a number", withBody(`{"to":819012345678,"body":"x"}`), 400},
		{"body empty", withBody(`{"to":"+819012345678","body":""}`), 400},
		{"body missing", withBody(`{"to":"+819012345678"}`), 400},
		{"body null", withBody(`{"to":"+819012345678","body":null}`), 400},
		{"not JSON", withBody(`to=+819012345678`), 400},
		{"JSON null", withBody(`null`), 400},
		{"array", withBody(`[]`), 400},
		{"data after the object", withBody(`{"to":"+819012345678","body":"x"}{}`), 400},
		{"empty", withBody(``), 400},
		{"too big", withBody(`{"to":"+819012345678","body":"` + strings.Repeat("x", maxRequestBody) + `"}`), 413},
		{"content type with charset", header("Content-Type", "application/json; charset=utf-8"), 200},
		{"content type text", header("Content-Type", "text/plain"), 415},
		{"content type missing", header("Content-Type", ""), 415},
		{"token missing", header("Authorization", ""), 401},
		{"token wrong", header("Authorization", "Bearer nope"), 401},
		{"token as Basic", header("Authorization", "Basic "+testToken), 401},
		{"scheme case-insensitive", header("Authorization", "bearer "+testToken), 200},
		{"GET", method(http.MethodGet), 405},
		{"PUT", method(http.MethodPut), 405},
		{"wrong path", path("/v1/message"), 404},
		{"root", path("/"), 404},
		{"bad token before bad body", func(r *http.Request) *http.Request {
			return header("Authorization", "")(withBody(`nonsense`)(r))
		}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(Config{})
			w := serve(t, s, tt.edit(simRequest("v-1")))
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d (%s)", w.Code, tt.want, w.Body.String())
			}
			st := s.Stats()
			if tt.want == 200 {
				if st.Accepted != 1 {
					t.Errorf("stats %+v; want 1 accepted", st)
				}
			} else if st.Rejected != 1 || st.Accepted != 0 {
				t.Errorf("stats %+v; want 1 rejected", st)
			}
			if w.Code == 405 && w.Header().Get("Allow") != http.MethodPost {
				t.Errorf("405 without Allow: POST")
			}
			if strings.Contains(w.Body.String(), "819012345678") {
				t.Errorf("the answer %q echoes the number", w.Body.String())
			}
		})
	}
}

func withBody(b string) func(*http.Request) *http.Request {
	return func(r *http.Request) *http.Request {
		n := httptest.NewRequest(r.Method, r.URL.Path, strings.NewReader(b))
		n.Header = r.Header
		return n
	}
}

func header(k, v string) func(*http.Request) *http.Request {
	return func(r *http.Request) *http.Request {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
		return r
	}
}

func method(m string) func(*http.Request) *http.Request {
	return func(r *http.Request) *http.Request { r.Method = m; return r }
}

func path(p string) func(*http.Request) *http.Request {
	return func(r *http.Request) *http.Request { r.URL.Path = p; return r }
}

func TestSimulatorAnyToken(t *testing.T) {
	s := NewGeneric(Config{}, WithClock(newFakeClock(t0).Now))
	for _, auth := range []string{"", "Bearer whatever", "Basic x"} {
		r := simRequest("a-" + auth)
		header("Authorization", auth)(r)
		if w := serve(t, s, r); w.Code != 200 {
			t.Errorf("Authorization %q with no Token configured: status %d, want 200", auth, w.Code)
		}
	}
}

func TestSimulatorArrivals(t *testing.T) {
	s, clock := newSim(Config{Limit: 1})
	run(t, s, clock, []step{
		{at: 0, id: "a", want: 200},
		{at: 1, id: "b", want: 429},
	})
	clock.Set(t0.Add(2))
	serve(t, s, header("Authorization", "")(simRequest("c")))
	want := []Arrival{
		{At: t0, ID: "a", Status: 200, Outcome: "accepted", Segments: 1},
		{At: t0.Add(1), ID: "b", Status: 429, Outcome: "throttled", Segments: 1},
		{At: t0.Add(2), ID: "c", Status: 401, Outcome: "unauthorized", Segments: 1},
	}
	got := s.Arrivals()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Arrivals() = %v, want %v", got, want)
	}
	got[0].ID = "changed"
	if s.Arrivals()[0].ID != "a" {
		t.Error("Arrivals() returned the Simulator's own slice")
	}
}

func TestSimulatorMaxArrivals(t *testing.T) {
	tests := []struct {
		max         int
		wantIDs     string
		wantDropped int
	}{
		{max: 3, wantIDs: "[m2 m3 m4]", wantDropped: 2},
		{max: 10, wantIDs: "[m0 m1 m2 m3 m4]", wantDropped: 0},
		{max: -1, wantIDs: "[]", wantDropped: 5},
	}
	for _, tt := range tests {
		s, _ := newSim(Config{MaxArrivals: tt.max})
		for i := range 5 {
			serve(t, s, simRequest(fmt.Sprint("m", i)))
		}
		var ids []string
		for _, a := range s.Arrivals() {
			ids = append(ids, a.ID)
		}
		if got := fmt.Sprint(ids); got != tt.wantIDs || s.Stats().DroppedArrivals != tt.wantDropped {
			t.Errorf("MaxArrivals %d: IDs %s, dropped %d; want %s, %d", tt.max, got, s.Stats().DroppedArrivals, tt.wantIDs, tt.wantDropped)
		}
	}
}

func TestSimulatorLatencyHonoursCancel(t *testing.T) {
	s, _ := newSim(Config{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before the hour is up
	serve(t, s, simRequest("gone").WithContext(ctx))
	st := s.Stats()
	arr := s.Arrivals()
	if st.Canceled != 1 || st.Accepted != 0 || len(arr) != 1 || arr[0].Status != StatusClientClosed {
		t.Errorf("stats %+v, arrivals %v; want one canceled arrival, nothing accepted", st, arr)
	}
}

// TestSimulatorLatencyThroughClient checks Latency end to end: a client
// whose timeout is shorter gives up, the Simulator records it and accepts
// nothing.
func TestSimulatorLatencyThroughClient(t *testing.T) {
	s := NewGeneric(Config{Token: testToken, Latency: time.Hour})
	srv := newServer(t, s)
	c := newTestClient(t, srv.URL, provider.WithTimeout(20*time.Millisecond))
	if _, err := c.Send(context.Background(), testMsg); err == nil {
		t.Fatal("Send through an hour of latency = nil")
	}
	srv.Close() // waits for the handler, which returns once the client hangs up
	if st := s.Stats(); st.Canceled != 1 || st.Accepted != 0 {
		t.Errorf("stats %+v; want 1 canceled", st)
	}
}

func TestSimConfigDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	want := Config{Limit: 100, Window: time.Second, RetryAfter: time.Second, SuspendAfter: 300,
		SuspendWindow: 10 * time.Minute, SuspendFor: time.Hour, MaxArrivals: 1 << 20, SenderWindow: time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	// A 429 for being over the rate carries the default Retry-After of 1s.
	s, clock := newSim(Config{Limit: 1})
	run(t, s, clock, []step{{want: 200}, {want: 429, retryAfter: "1"}})
}

// BenchmarkSimulator measures one decision on the sliding window at the
// contract's rate, the path a load run takes thousands of times a second.
func BenchmarkSimulator(b *testing.B) {
	now := t0
	s := NewGeneric(Config{MaxArrivals: 1 << 16}, WithClock(func() time.Time { return now }))
	body := fmt.Sprintf(validBody, "bench")
	w := httptest.NewRecorder()
	for b.Loop() {
		now = now.Add(5 * time.Millisecond) // 200/s offered against 100/s allowed
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "bench")
		s.ServeHTTP(w, r)
	}
	if st := s.Stats(); st.MaxInWindow > 100 {
		b.Fatalf("MaxInWindow %d over the limit", st.MaxInWindow)
	}
}

// simRequestFrom is simRequest with "from": from in the body ("" for none).
func simRequestFrom(id, from string) *http.Request {
	r := simRequest(id)
	if from == "" {
		return r
	}
	return withBody(fmt.Sprintf(`{"to":"+819012345678","body":"Your code is 482913","client_ref":%q,"from":%q}`, id, from))(r)
}

// TestSimulatorSenderLimit checks that a sender over SenderLimit is
// throttled while another sender, and requests without one, still pass,
// and that a request refused by either limit counts in neither window.
func TestSimulatorSenderLimit(t *testing.T) {
	ms := time.Millisecond
	const a, b = "+12025550101", "+18885550100"
	s, clock := newSim(Config{Limit: 3, Window: 10 * ms, SenderLimit: 2, SenderWindow: time.Second, RetryAfter: 250 * ms})
	steps := []struct {
		at         time.Duration
		from       string
		want       int
		retryAfter string
	}{
		{0, a, 200, ""},
		{0, a, 200, ""},
		{0, a, 429, "0.25"},       // a is full; the account has 2 of 3
		{0, b, 200, ""},           // so b fits: a's refusal took no room in the account's window
		{0, b, 429, "0.25"},       // the account is full (3)
		{100 * ms, b, 200, ""},    // the account's window is empty again; b has 2: the refusal above took none of b's
		{100 * ms, b, 429, ""},    // b is full
		{100 * ms, "", 200, ""},   // no from: the sender "", empty
		{999 * ms, a, 429, ""},    // a's two at t0 are still in its window
		{time.Second, a, 200, ""}, // they have left: [t0+1s-1s, ...) is half-open
		{time.Second, a, 200, ""}, //
		{1050 * ms, a, 429, ""},   //
		{1050 * ms, b, 200, ""},   // b's at t0 has left, its at t0+100ms not
		{1050 * ms, b, 429, ""},   //
		{1100 * ms, b, 200, ""},   // t0+100ms has left
	}
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		w := serve(t, s, simRequestFrom(fmt.Sprint("m-", i), st.from))
		if w.Code != st.want {
			t.Errorf("step %d (t0+%v, from %q): status %d, want %d (%s)", i, st.at, st.from, w.Code, st.want, strings.TrimSpace(w.Body.String()))
		}
		if st.retryAfter != "" && w.Header().Get("Retry-After") != st.retryAfter {
			t.Errorf("step %d: Retry-After %q, want %q", i, w.Header().Get("Retry-After"), st.retryAfter)
		}
	}
	st := s.Stats()
	if st.Accepted != 9 || st.Throttled != 1 || st.SenderThrottled != 5 || st.MaxInWindow != 3 || st.SenderMaxInWindow != 2 {
		t.Errorf("stats %+v; want 9 accepted, 1 throttled for the account, 5 for a sender, max 3 and 2 in a window", st)
	}
	arr := s.Arrivals()
	if arr[2].From != a || arr[2].Outcome != "throttled" || arr[2].Status != 429 || arr[7].From != "" {
		t.Errorf("arrivals %v: want the sender recorded, a sender's throttle as a throttle", arr)
	}
	// The measure over arrivals agrees with the Simulator's.
	if most, who := s.MaxInWindow(time.Second, true); most != 2 || who != a {
		t.Errorf("MaxInWindow(1s, by sender) = %d, %q; want 2, %q", most, who, a)
	}
	if most, _ := s.MaxInWindow(10*ms, false); most != 3 {
		t.Errorf("MaxInWindow(10ms, account) = %d, want 3", most)
	}
}

// TestSimulatorSenderLimitOff checks that without SenderLimit the senders
// are recorded and not limited.
func TestSimulatorSenderLimitOff(t *testing.T) {
	s, _ := newSim(Config{Limit: 5})
	for i := range 6 {
		serve(t, s, simRequestFrom(fmt.Sprint("m-", i), "+12025550101"))
	}
	if st := s.Stats(); st.Accepted != 5 || st.Throttled != 1 || st.SenderThrottled != 0 || st.SenderMaxInWindow != 0 {
		t.Errorf("stats %+v; want 5 accepted, 1 throttled by the account alone", st)
	}
	if a := s.Arrivals()[0]; a.From != "+12025550101" {
		t.Errorf("arrival %+v, want the sender recorded", a)
	}
	// A "from" that is not a string is a bad body.
	if w := serve(t, s, withBody(`{"to":"+819012345678","body":"x","from":1}`)(simRequest("bad"))); w.Code != 400 {
		t.Errorf(`"from":1: status %d, want 400`, w.Code)
	}
}

// TestSenderPoolThroughAdapters sends through each adapter to its
// simulator with one acceptance per sender: the Message's From must reach
// the wire (the simulator limits by it), and without one the adapter's
// configured sender goes (the generic API's: none).
func TestSenderPoolThroughAdapters(t *testing.T) {
	const a, b = "+12025550101", "+18885550100"
	cfg := Config{Limit: 100, Window: time.Hour, SenderLimit: 1, SenderWindow: time.Hour}
	tests := []struct {
		name        string
		setup       func(t *testing.T) (provider.Sender, *Simulator)
		defaultFrom string // what a Message without From is recorded under
	}{
		{"generic", func(t *testing.T) (provider.Sender, *Simulator) {
			c := cfg
			c.Token = testToken
			sim := NewGeneric(c)
			return newTestClient(t, newServer(t, sim).URL), sim
		}, ""},
		{"twilio", func(t *testing.T) (provider.Sender, *Simulator) {
			c := cfg
			c.Token = testToken
			sim := NewTwilio(c, testTwilioSID)
			return newTestTwilio(t, newServer(t, sim).URL, nil), sim
		}, testTwilioFrom},
		{"twilio with a Messaging Service", func(t *testing.T) (provider.Sender, *Simulator) {
			c := cfg
			c.Token = testToken
			sim := NewTwilio(c, testTwilioSID)
			return newTestTwilio(t, newServer(t, sim).URL, func(c *provider.TwilioConfig) { c.From, c.MessagingServiceSID = "", testTwilioMG }), sim
		}, ""},
		{"vonage", func(t *testing.T) (provider.Sender, *Simulator) {
			c := cfg
			c.Token = vonageTestSecret
			sim := NewVonage(c, vonageTestKey)
			return newTestVonage(t, newServer(t, sim).URL, nil), sim
		}, vonageTestFrom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sender, sim := tt.setup(t)
			send := func(id, from string) error {
				_, err := sender.Send(context.Background(), provider.Message{ID: id, To: "+819087654321", Body: "Your code is 482913", From: from})
				return err
			}
			if err := send("m-1", a); err != nil {
				t.Fatalf("first from a: %v", err)
			}
			if err := send("m-2", a); !isKind(err, provider.KindThrottled) {
				t.Fatalf("second from a = %v, want throttled", err)
			}
			if err := send("m-3", b); err != nil {
				t.Fatalf("first from b: %v", err)
			}
			if err := send("m-4", ""); err != nil {
				t.Fatalf("first without From: %v", err)
			}
			var froms []string
			for _, ar := range sim.Arrivals() {
				froms = append(froms, ar.From)
			}
			if want := []string{a, a, b, tt.defaultFrom}; !slices.Equal(froms, want) {
				t.Errorf("senders on the wire %q, want %q", froms, want)
			}
			if st := sim.Stats(); st.Accepted != 3 || st.SenderThrottled != 1 || st.Throttled != 0 {
				t.Errorf("stats %+v; want 3 accepted, 1 throttled for its sender", st)
			}
		})
	}
}

// TestClientConcurrentAgainstSimulator sends from many goroutines at once
// through one Client to a Simulator whose window outlasts the test, so the
// split between accepted and throttled is exact.
func TestClientConcurrentAgainstSimulator(t *testing.T) {
	sim := NewGeneric(Config{Token: testToken, Limit: 50, Window: time.Hour, HonourIdempotencyKey: true})
	srv := newServer(t, sim)
	c := newTestClient(t, srv.URL)
	const n = 100
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = c.Send(context.Background(), provider.Message{ID: fmt.Sprintf("m-%03d", i), To: "+819012345678", Body: "hi"})
		})
	}
	wg.Wait()
	var ok, throttled int
	for i, err := range errs {
		var pe *provider.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &pe) && pe.Throttled() && pe.RetryAfter == time.Second:
			throttled++
		default:
			t.Errorf("Send %d = %v, want nil or 429 with 1s", i, err)
		}
	}
	st := sim.Stats()
	if ok != 50 || throttled != 50 || st.Accepted != 50 || st.Throttled != 50 || st.MaxInWindow != 50 {
		t.Errorf("ok %d, throttled %d, stats %+v; want 50 and 50", ok, throttled, st)
	}
	if got := len(sim.Arrivals()); got != n {
		t.Errorf("%d arrivals, want %d", got, n)
	}
	if sum := st.Accepted + st.Throttled + st.SenderThrottled + st.Failed + st.Rejected + st.Duplicates + st.SuspendedAnswers + st.Canceled; sum != n {
		t.Errorf("stats %+v count %d requests, want %d", st, sum, n)
	}
}
