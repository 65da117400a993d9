package loadharness

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/scriptop"
	"smsdispatcher/internal/topology"
	"smsdispatcher/ledger"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/server"
	"smsdispatcher/status"
)

// The accounts scenario measures what a process pays for its number of
// accounts (one per country, or per tenant): for each size of
// --accounts, one dispatcher process (this program started again with
// AccountsProcessEnv set: server.New and Run, as serve wires them, on
// pstest, the given Redis and a provider simulator) with that many
// accounts, each routed one destination prefix, sends OTP to every
// prefix in turn for --duration, and reports its resident memory, its
// goroutines, its Redis connections, its calls of the scripts that are
// not a message's (heartbeats, and what keeps an idle account's state)
// per second, and how long `dispatcher status` takes to read every
// account.
const (
	scenAccounts = "accounts"

	accountsDuration = 10 * time.Second
	accountsOTPRate  = 20.0 // OTP a second, spread over the accounts
	// accountsStatusReads is how many status reads the median is of.
	accountsStatusReads = 5
	// The criteria, against the smallest size of the run.
	// Heartbeat calls a second per process: one; and every call not for a
	// message: the beat and at most one read of an idle account's health.
	// A window of w seconds may catch one more of each (accountsLimit).
	accountsMaxBeats = 1.0
	accountsMaxOwn   = 2.0
	accountsMaxRSS   = 2.0 // resident memory, largest size over smallest
	accountsMaxConns = 2.0 // Redis connections, largest size over smallest
)

// AccountsProcessEnv names the environment variable that makes the program
// one process of the accounts scenario: it holds its accountsSpec as JSON.
// tools/cmd/loadtest (and this package's TestMain) hand it to AccountsProcess.
const AccountsProcessEnv = "LOADTEST_ACCOUNTS_PROCESS"

// accountsSpec is what one process of the scenario needs to know.
type accountsSpec struct {
	Accounts int           `json:"accounts"`
	RedisURL string        `json:"redis_url"`
	Duration time.Duration `json:"duration"`
	OTPRate  float64       `json:"otp_rate"`
}

// accountsRow is one process's figures, the line it writes on stdout.
type accountsRow struct {
	Accounts   int     `json:"accounts"`
	Sent       int     `json:"sent"`
	RSS        int64   `json:"rss_bytes"` // VmRSS at the end of the run
	Goroutines int     `json:"goroutines"`
	RedisConns int     `json:"redis_conns"`      // the client's pool, at the end of the run
	Window     float64 `json:"window_s"`         // the run's second half, in seconds, over which the calls are counted
	Beats      float64 `json:"beat_calls_per_s"` // heartbeat calls a second, over the window
	Own        float64 `json:"own_calls_per_s"`  // script calls not for a message a second, the heartbeats' included
	OwnOps     string  `json:"own_ops"`          // those calls by operation
	StatusMs   float64 `json:"status_ms"`        // `dispatcher status`'s read of every account, median
}

// runAccountsRows runs one process per size of --accounts.
func runAccountsRows(ctx context.Context, cfg *Config, redisURL string, progress io.Writer) ([]*accountsRow, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var rows []*accountsRow
	for i, n := range cfg.accounts {
		fmt.Fprintf(progress, "loadtest: run %d/%d: scenario accounts, %d accounts (%v)\n", i+1, len(cfg.accounts), n, cfg.duration)
		spec, _ := json.Marshal(accountsSpec{Accounts: n, RedisURL: redisURL, Duration: cfg.duration, OTPRate: accountsOTPRate})
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), AccountsProcessEnv+"="+string(spec))
		cmd.Stderr = progress
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("accounts process of %d accounts: %w", n, err)
		}
		var r accountsRow
		if err := json.Unmarshal(out, &r); err != nil {
			return nil, fmt.Errorf("accounts process of %d accounts answered %q: %w", n, out, err)
		}
		rows = append(rows, &r)
	}
	return rows, nil
}

