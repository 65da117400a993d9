package loadharness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/provider/providertest"
	"smsdispatcher/tools/internal/redisserver"
)

const (
	// soakInterval is how often a soak samples; config.soakEvery, which
	// tests shorten, starts at it.
	soakInterval = 10 * time.Second
	// soakKeyPolls is how many times per sample interval DBSIZE is read;
	// a sample holds the most keys seen.
	soakKeyPolls = 10
	// soakStartTimeout bounds the start of all senders, up to their ready
	// lines.
	soakStartTimeout = 30 * time.Second
	// soakAnswerTimeout bounds one sample: the senders' answers and the
	// Redis calls. It is there to catch a hung sender, not a slow one: on a
	// starved machine (2 cores, load 20) a sender took over 10 s to answer.
	soakAnswerTimeout = time.Minute
	// soakStopGrace is how long a sender has to stop once its stdin is
	// closed: its sends on the wire end within sendTimeout. After it the
	// sender is killed.
	soakStopGrace = sendTimeout + 3*time.Second
)

// errSoakFailed is wrapped by the error of a soak that ran to its end and
// failed its pass criterion.
var errSoakFailed = errors.New("soak failed")

// soakSample is one sample of a soak: every sender process, Redis, and the
// provider simulator.
type soakSample struct {
	At              time.Duration  // since the senders started
	Procs           []senderReport // by sender index
	RedisUsedMemory uint64         // INFO memory used_memory
	RedisKeys       int64          // the most DBSIZE seen since the last sample
	Sent            int            // accepted by the provider so far
	Throttled       int            // 429s the provider answered so far
	Took            time.Duration  // from asking the senders to the last answer
}

// runSoak runs cfg.senders[0] sender processes with the real limiter at
// full rate against the Redis at redisURL and one provider simulator for
// cfg.soak, samples them every cfg.soakEvery, writes the table (and
// cfg.soakCSV) and judges the run. A run that fails its criterion returns
// an error wrapping errSoakFailed. Every sender is stopped and waited for
// before runSoak returns.
func runSoak(ctx context.Context, cfg *Config, redisURL string, stdout, progress io.Writer) error {
	if cfg.soakEvery <= 0 || cfg.soak < 2*cfg.soakEvery {
		return fmt.Errorf("--soak %v is shorter than two samples of %v", cfg.soak, cfg.soakEvery)
	}
	k := cfg.senders[0]
	m, _ := modeByName(cfg.modes[0])
	redisOpts, err := redis.ParseURL(redisURL)
	if err != nil {
		return errors.New("soak: the Redis URL is not a valid redis:// URL")
	}
	rdb := redis.NewClient(redisOpts)
	defer rdb.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("soak: find this program to start the senders: %w", err)
	}

	simCfg := m.sim
	simCfg.Latency = cfg.latency
	simCfg.MaxArrivals = -1 // the soak counts; it keeps no arrival
	sim := providertest.NewGeneric(simCfg)
	srv := httptest.NewServer(sim)
	defer srv.Close()

	ns := "soak-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	spec := soakSpec{
		Senders: k, RedisURL: redisURL, ProviderURL: srv.URL, Account: ns,
		OTPRate: cfg.otpRate / float64(k), MktWorkers: cfg.mktWorkers, OTPWorkers: cfg.otpWorkers,
		Burst: cfg.burstFor(m), MaxSenders: max(cfg.maxSenders, k),
		Redelivery: cfg.redelivery, RedisTimeout: cfg.redisTO, Verbose: cfg.verbose,
	}
	fmt.Fprintf(progress, "loadtest: soak: starting %d sender processes (gcra, %s) for %v\n", k, m.name, cfg.soak)
	children := make([]*soakChild, 0, k)
	defer func() {
		if len(children) > 0 { // an early return: stop them, reporting nothing
			stopSoakChildren(children)
		}
	}()
	for i := range k {
		spec.Index, spec.Skew = i, skewOf(i, k, cfg.skew)
		c, err := startSoakChild(exe, spec, progress)
		if err != nil {
			return err
		}
		children = append(children, c)
	}
	startCtx, cancel := context.WithTimeoutCause(ctx, soakStartTimeout,
		fmt.Errorf("%d senders not ready within %v", k, soakStartTimeout))
	defer cancel()
	for _, c := range children {
		if _, err := c.expect(startCtx, reportReady); err != nil {
			return err
		}
	}

	// Between samples the key count is polled soakKeyPolls times and a
	// sample holds the most seen: every key of the limiter expires at its
	// TAT, milliseconds to seconds ahead, so one DBSIZE sees two to four of
	// them by chance; the most seen over the interval is the working set,
	// which a leak grows.
	start := time.Now()
	var (
		samples  []soakSample
		keysSeen int64
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 1; ; n++ {
		at := min(time.Duration(n)*cfg.soakEvery/soakKeyPolls, cfg.soak)
		timer.Reset(time.Until(start.Add(at)))
		select {
		case <-ctx.Done():
			err := fmt.Errorf("soak interrupted after %v: %w", time.Since(start).Round(time.Second), ctx.Err())
			return errors.Join(err, writeSoakAborted(stdout, cfg, m, samples, err))
		case <-timer.C:
		}
		if n%soakKeyPolls != 0 && at < cfg.soak {
			keys, err := dbSize(ctx, rdb)
			if err != nil {
				err = fmt.Errorf("soak: at %v: %w", at, err)
				return errors.Join(err, writeSoakAborted(stdout, cfg, m, samples, err))
			}
			keysSeen = max(keysSeen, keys)
			continue
		}
		s, err := takeSoakSample(ctx, children, rdb, sim)
		if err != nil {
			err = fmt.Errorf("soak: sample at %v: %w", at, err)
			return errors.Join(err, writeSoakAborted(stdout, cfg, m, samples, err))
		}
		s.At = at
		s.RedisKeys = max(s.RedisKeys, keysSeen)
		keysSeen = 0
		samples = append(samples, s)
		if len(samples) == 1 || at == cfg.soak || at/time.Minute > samples[len(samples)-2].At/time.Minute {
			fmt.Fprintf(progress, "loadtest: soak %v/%v: sent %d, 429s %d, sender heap %.2f MiB (median)\n",
				at, cfg.soak, s.Sent, s.Throttled, mib(median(s.procValues(heapLive))))
		}
		if at == cfg.soak {
			break
		}
	}
	done, err := stopSoakChildren(children)
	children = nil // stopped
	if err != nil {
		return errors.Join(err, writeSoakAborted(stdout, cfg, m, samples, err))
	}

	v := judgeSoak(samples, cfg.soak)
	if err := writeSoakTable(stdout, cfg, m, samples, done, v); err != nil {
		return fmt.Errorf("write soak table: %w", err)
	}
	if err := writeSoakCSVFile(cfg, samples); err != nil {
		return err
	}
	if !v.Pass {
		return fmt.Errorf("%w: %s", errSoakFailed, v.summary())
	}
	return nil
}

