package loadharness

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// soakMaxGrowth is how much any sampled series may grow from the
	// baseline sample to the last one.
	soakMaxGrowth = 0.10
	// soakBaselineAt is when the baseline sample is taken: after the
	// warm-up (pools filled, heap at its working size). A run shorter than
	// twice this takes it halfway instead, so that it still checks.
	soakBaselineAt = 2 * time.Minute
)

// soakBaseline returns when the baseline sample of a run of length d is
// taken.
func soakBaseline(d time.Duration) time.Duration {
	if d < 2*soakBaselineAt {
		return d / 2
	}
	return soakBaselineAt
}

// A soakSeries is one figure the pass criterion holds to soakMaxGrowth.
type soakSeries struct {
	name  string
	value func(s *soakSample) float64 // NaN: not measured
	text  func(float64) string
}

// soakSeriesList are the checked series. The per-process figures are held
// by their median over the sender processes: every sender runs the same
// code under the same share of the load, so a leak grows them all and the
// median with them, while the max follows whichever process last opened a
// connection or took a burst of goroutines. The max is in the table.
var soakSeriesList = []soakSeries{
	{"sender heap live MiB (median)", func(s *soakSample) float64 { return mib(median(s.procValues(heapLive))) }, fixed2},
	{"sender goroutines (median)", func(s *soakSample) float64 { return median(s.procValues(goroutines)) }, plain},
	{"sender open sockets (median)", func(s *soakSample) float64 { return median(s.procValues(sockets)) }, plain},
	{"Redis used_memory MiB", func(s *soakSample) float64 { return mib(float64(s.RedisUsedMemory)) }, fixed2},
	{"Redis keys", func(s *soakSample) float64 { return float64(s.RedisKeys) }, plain},
}

func heapLive(r senderReport) float64   { return float64(r.HeapLive) }
func heapAlloc(r senderReport) float64  { return float64(r.HeapAlloc) }
func goroutines(r senderReport) float64 { return float64(r.Goroutines) }
func redisConns(r senderReport) float64 { return float64(r.RedisConns) }

// sockets is NaN where the sender could not count them.
func sockets(r senderReport) float64 {
	if r.Sockets < 0 {
		return math.NaN()
	}
	return float64(r.Sockets)
}

// procValues returns f of every sender's report.
func (s *soakSample) procValues(f func(senderReport) float64) []float64 {
	vs := make([]float64, len(s.Procs))
	for i, r := range s.Procs {
		vs[i] = f(r)
	}
	return vs
}

