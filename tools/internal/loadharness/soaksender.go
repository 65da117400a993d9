package loadharness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/provider"
)

// SoakSenderEnv names the environment variable that makes the program one
// soak sender instead of the harness: it holds the sender's soakSpec as
// JSON. The soak starts the program itself (os.Executable) that way, once
// per sender; a test binary does the same from TestMain.
const SoakSenderEnv = "LOADTEST_SOAK_SENDER"

// The lines a soak sender reads on stdin; end of input stops it.
const soakAskSample = "sample"

// Kinds of the lines a soak sender writes on stdout, one JSON senderReport
// a line.
const (
	reportReady  = "ready"  // connected; the workers start after writing it
	reportSample = "sample" // the answer to one soakAskSample
	reportDone   = "done"   // the workers have stopped; the last line
)

// soakSpec is what one soak sender needs to know, passed in SoakSenderEnv.
// It travels in the environment, not on the command line, because the Redis
// URL may hold a password.
type soakSpec struct {
	Index        int           `json:"index"`
	Senders      int           `json:"senders"`
	RedisURL     string        `json:"redis_url"`
	ProviderURL  string        `json:"provider_url"`
	Account      string        `json:"account"`
	Skew         time.Duration `json:"skew"`
	OTPRate      float64       `json:"otp_rate"` // this sender's share of --otp-rate
	MktWorkers   int           `json:"marketing_workers"`
	OTPWorkers   int           `json:"otp_workers"`
	Burst        int           `json:"burst"`
	MaxSenders   int           `json:"max_senders"`
	Redelivery   time.Duration `json:"redelivery"`
	RedisTimeout time.Duration `json:"redis_timeout"`
	Verbose      bool          `json:"verbose"`
}

// senderReport is one line a soak sender writes. The process figures are
// read when the line is written; the counters run from the sender's start.
type senderReport struct {
	Kind  string `json:"kind"`
	Index int    `json:"index"`

	// HeapLive is the reachable heap (/gc/heap/live:bytes) right after a
	// GC the sample forces: what a leak grows. Without the forced GC it
	// would be as old as the last GC, and a sender allocates so little
	// that its first GC (at the 4 MiB minimum heap goal) comes minutes
	// in. HeapAlloc (MemStats.HeapAlloc, read before that GC) also holds
	// the garbage of the GC cycle, so it swings by up to GOGC (100 %)
	// between two samples and cannot be held to 10 %; it is in the CSV.
	HeapLive   uint64 `json:"heap_live_bytes"`
	HeapAlloc  uint64 `json:"heap_alloc_bytes"`
	Goroutines int    `json:"goroutines"`
	// Sockets counts the process's open sockets (see openSockets): its
	// Redis connections and its connections to the provider; -1 where it
	// cannot be counted.
	Sockets int `json:"sockets"`
	// RedisConns is the go-redis pool's own count of its connections.
	RedisConns int `json:"redis_conns"`

	Admitted    int64 `json:"admitted"`
	Nacks       int64 `json:"nacks"`
	Fallback    int64 `json:"fallback_admits"`
	First429s   int64 `json:"first_429s"`
	RedisErrors int64 `json:"redis_errors"`
}

// parseSenderReport reads one line of a soak sender.
func parseSenderReport(line []byte) (senderReport, error) {
	var r senderReport
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return senderReport{}, fmt.Errorf("parse sender report %.80q: %w", line, err)
	}
	if dec.More() {
		return senderReport{}, fmt.Errorf("parse sender report %.80q: more than one value on the line", line)
	}
	switch r.Kind {
	case reportReady, reportSample, reportDone:
	default:
		return senderReport{}, fmt.Errorf("parse sender report %.80q: unknown kind %q", line, r.Kind)
	}
	return r, nil
}

// SoakSender runs the program as the soak sender that spec describes,
// on stdin and stdout, and returns its exit status.
func SoakSender(spec string) int {
	// An interrupt at the terminal reaches the whole process group: the
	// harness stops its senders by closing their stdin and waits for them,
	// so a sender must outlive the interrupt. SIGTERM, which the kernel
	// sends if the harness dies (redisserver.SetParentDeathSignal), still ends it.
	signal.Ignore(os.Interrupt)
	if err := runSoakSender(context.Background(), spec, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: soak sender:", err)
		return 1
	}
	return 0
}

