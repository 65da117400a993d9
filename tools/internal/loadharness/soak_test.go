package loadharness

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

func TestParseUsedMemory(t *testing.T) {
	const info = "# Memory\r\nused_memory_human:1.05M\r\nused_memory:1104512\r\nused_memory_rss:12345678\r\n"
	if got, err := parseUsedMemory(info); err != nil || got != 1104512 {
		t.Errorf("parseUsedMemory = %d, %v; want 1104512", got, err)
	}
	for _, bad := range []string{"# Memory\r\nused_memory_human:1.05M\r\n", "used_memory:lots\r\n", ""} {
		if got, err := parseUsedMemory(bad); err == nil {
			t.Errorf("parseUsedMemory(%q) = %d, want an error", bad, got)
		}
	}
}

func TestParseSenderReport(t *testing.T) {
	r, err := parseSenderReport([]byte(`{"kind":"sample","index":3,"heap_live_bytes":2097152,"heap_alloc_bytes":4194304,"goroutines":21,"sockets":5,"redis_conns":3,"admitted":7,"nacks":1,"fallback_admits":0,"first_429s":0,"redis_errors":0}`))
	if err != nil {
		t.Fatalf("parseSenderReport: %v", err)
	}
	want := senderReport{Kind: reportSample, Index: 3, HeapLive: 2 << 20, HeapAlloc: 4 << 20, Goroutines: 21, Sockets: 5, RedisConns: 3, Admitted: 7, Nacks: 1}
	if r != want {
		t.Errorf("parseSenderReport = %+v, want %+v", r, want)
	}
	// The line a sender writes comes back as it was.
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(want); err != nil {
		t.Fatal(err)
	}
	if r, err := parseSenderReport(bytes.TrimSpace(b.Bytes())); err != nil || r != want {
		t.Errorf("round trip: %+v, %v; want %+v", r, err, want)
	}
	for _, bad := range []string{
		`{"kind":"hello"}`,
		`{"kind":"sample","heap":1}`,
		`{"kind":"sample"} {"kind":"sample"}`,
		`heap 12`,
		``,
	} {
		if _, err := parseSenderReport([]byte(bad)); err == nil {
			t.Errorf("parseSenderReport(%q) accepted a bad line", bad)
		}
	}
}

func TestGrowth(t *testing.T) {
	for _, tc := range []struct{ base, last, want float64 }{
		{100, 110, 0.10},
		{100, 90, -0.10},
		{0, 0, 0},
		{0, 1, math.Inf(1)},
	} {
		if got := growth(tc.base, tc.last); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("growth(%g, %g) = %g, want %g", tc.base, tc.last, got, tc.want)
		}
	}
}

