package loadharness

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// tlog is an io.Writer onto t.Log, for the harness's progress lines.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runRows parses args as the command line and runs the matrix on the test
// Redis, returning the rows by strategy.
func runRows(t *testing.T, args ...string) map[string]*result {
	t.Helper()
	cfg, err := ParseMatrix(args, io.Discard)
	if err != nil {
		t.Fatalf("ParseMatrix(%q): %v", args, err)
	}
	rows, err := runMatrix(context.Background(), cfg, &redis.Options{Addr: redistest.Addr(t)}, tlog{t})
	if err != nil {
		t.Fatalf("runMatrix: %v", err)
	}
	var table bytes.Buffer
	if err := writeTable(&table, cfg, rows); err != nil {
		t.Fatalf("writeTable: %v", err)
	}
	t.Logf("\n%s", table.String())
	by := map[string]*result{}
	for _, r := range rows {
		by[r.Strategy] = r
	}
	return by
}

// TestQuickRunShowsTheIncidentAndTheFix is the smoke run: 1.5 s, K=2, the
// strict sliding-second provider. v2's fixed windows on skewed clocks put
// two windows' worth into the first second (the campaign starts mid-second,
// the next key opens less than a second later), so a strict provider
// answers 429 however fast the machine is; the real limiter gets none and
// uses most of the target. OTP comes at 30/s so that demand exceeds
// TARGET_RPS (marketing alone is capped at 70): at the default 10/s the
// ceiling would be 80/90 = 0.89, too close to the bound on a loaded machine.
// Only loose bounds: the machine may be loaded and the race detector on,
// which is also why --redis-timeout is raised from 100ms: a starved test
// machine must not send the limiter into its Redis-down fallback.
func TestQuickRunShowsTheIncidentAndTheFix(t *testing.T) {
	by := runRows(t, "--quick", "--duration", "1.5s", "--senders", "2", "--strategies", "v2,gcra", "--modes", "sliding1s", "--otp-rate", "30", "--redis-timeout", "1s")
	g, v2 := by[stratGCRA], by[stratV2]
	if g.Answered != 0 {
		t.Errorf("gcra got %d 429s, want 0", g.Answered)
	}
	if g.Utilization <= 0.8 {
		t.Errorf("gcra utilization %.3f (%.1f sent/s, %d admitted by the fallback), want > 0.8", g.Utilization, g.AcceptedRPS, g.FallbackAdmits)
	}
	if float64(g.MaxAccepted1s) > targetRPS+float64(g.Burst) {
		t.Errorf("gcra sent %d in one second, want at most TARGET_RPS+BURST = %v", g.MaxAccepted1s, targetRPS+float64(g.Burst))
	}
	if g.OTPServed == 0 {
		t.Errorf("gcra admitted no OTP (of %d arrived)", g.OTPArrived)
	}
	if v2.Answered == 0 {
		t.Errorf("v2 got no 429 from a strict provider; want some (max requests in 1 s: %d)", v2.MaxAll1s)
	}
	if v2.Retries == 0 {
		t.Error("v2 re-sent nothing after its 429s; the old send loop re-sends at once, 4 tries in all")
	}
	// Redis's own figures: the test Redis serves other tests at the same
	// time, so only lower bounds hold.
	for _, r := range []*result{g, v2} {
		if r.RedisStatsError != "" || r.RedisExecuted == 0 || r.RedisExecuted < r.RedisScripts {
			t.Errorf("%s: Redis's own figures: %d script calls, %d executed, error %q; want some, executed ≥ scripts",
				r.Strategy, r.RedisScripts, r.RedisExecuted, r.RedisStatsError)
		}
	}
	if g.RedisScripts == 0 || g.RedisScriptsPerMsg == 0 {
		t.Errorf("gcra: Redis counted %d script calls (%.2f per sent message), want some", g.RedisScripts, g.RedisScriptsPerMsg)
	}
	if g.AdmitToWireCount == 0 || g.AdmitToWireP50 <= 0 || g.AdmitToWireP99 < g.AdmitToWireP50 {
		t.Errorf("gcra admit-to-wire: p50 %vms, p99 %vms of %d sends; want measured", g.AdmitToWireP50, g.AdmitToWireP99, g.AdmitToWireCount)
	}
	if v2.AdmitToWireCount != 0 {
		t.Errorf("v2 has %d admit-to-wire samples; only gcra measures them", v2.AdmitToWireCount)
	}
}