// median returns the median of vs (the mean of the middle two for an even
// count); NaN if vs is empty or holds a NaN.
func median(vs []float64) float64 {
	if len(vs) == 0 || slices.ContainsFunc(vs, math.IsNaN) {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(vs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// maxOf returns the largest of vs; NaN if vs is empty or holds a NaN.
func maxOf(vs []float64) float64 {
	if len(vs) == 0 || slices.ContainsFunc(vs, math.IsNaN) {
		return math.NaN()
	}
	return slices.Max(vs)
}

func mib(b float64) float64 { return b / (1 << 20) }

func fixed2(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func plain(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// growth returns how much last grew from base, as a fraction of base: 0
// when both are 0, +Inf when only base is.
func growth(base, last float64) float64 {
	if base == 0 {
		if last == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (last - base) / base
}

// soakCheck is one series' verdict.
type soakCheck struct {
	Name       string
	Base, Last float64
	Growth     float64
	Skipped    bool // not measured here (NaN)
	OK         bool
	text       func(float64) string
}

// soakVerdict is the judgement of a soak.
type soakVerdict struct {
	BaseAt, LastAt time.Duration
	Checks         []soakCheck
	Throttled      int    // 429s answered over the whole run
	Problem        string // why the samples could not be judged; empty if they could
	Pass           bool
}

// judgeSoak applies the pass criterion to the samples of a run of length
// d: no series grows more than soakMaxGrowth from the baseline sample (the
// first at or after soakBaseline(d), but never the last) to the last
// sample, and no 429 at all.
func judgeSoak(samples []soakSample, d time.Duration) soakVerdict {
	if len(samples) < 2 {
		return soakVerdict{Problem: fmt.Sprintf("%d samples, want at least 2", len(samples))}
	}
	bi := slices.IndexFunc(samples, func(s soakSample) bool { return s.At >= soakBaseline(d) })
	if bi < 0 || bi > len(samples)-2 {
		bi = len(samples) - 2
	}
	base, last := &samples[bi], &samples[len(samples)-1]
	v := soakVerdict{BaseAt: base.At, LastAt: last.At, Throttled: last.Throttled, Pass: last.Throttled == 0}
	for _, ser := range soakSeriesList {
		c := soakCheck{Name: ser.name, Base: ser.value(base), Last: ser.value(last), text: ser.text}
		if math.IsNaN(c.Base) || math.IsNaN(c.Last) {
			c.Skipped, c.OK = true, true
		} else {
			c.Growth = growth(c.Base, c.Last)
			c.OK = c.Growth <= soakMaxGrowth
		}
		v.Pass = v.Pass && c.OK
		v.Checks = append(v.Checks, c)
	}
	return v
}

// summary says in one line why v failed, or that it passed.
func (v soakVerdict) summary() string {
	if v.Problem != "" {
		return v.Problem
	}
	var bad []string
	for _, c := range v.Checks {
		if !c.OK {
			bad = append(bad, fmt.Sprintf("%s grew %s (%s to %s)", c.Name, growthText(c.Growth), c.text(c.Base), c.text(c.Last)))
		}
	}
	if v.Throttled > 0 {
		bad = append(bad, fmt.Sprintf("%d answers of 429", v.Throttled))
	}
	if len(bad) == 0 {
		return fmt.Sprintf("no series grew more than %.0f%% from %v to %v, and 0 answers of 429", soakMaxGrowth*100, v.BaseAt, v.LastAt)
	}
	return strings.Join(bad, "; ") + fmt.Sprintf(" (from %v to %v)", v.BaseAt, v.LastAt)
}

func growthText(g float64) string {
	if math.IsInf(g, 1) {
		return "from 0"
	}
	return fmt.Sprintf("%+.1f%%", g*100)
}

// soakTableRows returns the indexes of the samples the printed table shows:
// the first, the first of each minute, the baseline (the sample at baseAt)
// and the last.
func soakTableRows(samples []soakSample, baseAt time.Duration) []int {
	var rows []int
	for i, s := range samples {
		if i == 0 || i == len(samples)-1 || s.At == baseAt || s.At/time.Minute > samples[i-1].At/time.Minute {
			rows = append(rows, i)
		}
	}
	return rows
}

// writeSoakSamples writes the header line and the samples of one row per
// minute (and the one at baseAt) as a markdown table.
func writeSoakSamples(w io.Writer, cfg *Config, m mode, samples []soakSample, baseAt time.Duration) error {
	fmt.Fprintf(w, "loadtest soak: gcra, %s, K=%d sender processes, %v, sampled every %v (table: one row a minute; OTP %g/s, %d+%d workers per sender)\n\n",
		m.name, cfg.senders[0], cfg.soak, cfg.soakEvery, cfg.otpRate, cfg.mktWorkers, cfg.otpWorkers)
	fmt.Fprintln(w, "| t | heap MiB med / max | goroutines med / max | sockets med / max | Redis MiB | Redis keys | sent | 429s |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, i := range soakTableRows(samples, baseAt) {
		s := &samples[i]
		heap, gor, sock := s.procValues(heapLive), s.procValues(goroutines), s.procValues(sockets)
		if _, err := fmt.Fprintf(w, "| %v | %s / %s | %s / %s | %s / %s | %s | %d | %d | %d |\n", s.At,
			fixed2(mib(median(heap))), fixed2(mib(maxOf(heap))), plain(median(gor)), plain(maxOf(gor)),
			plain(median(sock)), plain(maxOf(sock)), fixed2(mib(float64(s.RedisUsedMemory))), s.RedisKeys, s.Sent, s.Throttled); err != nil {
			return err
		}
	}
	return nil
}

// writeSoakTable writes the samples of one row per minute as a markdown
// table, what the senders counted, the checks and the verdict line.
func writeSoakTable(w io.Writer, cfg *Config, m mode, samples []soakSample, done []senderReport, v soakVerdict) error {
	if err := writeSoakSamples(w, cfg, m, samples, v.BaseAt); err != nil {
		return err
	}
	var admitted, nacks, fallback, redisErrs int64
	for _, r := range done {
		admitted, nacks, fallback, redisErrs = admitted+r.Admitted, nacks+r.Nacks, fallback+r.Fallback, redisErrs+r.RedisErrors
	}
	fmt.Fprintf(w, "\nsenders, all together: admitted %d, nacked %d, admitted by the Redis-down fallback %d, Redis errors %d\n\n", admitted, nacks, fallback, redisErrs)

	if v.Problem == "" {
		fmt.Fprintf(w, "| checked (at most %+.0f%%) | at %v | at %v | growth | |\n", soakMaxGrowth*100, v.BaseAt, v.LastAt)
		fmt.Fprintln(w, "|---|---:|---:|---:|---|")
		for _, c := range v.Checks {
			g := "-"
			if !c.Skipped {
				g = growthText(c.Growth)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", c.Name, c.text(c.Base), c.text(c.Last), g, okText(c.OK))
		}
		fmt.Fprintf(w, "| answers of 429 (at most 0) | | %d | | %s |\n", v.Throttled, okText(v.Throttled == 0))
	}
	verdict := "PASS"
	if !v.Pass {
		verdict = "FAIL"
	}
	_, err := fmt.Fprintf(w, `
heap: live heap after a GC (/gc/heap/live:bytes) of each sender process; goroutines: runtime count per process;
sockets: open sockets per process (/proc/self/fd), its Redis and provider connections; Redis MiB: INFO used_memory;
Redis keys: the most DBSIZE seen in the interval, read 10 times (the whole database: use a Redis of the soak's own);
sent: accepted by the provider so far. Checked per-process figures: their median over the processes.

soak: %s: %s
`, verdict, v.summary())
	return err
}

func okText(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// writeSoakCSV writes every sample, one row each.
func writeSoakCSV(w io.Writer, samples []soakSample) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"t_s", "heap_live_mib_median", "heap_live_mib_max", "heap_alloc_mib_median", "heap_alloc_mib_max",
		"goroutines_median", "goroutines_max", "sockets_median", "sockets_max", "redis_pool_conns_median", "redis_pool_conns_max",
		"redis_used_memory_bytes", "redis_keys", "sent", "429s", "admitted", "fallback_admits", "redis_errors", "sample_took_s"})
	for i := range samples {
		s := &samples[i]
		var admitted, fallback, redisErrs int64
		for _, r := range s.Procs {
			admitted, fallback, redisErrs = admitted+r.Admitted, fallback+r.Fallback, redisErrs+r.RedisErrors
		}
		heap, alloc := s.procValues(heapLive), s.procValues(heapAlloc)
		gor, sock, conns := s.procValues(goroutines), s.procValues(sockets), s.procValues(redisConns)
		cw.Write([]string{
			plain(s.At.Seconds()),
			fixed2(mib(median(heap))), fixed2(mib(maxOf(heap))), fixed2(mib(median(alloc))), fixed2(mib(maxOf(alloc))),
			plain(median(gor)), plain(maxOf(gor)), plain(median(sock)), plain(maxOf(sock)), plain(median(conns)), plain(maxOf(conns)),
			strconv.FormatUint(s.RedisUsedMemory, 10), strconv.FormatInt(s.RedisKeys, 10), strconv.Itoa(s.Sent), strconv.Itoa(s.Throttled),
			strconv.FormatInt(admitted, 10), strconv.FormatInt(fallback, 10), strconv.FormatInt(redisErrs, 10),
			strconv.FormatFloat(s.Took.Seconds(), 'f', 3, 64),
		})
	}
	cw.Flush()
	return cw.Error()
}

// parseUsedMemory returns used_memory from the reply of INFO memory.
func parseUsedMemory(info string) (uint64, error) {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "used_memory:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse INFO memory: used_memory %q: %w", v, err)
		}
		return n, nil
	}
	return 0, errors.New("parse INFO memory: no used_memory line")
}