func TestMedianAndMax(t *testing.T) {
	if got := median([]float64{5, 1, 3}); got != 3 {
		t.Errorf("median of 5,1,3 = %g, want 3", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 4,1,3,2 = %g, want 2.5", got)
	}
	if got := maxOf([]float64{4, 1, 3}); got != 4 {
		t.Errorf("maxOf = %g, want 4", got)
	}
	for _, vs := range [][]float64{nil, {1, math.NaN()}} {
		if !math.IsNaN(median(vs)) || !math.IsNaN(maxOf(vs)) {
			t.Errorf("median, maxOf of %v are not NaN", vs)
		}
	}
}

// flatSamples returns a run of d sampled every step, every figure constant:
// three senders with a 2 MiB live heap, 20 goroutines and 4 sockets, Redis
// at 1 MiB and 7 keys, 90 messages a second sent.
func flatSamples(d, step time.Duration) []soakSample {
	var ss []soakSample
	for at := step; ; at += step {
		at = min(at, d)
		s := soakSample{At: at, RedisUsedMemory: 1 << 20, RedisKeys: 7, Sent: int(90 * at.Seconds())}
		for i := range 3 {
			s.Procs = append(s.Procs, senderReport{Kind: reportSample, Index: i, HeapLive: 2 << 20, Goroutines: 20, Sockets: 4})
		}
		ss = append(ss, s)
		if at == d {
			return ss
		}
	}
}

func TestJudgeSoak(t *testing.T) {
	const d, step = 10 * time.Minute, 10 * time.Second
	check := func(v soakVerdict, name string) soakCheck {
		t.Helper()
		for _, c := range v.Checks {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no check %q in %+v", name, v.Checks)
		return soakCheck{}
	}

	v := judgeSoak(flatSamples(d, step), d)
	if !v.Pass || v.BaseAt != 2*time.Minute || v.LastAt != d || len(v.Checks) != len(soakSeriesList) {
		t.Errorf("flat 10m run: pass %v, from %v to %v, %d checks; want a pass from 2m0s to 10m0s: %s", v.Pass, v.BaseAt, v.LastAt, len(v.Checks), v.summary())
	}

	// One process leaks, the median does not move: a pass (the max shows it).
	ss := flatSamples(d, step)
	ss[len(ss)-1].Procs[0].HeapLive *= 3
	if v := judgeSoak(ss, d); !v.Pass {
		t.Errorf("one process's heap grew: %s; want a pass on the median", v.summary())
	}

	// Every process leaks 20 % after minute 2: a failure.
	ss = flatSamples(d, step)
	for i := range ss[len(ss)-1].Procs {
		ss[len(ss)-1].Procs[i].HeapLive = 2 << 20 * 12 / 10
	}
	v = judgeSoak(ss, d)
	if c := check(v, "sender heap live MiB (median)"); v.Pass || c.OK || math.Abs(c.Growth-0.2) > 1e-6 {
		t.Errorf("heap +20%%: pass %v, check %+v", v.Pass, c)
	}
	if !strings.Contains(v.summary(), "sender heap live MiB (median) grew +20.0%") {
		t.Errorf("summary %q does not name the heap", v.summary())
	}

	// Growth before the baseline (warm-up) does not count; 10 % exactly passes.
	ss = flatSamples(d, step)
	for i := range ss {
		if ss[i].At < 2*time.Minute {
			ss[i].RedisKeys = 1
		}
	}
	ss[len(ss)-1].RedisKeys = 7
	ss[len(ss)-1].RedisUsedMemory = 1 << 20 * 11 / 10
	if v := judgeSoak(ss, d); !v.Pass {
		t.Errorf("warm-up growth and +10%%: %s; want a pass", v.summary())
	}

	// Keys from none: a failure.
	ss = flatSamples(d, step)
	ss[11].RedisKeys = 0 // the baseline, at 2m0s
	ss[len(ss)-1].RedisKeys = 1
	if v := judgeSoak(ss, d); v.Pass || check(v, "Redis keys").OK {
		t.Errorf("keys from 0 to 1: %s; want a failure", v.summary())
	}

	// Any 429 fails.
	ss = flatSamples(d, step)
	ss[len(ss)-1].Throttled = 1
	if v := judgeSoak(ss, d); v.Pass || !strings.Contains(v.summary(), "1 answers of 429") {
		t.Errorf("one 429: %s; want a failure naming it", v.summary())
	}

	// Sockets not counted (no /proc): skipped, not failed.
	ss = flatSamples(d, step)
	for i := range ss {
		for j := range ss[i].Procs {
			ss[i].Procs[j].Sockets = -1
		}
	}
	if v := judgeSoak(ss, d); !v.Pass || !check(v, "sender open sockets (median)").Skipped {
		t.Errorf("sockets unknown: %s; want a pass with the check skipped", v.summary())
	}

	// A short run compares halfway with the end.
	if v := judgeSoak(flatSamples(5*time.Second, 2*time.Second), 5*time.Second); v.BaseAt != 4*time.Second || v.LastAt != 5*time.Second {
		t.Errorf("5s run sampled every 2s: from %v to %v, want 4s to 5s", v.BaseAt, v.LastAt)
	}
	if v := judgeSoak(flatSamples(3*time.Minute, step), 3*time.Minute); v.BaseAt != 90*time.Second {
		t.Errorf("3m run: baseline at %v, want 1m30s", v.BaseAt)
	}
	if v := judgeSoak(flatSamples(d, step)[:1], d); v.Pass || v.Problem == "" {
		t.Error("one sample passed")
	}
}

func TestSoakTableAndCSV(t *testing.T) {
	const d, step = 10 * time.Minute, 10 * time.Second
	ss := flatSamples(d, step)
	v := judgeSoak(ss, d)
	rows := soakTableRows(ss, v.BaseAt)
	var ats []string
	for _, i := range rows {
		ats = append(ats, ss[i].At.String())
	}
	if got, want := strings.Join(ats, ","), "10s,1m0s,2m0s,3m0s,4m0s,5m0s,6m0s,7m0s,8m0s,9m0s,10m0s"; got != want {
		t.Errorf("table rows at %s, want %s", got, want)
	}

	cfg := &Config{soak: d, soakEvery: step, senders: []int{3}, otpRate: 10, mktWorkers: 4, otpWorkers: 2}
	m, _ := modeByName(soakMode)
	var b bytes.Buffer
	if err := writeSoakTable(&b, cfg, m, ss, []senderReport{{Admitted: 5}, {Admitted: 6}}, v); err != nil {
		t.Fatalf("writeSoakTable: %v", err)
	}
	out := b.String()
	for _, want := range []string{
		"| t | heap MiB med / max | goroutines med / max | sockets med / max | Redis MiB | Redis keys | sent | 429s |",
		"| 2m0s | 2.00 / 2.00 | 20 / 20 | 4 / 4 | 1.00 | 7 | 10800 | 0 |",
		"admitted 11,",
		"| Redis keys | 7 | 7 | +0.0% | ok |",
		"soak: PASS: no series grew more than 10% from 2m0s to 10m0s, and 0 answers of 429",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	b.Reset()
	if err := writeSoakAborted(&b, cfg, m, ss[:3], errors.New("sender 2 hung")); err != nil {
		t.Fatalf("writeSoakAborted: %v", err)
	}
	if out := b.String(); !strings.Contains(out, "| 30s | 2.00 / 2.00 |") || !strings.Contains(out, "\nsoak: ABORTED: sender 2 hung\n") || strings.Contains(out, "PASS") {
		t.Errorf("aborted soak's table:\n%s", out)
	}

	b.Reset()
	if err := writeSoakCSV(&b, ss); err != nil {
		t.Fatalf("writeSoakCSV: %v", err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	if len(recs) != 1+len(ss) || recs[0][0] != "t_s" || recs[len(recs)-1][0] != "600" {
		t.Errorf("CSV has %d records, first %v, last %v; want a header and %d samples", len(recs), recs[0], recs[len(recs)-1], len(ss))
	}
}

func TestParseFlagsSoak(t *testing.T) {
	c, err := ParseSoak([]string{"--soak", "10m", "--soak-csv", "s.csv"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.soak != 10*time.Minute || c.soakEvery != soakInterval || len(c.senders) != 1 || c.senders[0] != 23 ||
		strings.Join(c.modes, ",") != "sliding1s" || strings.Join(c.strategies, ",") != stratGCRA || c.soakCSV != "s.csv" {
		t.Errorf("--soak 10m: soak %v every %v, K %v, modes %v, strategies %v", c.soak, c.soakEvery, c.senders, c.modes, c.strategies)
	}
	for _, args := range [][]string{
		{"--soak", "10s"},
		{"--soak", "-1m"},
		{"--soak", "1m", "--senders", "2,3"},
		{"--soak", "1m", "--modes", "sliding1s,fixed1s"},
		{"--soak", "1m", "--duration", "5s"},
		{"--soak", "1m", "--quick"},
		{"--soak", "1m", "--strategies", "v2"},
		{"--soak", "1m", "--fault", "429@1s+1s"},
		{"--soak-csv", "s.csv"},
	} {
		if _, err := ParseSoak(args, io.Discard); err == nil {
			t.Errorf("ParseSoak(%q) accepted a bad command line", args)
		}
	}
}

// TestShortSoak runs the soak for 5 s with 3 sender processes (this test
// binary, started again as senders by TestMain), sampling every 2 s, on the
// test Redis. The test Redis is shared with other tests, and 5 s is all
// warm-up, so the growth verdict may go either way; the test holds the
// run to what does not depend on that: every sample came from every
// sender, the account was used, and the provider answered no 429.
func TestShortSoak(t *testing.T) {
	csvFile := filepath.Join(t.TempDir(), "soak.csv")
	cfg, err := ParseSoak([]string{"--soak", "20s", "--senders", "3", "--redis-timeout", "1s", "--soak-csv", csvFile}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags: %v", err)
	}
	cfg.soak, cfg.soakEvery = 5*time.Second, 2*time.Second // the internal knob: shorter than the flag allows
	var out bytes.Buffer
	err = runSoak(context.Background(), cfg, "redis://"+redistest.Addr(t), &out, tlog{t})
	t.Logf("\n%s", out.String())
	if err != nil && !errors.Is(err, errSoakFailed) {
		t.Fatalf("runSoak: %v", err)
	}
	if !strings.Contains(out.String(), "| t | heap MiB") || !strings.Contains(out.String(), "\nsoak: ") {
		t.Error("no table or no verdict line on stdout")
	}

	f, err := os.ReadFile(csvFile)
	if err != nil {
		t.Fatalf("read --soak-csv: %v", err)
	}
	recs, err := csv.NewReader(bytes.NewReader(f)).ReadAll()
	if err != nil {
		t.Fatalf("--soak-csv does not parse: %v", err)
	}
	if len(recs) != 4 { // header, 2s, 4s, 5s
		t.Fatalf("--soak-csv has %d records, want a header and 3 samples:\n%s", len(recs), f)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	last := recs[len(recs)-1]
	num := func(name string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(last[col[name]], 64)
		if err != nil {
			t.Fatalf("column %s of the last sample: %v", name, err)
		}
		return v
	}
	if last[0] != "5" {
		t.Errorf("last sample at %ss, want 5s", last[0])
	}
	if num("heap_live_mib_median") <= 0 || num("goroutines_median") < float64(cfg.mktWorkers+cfg.otpWorkers) {
		t.Errorf("senders reported heap %v MiB and %v goroutines", num("heap_live_mib_median"), num("goroutines_median"))
	}
	if num("sent") == 0 || num("admitted") == 0 {
		t.Errorf("sent %v, admitted %v; want the account used", num("sent"), num("admitted"))
	}
	if n := num("429s"); n != 0 {
		t.Errorf("the provider answered %v 429s, want 0", n)
	}
}