// writeSoakAborted writes what a soak that could not finish sampled, and
// why it stopped, to the table and to cfg.soakCSV; nothing if it sampled
// nothing.
func writeSoakAborted(w io.Writer, cfg *Config, m mode, samples []soakSample, why error) error {
	if len(samples) == 0 {
		return nil
	}
	if err := writeSoakSamples(w, cfg, m, samples, -1); err != nil {
		return fmt.Errorf("write soak table: %w", err)
	}
	if _, err := fmt.Fprintf(w, "\nsoak: ABORTED: %v\n", why); err != nil {
		return fmt.Errorf("write soak table: %w", err)
	}
	return writeSoakCSVFile(cfg, samples)
}

// writeSoakCSVFile writes the samples to cfg.soakCSV, if set.
func writeSoakCSVFile(cfg *Config, samples []soakSample) error {
	if cfg.soakCSV == "" {
		return nil
	}
	if err := writeFile(cfg.soakCSV, func(w io.Writer) error { return writeSoakCSV(w, samples) }); err != nil {
		return fmt.Errorf("write --soak-csv: %w", err)
	}
	return nil
}

// takeSoakSample asks every sender for a sample, then reads Redis and the
// simulator.
func takeSoakSample(ctx context.Context, children []*soakChild, rdb *redis.Client, sim *providertest.Simulator) (soakSample, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, soakAnswerTimeout, fmt.Errorf("no answer within %v", soakAnswerTimeout))
	defer cancel()
	asked := time.Now()
	for _, c := range children { // all ask first, so that the answers are near in time
		if _, err := io.WriteString(c.stdin, soakAskSample+"\n"); err != nil {
			return soakSample{}, fmt.Errorf("ask sender %d: %w", c.index, err)
		}
	}
	var s soakSample
	for _, c := range children {
		r, err := c.expect(ctx, reportSample)
		if err != nil {
			return soakSample{}, err
		}
		s.Procs = append(s.Procs, r)
	}
	s.Took = time.Since(asked)
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return soakSample{}, fmt.Errorf("redis INFO memory: %w", err)
	}
	if s.RedisUsedMemory, err = parseUsedMemory(info); err != nil {
		return soakSample{}, err
	}
	if s.RedisKeys, err = dbSize(ctx, rdb); err != nil {
		return soakSample{}, err
	}
	st := sim.Stats()
	s.Sent, s.Throttled = st.Accepted, st.Throttled+st.SuspendedAnswers
	return s, nil
}