// runSoakSender is one soak sender: one pod's Redis client, provider client
// and limiter (gcra) with its workers and a load of its own (a marketing
// backlog that never runs dry, its share of the OTP stream). It writes a
// ready line, answers each sample request on in with a sample line, and
// when in ends stops its workers, writes a done line and returns.
func runSoakSender(ctx context.Context, specJSON string, in io.Reader, out, stderr io.Writer) error {
	var spec soakSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("read %s: %w", SoakSenderEnv, err)
	}
	opts, err := redis.ParseURL(spec.RedisURL)
	if err != nil {
		// The URL may hold a password: do not repeat it.
		return errors.New("read " + SoakSenderEnv + ": redis_url is not a valid redis:// URL")
	}
	rdb := redisClient(opts, opts.Addr, &callCounter{})
	defer rdb.Close()
	client, err := provider.NewClient(spec.ProviderURL, simToken, provider.WithTimeout(sendTimeout))
	if err != nil {
		return fmt.Errorf("provider client: %w", err)
	}
	defer client.CloseIdleConnections()
	logger := slog.New(slog.DiscardHandler)
	if spec.Verbose {
		logger = slog.New(slog.NewTextHandler(stderr, nil)).With("sender", spec.Index)
	}
	lim, err := admission.New(rdb, admission.Config{
		Account:      spec.Account,
		TargetRPS:    targetRPS,
		MarketingRPS: marketingRPS,
		Burst:        spec.Burst,
		MaxSenders:   spec.MaxSenders,
		RedisTimeout: spec.RedisTimeout,
		RecordTTL:    recordTTL,
		Logger:       logger,
	})
	if err != nil {
		return fmt.Errorf("admission limiter: %w", err)
	}

	// Nothing a soak sender keeps may grow with the run by design: no
	// per-OTP arrival times or waits, which the matrix's report needs.
	st := &counters{noSamples: true}
	ld := newLoad(spec.Redelivery)
	ld.noArrivals = true
	s := &sender{skew: spec.Skew, body: sendBody, client: client, load: ld, st: st, policy: gcraPolicy{lim: lim, cost: 1, ids: strconv.Itoa(os.Getpid()) + "-", seq: new(atomic.Int64)}}

	if err := rdb.Ping(ctx).Err(); err != nil {
		fmt.Fprintf(stderr, "loadtest: soak sender %d: warning: Redis PING before the run: %v\n", spec.Index, err)
	}
	enc := json.NewEncoder(out) // one Write per line
	report := func(kind string) error {
		r := readProcess(rdb)
		r.Kind, r.Index = kind, spec.Index
		r.Admitted, r.Nacks, r.Fallback = st.admitted.Load(), st.nacks.Load(), st.fallback.Load()
		r.First429s, r.RedisErrors = st.first429.Load(), st.redisErrors.Load()
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write %s report: %w", kind, err)
		}
		return nil
	}
	if err := report(reportReady); err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { ld.streamOTP(runCtx, spec.OTPRate) })
	wg.Go(func() { ld.redeliver(runCtx) })
	for range spec.MktWorkers {
		wg.Go(func() { s.work(runCtx, false) })
	}
	for range spec.OTPWorkers {
		wg.Go(func() { s.work(runCtx, true) })
	}

	var loopErr error
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != soakAskSample {
			loopErr = fmt.Errorf("read requests: unknown request %.80q", sc.Text())
			break
		}
		if loopErr = report(reportSample); loopErr != nil {
			break
		}
	}
	if loopErr == nil && sc.Err() != nil {
		loopErr = fmt.Errorf("read requests: %w", sc.Err())
	}
	cancel()
	wg.Wait() // a send on the wire finishes within sendTimeout
	if loopErr != nil {
		return loopErr
	}
	return report(reportDone)
}

// readProcess reads this process's heap, goroutines and connections. It
// runs a GC (about a millisecond for a sender's heap of a few MiB).
func readProcess(rdb *redis.Client) senderReport {
	r := senderReport{
		HeapAlloc:  readMetric("/memory/classes/heap/objects:bytes"),
		Goroutines: int(readMetric("/sched/goroutines:goroutines")),
		Sockets:    openSockets(),
		RedisConns: int(rdb.PoolStats().TotalConns),
	}
	runtime.GC()
	r.HeapLive = readMetric("/gc/heap/live:bytes")
	return r
}

// readMetric returns the runtime/metrics value of name, which must be a
// uint64; 0 if this Go release lacks it.
func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// openSockets counts this process's open sockets: the entries of
// /proc/self/fd that link to "socket:[inode]". It is the honest count of
// open connections because it is the kernel's, whoever opened them: in a
// soak sender they are its Redis connections and its keep-alive connections
// to the provider (it listens on nothing, and its stdin and stdout are
// pipes), including any that a pool lost track of, which the pools' own
// statistics would miss. It returns -1 where /proc is not there.
func openSockets() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(link, "socket:") {
			n++
		}
	}
	return n
}