// AccountsProcess runs one process of the accounts scenario, spec its
// accountsSpec as JSON, and writes its accountsRow on stdout; it returns
// the exit status.
func AccountsProcess(spec string) int {
	var s accountsSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil || s.Accounts < 1 || s.Duration <= 0 {
		fmt.Fprintf(os.Stderr, "read %s: want an accountsSpec, got %q\n", AccountsProcessEnv, spec)
		return 2
	}
	r, err := accountsProcess(context.Background(), s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "accounts process:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

func accountsProcess(ctx context.Context, s accountsSpec) (*accountsRow, error) {
	ns := "lt-accounts-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	stack, err := localstack.Start(localstack.Options{Project: failoverProject, RedisURL: s.RedisURL,
		Sim: providertest.Config{Token: simToken, Limit: 100 * s.Accounts, Window: time.Second, SuspendAfter: -1}})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	dir, err := os.MkdirTemp("", "loadtest-accounts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "accounts.yaml")
	// One simulator for every account, each at a path of its own (the
	// accounts file refuses two accounts of one URL): /<n>/v1/messages.
	sim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		r.URL.Path = "/" + rest
		stack.Sim.ServeHTTP(w, r)
	}))
	defer sim.Close()
	if err := os.WriteFile(file, []byte(accountsFile(ns, s.Accounts, sim.URL)), 0o600); err != nil {
		return nil, err
	}
	env := map[string]string{"PUBSUB_PROJECT_ID": failoverProject, "REDIS_URL": s.RedisURL, "ACCOUNTS_FILE": file}
	fs := flag.NewFlagSet("accounts", flag.ContinueOnError)
	load := config.Flags(fs, config.All, func(k string) string { return env[k] })
	if err := fs.Parse(nil); err != nil {
		return nil, err
	}
	cfg, err := load()
	if err != nil {
		return nil, err
	}
	routing, err := cfg.Routing()
	if err != nil {
		return nil, err
	}
	cfg.Lanes = routing.Classes

	admin, err := topology.NewClient(ctx, cfg.ProjectID, stack.Pubsub.Addr)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	t := cfg.Topology()
	t.WithoutDeadLetterPolicy = true // pstest
	if err := topology.Setup(ctx, admin, t, func(string, string, string) {}); err != nil {
		return nil, err
	}
	rdb, err := redisconn.New(redisconn.Settings{URL: s.RedisURL, CallTimeout: cfg.RedisTimeout})
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	calls := &opCounter{}
	rdb.AddHook(calls)
	ps, err := topology.NewClient(ctx, cfg.ProjectID, stack.Pubsub.Addr)
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	var accts []server.Account
	for _, a := range routing.Accounts {
		sender, secret, err := a.Sender(cfg.SendTimeout)
		if err != nil {
			return nil, err
		}
		defer sender.CloseIdleConnections()
		accts = append(accts, server.Account{Setup: a, Sender: sender, Credentials: secret})
	}
	srv, err := server.New(cfg, accts, rdb, ps, server.Options{
		Version: "loadtest", Emulator: true, Logger: slog.New(slog.DiscardHandler), Route: routing.Route,
	})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	running.Go(func() { srv.Run(runCtx) })
	defer func() { stop(); running.Wait(); srv.Close() }()

	// OTP to every account's prefix in turn; the calls counted over the
	// run's second half, once every process-wide loop has started.
	otp := admin.Publisher(cfg.ClassList()[0].Topic)
	defer otp.Stop()
	begin := time.Now()
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.OTPRate))
	defer tick.Stop()
	var half map[string]int64
	var halfAt time.Time
	for i := 0; time.Since(begin) < s.Duration; i++ {
		<-tick.C
		if halfAt.IsZero() && time.Since(begin) >= s.Duration/2 {
			half, halfAt = calls.snapshot(), time.Now()
		}
		body, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("%s-%d", ns, i), "to": accountPrefix(i%s.Accounts) + "5550100", "body": "code"})
		otp.Publish(ctx, &pubsub.Message{Data: body})
	}
	end, endAt := calls.snapshot(), time.Now()
	r := &accountsRow{Accounts: s.Accounts, Sent: stack.Sim.Stats().Accepted, RSS: vmRSS(), Goroutines: runtime.NumGoroutine(),
		RedisConns: int(rdb.PoolStats().TotalConns)}
	var ops []string
	var notMessages int64
	for op, n := range end {
		if d := n - half[op]; d > 0 && !messageOps[op] {
			notMessages += d
			ops = append(ops, fmt.Sprintf("%s %.2f/s", op, float64(d)/endAt.Sub(halfAt).Seconds()))
		}
	}
	slices.Sort(ops)
	span := endAt.Sub(halfAt).Seconds()
	r.Window = span
	r.Beats = float64(end[status.OpHeartbeat]-half[status.OpHeartbeat]) / span
	r.Own, r.OwnOps = float64(notMessages)/span, strings.Join(ops, ", ")

	// `dispatcher status`, as it reads: a limiter per account, then Read.
	var setups []status.Setup
	for _, a := range routing.Accounts {
		lc := cfg.Limiter(a)
		lc.Logger = slog.New(slog.DiscardHandler)
		lim, err := admission.New(rdb, lc)
		if err != nil {
			return nil, err
		}
		setups = append(setups, status.Setup{Account: a, Limiter: lim})
	}
	var took []float64
	for range accountsStatusReads {
		at := time.Now()
		if _, err := status.Read(ctx, status.Redis{Client: rdb, Timeout: cfg.RedisTimeout}, setups, routing, at); err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		took = append(took, float64(time.Since(at).Microseconds())/1000)
	}
	slices.Sort(took)
	r.StatusMs = took[len(took)/2]
	return r, nil
}

// messageOps are the scripts a message's handling calls, and "other" (a
// command that is no script): the rest are the process's own (its
// heartbeats, an idle account's health).
var messageOps = map[string]bool{
	admission.OpAdmit: true, admission.OpFinish: true, admission.OpClaim: true, admission.OpRelease: true,
	admission.OpPenalty: true, ledger.OpReceipt: true, admission.OpPool: true, ledger.OpGiveBack: true, scriptop.Other: true,
}

// accountPrefix is the destination prefix account i serves.
func accountPrefix(i int) string { return fmt.Sprintf("+1%03d", 200+i) }

// accountsFile is the ACCOUNTS_FILE of n generic accounts on the
// simulator at url, account i serving accountPrefix(i), routed by the
// longest prefix.
func accountsFile(ns string, n int, url string) string {
	var b strings.Builder
	b.WriteString("route: longest_prefix\naccounts:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: %s-%02d\n    provider: generic\n    generic: {url: %q, token: %q}\n"+
			"    contract_rps: 100\n    target_rps: 90\n    burst: 5\n    classes: [otp, marketing]\n    destinations: [%q]\n",
			ns, i, fmt.Sprintf("%s/%02d", url, i), simToken, accountPrefix(i))
	}
	return b.String()
}

// vmRSS is the process's resident memory (Linux's /proc), 0 if unknown.
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// An opCounter counts a client's script calls by operation.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int64
}

func (c *opCounter) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[string]int64{}
	}
	c.ops[op]++
}

func (c *opCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ops)
}

func (c *opCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *opCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(scriptop.Of(cmd.Args()))
		return next(ctx, cmd)
	}
}

func (c *opCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(scriptop.Of(cmd.Args()))
		}
		return next(ctx, cmds)
	}
}