// TestArrivalJitterHoldsEachRequest: the delaying proxy hands every
// request on after a hold in [0, D], spread over it.
func TestArrivalJitterHoldsEachRequest(t *testing.T) {
	const d = 40 * time.Millisecond
	var held []time.Duration
	var mu sync.Mutex
	sent := map[*http.Request]time.Time{}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		held = append(held, time.Since(sent[r]))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	j := arrivalJitter{next: next, max: d}
	var wg sync.WaitGroup
	for range 40 {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		mu.Lock()
		sent[r] = time.Now()
		mu.Unlock()
		wg.Go(func() {
			w := httptest.NewRecorder()
			j.ServeHTTP(w, r)
			if w.Code != http.StatusNoContent {
				t.Errorf("status %d, want the simulator's 204", w.Code)
			}
		})
	}
	wg.Wait()
	if len(held) != 40 {
		t.Fatalf("%d requests handed on, want 40", len(held))
	}
	// A loaded machine may hold longer than D; none is held less than 0,
	// and the holds are spread (not all at 0, not all at D).
	slices.Sort(held)
	if held[len(held)/2] > d || held[len(held)-1]-held[0] < d/4 {
		t.Errorf("holds %v: want a median within %v and a spread over it", held, d)
	}

	// A request whose sender gave up is not handed on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	sent[r] = time.Now()
	arrivalJitter{next: next, max: time.Hour}.ServeHTTP(httptest.NewRecorder(), r)
	if len(held) != 40 {
		t.Error("a canceled request reached the simulator")
	}
}

// TestArrivalJitterWithinTheCheck: gcra at full rate (OTP at 30/s) with
// requests held up to 20 ms before a strict sliding-second provider, the
// PROVIDER_ARRIVAL_JITTER default that the dispatcher's start-up check
// allows for (90 × 1.02 + 5 = 96.8): no 429.
func TestArrivalJitterWithinTheCheck(t *testing.T) {
	g := runRows(t, "--duration", "1.5s", "--senders", "2", "--strategies", "gcra", "--modes", "sliding1s",
		"--otp-rate", "30", "--arrival-jitter", "20ms", "--redis-timeout", "1s")[stratGCRA]
	if g.Answered != 0 || g.Accepted == 0 {
		t.Errorf("gcra with 20 ms of arrival jitter: %d 429s, %d accepted (most in 1 s %d); want none and some", g.Answered, g.Accepted, g.MaxAll1s)
	}
}

// TestSegmentsCountedOrThrottled: 3-segment bodies against a provider
// counting segments at 100/s. Counted in segments, the real limiter gets no
// 429; counted in messages, it sends three times the contract and the
// provider answers 429 (what a segment-blind limiter did to a campaign).
func TestSegmentsCountedOrThrottled(t *testing.T) {
	args := []string{"--duration", "2s", "--senders", "2", "--strategies", "gcra", "--modes", "sliding1s", "--segments", "3", "--redis-timeout", "1s"}
	if g := runRows(t, args...)[stratGCRA]; g.Answered != 0 || g.Accepted == 0 {
		t.Errorf("rates in segments: %d 429s, %d accepted; want 0 and some", g.Answered, g.Accepted)
	}
	if g := runRows(t, append(args, "--rate-unit", "message")...)[stratGCRA]; g.Answered == 0 {
		t.Errorf("rates in messages: no 429 from a provider counting 3 segments a message")
	}
}

// TestRedisDownFault takes Redis away from the senders for part of a run:
// the real limiter falls back to its slow local share and causes no 429;
// v2 fails open.
func TestRedisDownFault(t *testing.T) {
	by := runRows(t, "--duration", "1.5s", "--senders", "2", "--strategies", "v2,gcra", "--modes", "sliding1s",
		"--fault", "redis-down@0.3s+0.8s", "--redis-timeout", "1s")
	g, v2 := by[stratGCRA], by[stratV2]
	if g.Answered != 0 {
		t.Errorf("gcra got %d 429s with Redis down, want 0", g.Answered)
	}
	if g.FallbackAdmits == 0 {
		t.Errorf("gcra admitted nothing by its fallback while Redis was down (redis errors: %d)", g.RedisErrors)
	}
	if v2.RedisErrors == 0 {
		t.Error("v2 saw no Redis error while Redis was down")
	}
}

// TestProviderThrottleFault makes the provider answer 429 for a moment:
// the real limiter stops every sender and re-sends nothing on the spot, so
// each worker meets at most one 429.
func TestProviderThrottleFault(t *testing.T) {
	const senders, workers = 2, 4 + 2
	by := runRows(t, "--duration", "1.5s", "--senders", "2", "--strategies", "gcra", "--modes", "sliding1s",
		"--fault", "429@0.3s+0.2s", "--redis-timeout", "1s")
	g := by[stratGCRA]
	if g.Answered < 1 || g.Answered > senders*workers {
		t.Errorf("gcra got %d 429s during a 429 span, want 1 to %d (one per worker at most)", g.Answered, senders*workers)
	}
	if g.Nacks < int64(g.Answered) {
		t.Errorf("gcra nacked %d messages after %d 429s; every 429 must end in a nack", g.Nacks, g.Answered)
	}
}