// dbSize returns the number of keys in rdb's database.
func dbSize(ctx context.Context, rdb *redis.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, soakAnswerTimeout)
	defer cancel()
	n, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis DBSIZE: %w", err)
	}
	return n, nil
}

// soakChild is one sender process and the goroutine that reads its lines.
// Its methods are called by one goroutine at a time.
type soakChild struct {
	index   int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	reports chan senderReport // its lines; closed at the end of its stdout
	readErr error             // why reading stopped early; set before reports is closed
}

// startSoakChild starts exe as the sender of spec; its stderr goes to
// stderr.
func startSoakChild(exe string, spec soakSpec, stderr io.Writer) (*soakChild, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("start sender %d: %w", spec.Index, err)
	}
	c := &soakChild{index: spec.Index, reports: make(chan senderReport, 4)}
	c.cmd = exec.Command(exe)
	c.cmd.Env = append(os.Environ(), SoakSenderEnv+"="+string(js))
	c.cmd.Stderr = stderr
	redisserver.SetParentDeathSignal(c.cmd) // an outright kill of the soak takes the senders along (Linux)
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start sender %d: %w", spec.Index, err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start sender %d: %w", spec.Index, err)
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sender %d: %w", spec.Index, err)
	}
	go c.read(stdout) // ends at the end of stdout, when the process exits
	return c, nil
}

// read passes the sender's lines to c.reports until its stdout ends. After
// a line that does not parse it discards the rest, so that the sender never
// blocks on a full pipe.
func (c *soakChild) read(stdout io.Reader) {
	defer close(c.reports)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		r, err := parseSenderReport(sc.Bytes())
		if err != nil {
			c.readErr = err
			io.Copy(io.Discard, stdout)
			return
		}
		c.reports <- r
	}
	c.readErr = sc.Err()
}

// expect returns the sender's next line, which must be of kind, waiting
// for it until ctx ends.
func (c *soakChild) expect(ctx context.Context, kind string) (senderReport, error) {
	select {
	case r, ok := <-c.reports:
		switch {
		case !ok && c.readErr != nil:
			return senderReport{}, fmt.Errorf("sender %d: %w", c.index, c.readErr)
		case !ok:
			return senderReport{}, fmt.Errorf("sender %d exited before its %s line (its stderr says why)", c.index, kind)
		case r.Kind != kind:
			return senderReport{}, fmt.Errorf("sender %d wrote a %s line, want %s", c.index, r.Kind, kind)
		}
		return r, nil
	case <-ctx.Done():
		return senderReport{}, fmt.Errorf("wait for sender %d's %s line: %w", c.index, kind, context.Cause(ctx))
	}
}

// stop closes the sender's stdin, which stops it, and waits for it: up to
// soakStopGrace, then it is killed. It returns the sender's done line.
func (c *soakChild) stop() (senderReport, error) {
	c.stdin.Close()
	var (
		done   senderReport
		got    bool
		killed bool
	)
	grace := time.NewTimer(soakStopGrace)
	defer grace.Stop()
	for open := true; open; {
		select {
		case r, ok := <-c.reports:
			open = ok
			if ok && r.Kind == reportDone {
				done, got = r, true
			}
		case <-grace.C:
			c.cmd.Process.Kill() // its stdout ends, and so does read
			killed = true
		}
	}
	err := c.cmd.Wait() // after read, as StdoutPipe requires
	switch {
	case killed:
		return done, fmt.Errorf("sender %d did not stop within %v and was killed", c.index, soakStopGrace)
	case err != nil:
		return done, fmt.Errorf("sender %d: %w", c.index, err)
	case c.readErr != nil:
		return done, fmt.Errorf("sender %d: %w", c.index, c.readErr)
	case !got:
		return done, fmt.Errorf("sender %d exited without its done line", c.index)
	}
	return done, nil
}

// stopSoakChildren stops all senders at once and waits for them. It returns
// their done lines by index and the first error.
func stopSoakChildren(children []*soakChild) ([]senderReport, error) {
	done := make([]senderReport, len(children))
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() { done[i], errs[i] = c.stop() })
	}
	wg.Wait()
	return done, errors.Join(errs...)
}