func TestParseFault(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fault
		err  bool
	}{
		{in: "redis-down@2s+1.5s", want: fault{faultRedisDown, 2 * time.Second, 1500 * time.Millisecond}},
		{in: "429@2s+0.5s", want: fault{fault429, 2 * time.Second, 500 * time.Millisecond}},
		{in: "5xx@0s+1s", want: fault{fault5xx, 0, time.Second}},
		{in: "5xx@2s", err: true},
		{in: "redis-down+1s", err: true},
		{in: "disk-full@1s+1s", err: true},
		{in: "429@-1s+1s", err: true},
		{in: "429@1s+0s", err: true},
		{in: "429@1s+x", err: true},
	} {
		got, err := parseFault(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseFault(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		c, err := ParseMatrix(nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.duration != 5*time.Second || len(c.senders) != 3 || len(c.modes) != 4 || len(c.strategies) != 4 {
			t.Errorf("defaults: duration %v, K %v, modes %v, strategies %v", c.duration, c.senders, c.modes, c.strategies)
		}
	})
	t.Run("quick", func(t *testing.T) {
		c, err := ParseMatrix([]string{"--quick", "--senders", "3"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.duration != 2*time.Second || len(c.modes) != 2 || len(c.senders) != 1 || c.senders[0] != 3 {
			t.Errorf("--quick --senders 3: duration %v, modes %v, K %v; want 2s, two modes, K from the flag", c.duration, c.modes, c.senders)
		}
	})
	for _, args := range [][]string{
		{"--strategies", "v3"},
		{"--modes", "sliding2s"},
		{"--senders", "0"},
		{"--duration", "1s", "--fault", "429@2s+1s"},
		{"--svg", "x.svg", "--svg-senders", "5"},
		{"--arrival-jitter", "-1ms"},
		{"--arrival-jitter", "2s"},
		{"--soak", "1m", "--arrival-jitter", "20ms"},
		{"extra"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("ParseMatrix(%q) accepted a bad command line", args)
		}
	}
	if _, err := ParseMatrix([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}

func TestSkewSpreadsEvenly(t *testing.T) {
	const spread = 300 * time.Millisecond
	if got := skewOf(0, 1, spread); got != 0 {
		t.Errorf("one sender: skew %v, want 0", got)
	}
	if a, b := skewOf(0, 16, spread), skewOf(15, 16, spread); a != -spread/2 || b != spread/2 {
		t.Errorf("K=16: first %v, last %v; want %v and %v", a, b, -spread/2, spread/2)
	}
}

// sampleRows are two made-up rows for the report writers.
func sampleRows() []*result {
	s := 12.5
	return []*result{
		{Strategy: stratV2, Mode: "sliding1s", Senders: 16, Answered: 120, SuspendAfterS: &s,
			AcceptedPer100ms: []int{50, 50, 0, 0}, RejectedPer100ms: []int{0, 30, 0, 0}},
		{Strategy: stratGCRA, Mode: "sliding1s", Senders: 16, Burst: 5,
			AcceptedPer100ms: []int{9, 9, 9, 0}, RejectedPer100ms: []int{0, 0, 0, 0}},
	}
}

func TestWriteSVGIsWellFormedAndDrawsTheContract(t *testing.T) {
	cfg := &Config{svgMode: "sliding1s", svgSenders: 16, skew: 300 * time.Millisecond, otpRate: 10}
	var b bytes.Buffer
	if err := writeSVG(&b, cfg, sampleRows()); err != nil {
		t.Fatalf("writeSVG: %v", err)
	}
	dec := xml.NewDecoder(&b)
	texts := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			texts += string(cd)
		}
	}
	for _, want := range []string{"contract: 10 / 100 ms", "v2: 120 429s", "gcra (BURST 5)", "seconds since the run's start"} {
		if !strings.Contains(texts, want) {
			t.Errorf("SVG text lacks %q", want)
		}
	}
	cfg.svgSenders = 2
	if err := writeSVG(io.Discard, cfg, sampleRows()); err == nil {
		t.Error("writeSVG drew a chart for a K no row has")
	}
}

func TestWriteJSONKeepsRowsAndHistograms(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSON(&b, &Config{duration: 5 * time.Second}, sampleRows()); err != nil {
		t.Fatalf("writeJSON: %v", err)
	}
	var got jsonReport
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}
	if len(got.Rows) != 2 || got.Rows[0].Answered != 120 || got.Rows[1].AcceptedPer100ms[2] != 9 || got.Rows[1].SuspendAfterS != nil {
		t.Errorf("rows came back as %+v", got.Rows)
	}
}
