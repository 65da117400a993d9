package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"smsdispatcher/internal/promseries"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/provider/providertest"
)

// --record-alerts DIR: the fault runs whose /metrics the alert rules' unit
// tests replay (k8s/monitoring/testdata). Each run starts real `dispatcher
// serve` processes (built from ./cmd/dispatcher) against pstest, the Redis
// of this command (through a proxy that a fault can cut) and the provider
// simulator, feeds them a marketing campaign above its cap and a stream of
// OTP, injects its fault, and scrapes every process's /metrics once a
// second, as Prometheus would with a 1 s interval. What it writes, one file
// per run (DIR/<run>.txt):
//
//	# header lines: the run, its fault and its timeline
//	<series> <value at 0s> <value at 1s> ...
//
// one line per series of the families the rules read, labels as scraped
// plus pod="a"/"b" (the target label Prometheus adds; otel_scope_* dropped),
// values in the rule tests' own notation ("_" where a scrape lacked the
// series, "a+bxN" for N steps of b, "axN" for N repeats). The converter in
// k8s/monitoring (alerttests) turns a recording into a test's input_series.

// recordEvery is the scrape interval of a recording.
const recordEvery = time.Second

// recordFamilies are the metric families the rules read, and of a
// histogram the series they read (bucket, count).
var recordFamilies = map[string][]string{
	"sms_messages_total":                   nil,
	"sms_redis_calls_total":                nil,
	"sms_penalty_active":                   nil,
	"sms_account_paused":                   nil,
	"sms_fallback_active":                  nil,
	"sms_learned_rate":                     nil,
	"sms_redis_evicting_policy":            nil,
	"sms_retry_budget_tokens":              nil,
	"sms_otp_waiting":                      nil,
	"sms_configured_rate":                  nil,
	"sms_otp_latency_seconds":              {"bucket"},
	"http_client_request_duration_seconds": {"count"},
}

// alertRun is one fault run: a steady load (marketing above its cap, OTP
// at 5/s) on pods dispatcher processes for length, with events.
type alertRun struct {
	name, about string
	length      time.Duration
	pods        int
	sim         providertest.Config
	env         map[string]string // dispatcher settings beside the run's defaults
	accounts    string            // ACCOUNTS_FILE content (%q: the simulator's URL, the token file), if any
	redisFlags  []string          // flags of a redis-server of the run's own; none: the Redis every run shares
	mktRate     float64           // marketing published per second; 0: recordMktRate
	badFrom     time.Duration     // malformed messages at badRate from here, if badRate > 0
	badRate     float64
	events      []runEvent
}

// runEvent is a change a run makes at a time from its start.
type runEvent struct {
	at   time.Duration
	what string
	do   func(w *runWorld)
}

// runWorld is what a run's events act on.
type runWorld struct {
	sim       *providertest.Simulator
	delay     atomic.Int64 // provider answer delay, ns
	proxy     *redistest.Proxy
	redis     *redis.Client // the run's Redis, not through the proxy
	dlOutage  atomic.Bool
	tokenFile string
}

const (
	recordToken    = "rec-token"
	recordOTPRate  = 5.0
	recordMktRate  = 75.0 // above MARKETING_RPS 70: a campaign at its cap
	recordBadFirst = 60 * time.Second
)

func alertRuns() []alertRun {
	return []alertRun{
		{name: "healthy", length: 150 * time.Second,
			about: "nothing wrong: a campaign at the marketing cap (75/s published, 70/s allowed) and OTP at 5/s"},
		{name: "provider-429", length: 150 * time.Second,
			about: "the provider answers 429 (Retry-After 1 s) to every request for 10 s, as when something else sends on the account",
			events: []runEvent{{60 * time.Second, "the provider answers 429 to everything for 10 s", func(w *runWorld) {
				w.sim.FailFor(http.StatusTooManyRequests, 10*time.Second)
			}}}},
		{name: "account-suspended", length: 210 * time.Second,
			sim:   providertest.Config{SuspendAfter: 5, SuspendFor: 90 * time.Second},
			about: "429s push the account over the provider's suspension threshold (5 answers here, 300 in 10 minutes in production): suspended for 90 s, every answer 429 with the time left as Retry-After",
			events: []runEvent{{60 * time.Second, "the provider answers 429 (Retry-After 1 s) to the next 6 requests: the account is suspended for 90 s at the 6th", func(w *runWorld) {
				w.sim.ThrottleNext(6, time.Second)
			}}}},
		{name: "redis-down", length: 210 * time.Second,
			about: "Redis is unreachable (connections refused) for 90 s: every pod decides alone on its share",
			events: []runEvent{
				{60 * time.Second, "Redis refuses connections", func(w *runWorld) { w.proxy.SetMode(redistest.Refuse) }},
				{150 * time.Second, "Redis is back", func(w *runWorld) { w.proxy.SetMode(redistest.Up) }},
			}},
		{name: "redis-evicting", length: 450 * time.Second,
			redisFlags: []string{"--maxmemory", "1gb", "--maxmemory-policy", "volatile-lru"},
			about:      "Redis runs with maxmemory-policy volatile-lru (Memorystore's default), far from its maxmemory (nothing is evicted yet); the pods read the policy at start and every minute; the operator sets noeviction at 360 s",
			events: []runEvent{{360 * time.Second, "the operator sets maxmemory-policy noeviction (CONFIG SET)", func(w *runWorld) {
				if err := w.redis.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
					panic(err)
				}
			}}}},
		{name: "target-near-contract", length: 150 * time.Second, mktRate: 200,
			env:   map[string]string{"TARGET_RPS": "98", "MARKETING_RPS": "93", "BURST": "1", "PROVIDER_ARRIVAL_JITTER": "0"},
			about: "TARGET_RPS 98 on a contract of 100 (BURST 1, PROVIDER_ARRIVAL_JITTER 0: what the start-up check allows at the edge) and a campaign published at 200/s: the pods send at 98/s"},
		{name: "provider-5xx", length: 240 * time.Second,
			about: "the provider answers 503 to every request from 60 s to the end",
			events: []runEvent{{60 * time.Second, "the provider answers 503 to everything", func(w *runWorld) {
				w.sim.FailFor(http.StatusServiceUnavailable, time.Hour)
			}}}},
		{name: "provider-slow", length: 240 * time.Second,
			about: "the provider takes 1.5 s to answer each request from 60 s to the end",
			events: []runEvent{{60 * time.Second, "the provider answers after 1.5 s", func(w *runWorld) {
				w.delay.Store(int64(1500 * time.Millisecond))
			}}}},
		{name: "account-failure", length: 210 * time.Second,
			about: "the provider revokes the credential at 60 s (401 to every request); the Secret is updated with the new one at 150 s",
			events: []runEvent{
				{60 * time.Second, "the provider revokes the credential", func(w *runWorld) { w.sim.SetToken("rotated") }},
				{150 * time.Second, "the Secret (the token file) holds the new credential", func(w *runWorld) {
					if err := os.WriteFile(w.tokenFile, []byte("rotated\n"), 0o600); err != nil {
						panic(err)
					}
				}},
			}},
		{name: "dead-letters", length: 210 * time.Second, badFrom: recordBadFirst, badRate: 2,
			about: "a producer publishes malformed messages (2/s) from 60 s to the end: each is dead-lettered"},
		{name: "dead-letter-outage", length: 210 * time.Second, badFrom: 30 * time.Second, badRate: 2,
			about: "malformed messages (2/s) from 30 s; the dead-letter topic refuses publishes from 60 s to 150 s: each is nacked and comes back",
			events: []runEvent{
				{60 * time.Second, "the dead-letter topic refuses publishes", func(w *runWorld) { w.dlOutage.Store(true) }},
				{150 * time.Second, "the dead-letter topic accepts publishes again", func(w *runWorld) { w.dlOutage.Store(false) }},
			}},
		{name: "learned-rate", length: 240 * time.Second,
			sim:   providertest.Config{Limit: 60},
			about: "the provider allows 60/s where the account's target is 90; the learned limit on (adaptive.enabled), its search step 10 s",
			accounts: `accounts:
  - name: learned-rate
    provider: generic
    generic: {url: %q, token_file: %q}
    classes: [otp, marketing]
    adaptive: {enabled: true, min_rps: 10}
`},
	}
}

// recordAlerts runs the runs named in only (all if empty) and writes their
// recordings into dir.
func recordAlerts(ctx context.Context, dir string, only []string, redisOpts *redis.Options, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "loadtest-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "dispatcher")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "smsdispatcher/cmd/dispatcher")
	build.Stderr = stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the dispatcher: %w", err)
	}
	runs := alertRuns()
	if len(only) > 0 {
		runs = slices.DeleteFunc(runs, func(r alertRun) bool { return !slices.Contains(only, r.name) })
		if len(runs) != len(only) {
			return fmt.Errorf("--record-runs: unknown run in %q", only)
		}
	}
	for _, r := range runs {
		fmt.Fprintf(stderr, "loadtest: recording %s (%v)\n", r.name, r.length)
		rec, err := r.record(ctx, bin, tmp, redisOpts, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		if err := writeFile(filepath.Join(dir, r.name+".txt"), rec.write); err != nil {
			return err
		}
	}
	return nil
}

// record does one run and returns what it scraped.
func (r alertRun) record(ctx context.Context, bin, tmp string, redisOpts *redis.Options, stderr io.Writer) (*recording, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods := r.pods
	if pods == 0 {
		pods = 2
	}
	w := &runWorld{sim: providertest.NewGeneric(r.sim)}
	w.sim.SetToken(recordToken)
	simSrv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if d := time.Duration(w.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-req.Context().Done():
				return
			}
		}
		w.sim.ServeHTTP(rw, req)
	}))
	defer simSrv.Close()
	direct := *redisOpts // the run's Redis, for its events
	if len(r.redisFlags) > 0 {
		path, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, fmt.Errorf("a redis-server of the run's own: %w", err)
		}
		own, err := startRedis(ctx, path, r.redisFlags...)
		if err != nil {
			return nil, err
		}
		defer own.stop()
		direct = redis.Options{Addr: own.addr}
	}
	w.redis = redis.NewClient(&direct)
	defer w.redis.Close()
	proxy, err := redistest.StartProxy(direct.Addr)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	w.proxy = proxy
	ps := pstest.NewServer(
		pstest.ServerReactorOption{FuncName: "ModifyAckDeadline", Reactor: nackBackoff{}},
		pstest.ServerReactorOption{FuncName: "Publish", Reactor: deadLetterGate{&w.dlOutage}})
	defer ps.Close()

	runDir := filepath.Join(tmp, r.name)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	w.tokenFile = filepath.Join(runDir, "token")
	if err := os.WriteFile(w.tokenFile, []byte(recordToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	// The run's account is named after it: runs leave nothing in each
	// other's Redis keys.
	env := append(os.Environ(),
		"PUBSUB_EMULATOR_HOST="+ps.Addr, "PUBSUB_PROJECT_ID="+recordProject,
		"REDIS_URL=redis://"+proxy.Addr(), "REDIS_TIMEOUT=500ms")
	if r.accounts != "" {
		file := filepath.Join(runDir, "accounts.yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, r.accounts, simSrv.URL, w.tokenFile), 0o600); err != nil {
			return nil, err
		}
		env = append(env, "ACCOUNTS_FILE="+file)
	} else {
		env = append(env, "SMS_ACCOUNT="+r.name, "SMS_PROVIDER_URL="+simSrv.URL, "SMS_PROVIDER_TOKEN_FILE="+w.tokenFile)
	}
	for k, v := range r.env {
		env = append(env, k+"="+v)
	}
	setup := exec.CommandContext(ctx, bin, "setup")
	setup.Env, setup.Stderr = env, stderr
	if err := setup.Run(); err != nil {
		return nil, fmt.Errorf("dispatcher setup: %w", err)
	}

	var addrs []string
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Signal(os.Interrupt)
		}
		for _, p := range procs {
			p.Wait()
		}
	}()
	for range pods {
		addr, err := freeLoopback()
		if err != nil {
			return nil, err
		}
		logFile, err := os.Create(filepath.Join(runDir, "pod-"+string(rune('a'+len(procs)))+".log"))
		if err != nil {
			return nil, err
		}
		defer logFile.Close()
		p := exec.Command(bin, "serve")
		p.Env, p.Stderr = append(env, "HTTP_ADDR="+addr), logFile
		setParentDeathSignal(p)
		if err := p.Start(); err != nil {
			return nil, err
		}
		procs, addrs = append(procs, p), append(addrs, addr)
	}
	for _, addr := range addrs {
		if err := waitReady(ctx, "http://"+addr+"/readyz"); err != nil {
			return nil, err
		}
	}

	client, err := pubsub.NewClient(ctx, recordProject, option.WithEndpoint(ps.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		return nil, err
	}
	defer client.Close()

	rec := &recording{run: r, pods: pods, series: map[string]*recSeries{}}
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { r.feed(ctx, client, start) })
	wg.Go(func() {
		for _, ev := range r.events {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(ev.at))):
				ev.do(w)
			}
		}
	})
	tick := time.NewTicker(recordEvery)
	defer tick.Stop()
	for i := 0; time.Duration(i)*recordEvery <= r.length; i++ {
		if err := rec.scrape(ctx, i, addrs); err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	cancel()
	wg.Wait()
	st := w.sim.Stats()
	rec.simStats = st
	return rec, nil
}

const recordProject = "rec"

// feed publishes the run's traffic from start until ctx ends: marketing at
// recordMktRate, OTP at recordOTPRate, and the malformed messages.
func (r alertRun) feed(ctx context.Context, client *pubsub.Client, start time.Time) {
	otp := client.Publisher("sms-otp")
	mkt := client.Publisher("sms-marketing")
	defer otp.Stop()
	defer mkt.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var sentOTP, sentMkt, sentBad int
	mktRate := cmp.Or(r.mktRate, recordMktRate)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		el := time.Since(start).Seconds()
		for ; float64(sentMkt) < el*mktRate; sentMkt++ {
			mkt.Publish(ctx, &pubsub.Message{Data: message(fmt.Sprintf("%s-mkt-%d", r.name, sentMkt), "Our sale ends tonight")})
		}
		for ; float64(sentOTP) < el*recordOTPRate; sentOTP++ {
			otp.Publish(ctx, &pubsub.Message{Data: message(fmt.Sprintf("%s-otp-%d", r.name, sentOTP), "Your code is 482913")})
		}
		if r.badRate > 0 {
			for ; float64(sentBad) < (el-r.badFrom.Seconds())*r.badRate; sentBad++ {
				mkt.Publish(ctx, &pubsub.Message{Data: []byte("{not json")})
			}
		}
	}
}

func message(id, body string) []byte {
	b, _ := json.Marshal(map[string]string{"id": id, "to": "+819012345678", "body": body})
	return b
}

// nackBackoff holds a nacked message for its subscription's RetryPolicy
// minimum backoff (OTP 1 s, marketing 5 s: docs/contract.md), as Pub/Sub
// does; pstest would redeliver it within 10 ms.
type nackBackoff struct{}

func (nackBackoff) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.ModifyAckDeadlineRequest); ok && r.AckDeadlineSeconds == 0 {
		r.AckDeadlineSeconds = 5
		if strings.HasSuffix(r.Subscription, "/sms-otp-dispatcher") {
			r.AckDeadlineSeconds = 1
		}
	}
	return false, nil, nil
}

// deadLetterGate refuses publishes to the dead-letter topic while on.
type deadLetterGate struct{ on *atomic.Bool }

func (g deadLetterGate) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.PublishRequest); ok && g.on.Load() && strings.HasSuffix(r.Topic, "/sms-dead-letter") {
		return true, nil, status.Error(codes.PermissionDenied, "the dead-letter topic refuses publishes (recorded outage)")
	}
	return false, nil, nil
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady waits up to 30 s for url to answer 200.
func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready within 30s", url)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recording is what a run scraped: each series' value at each scrape.
type recording struct {
	run      alertRun
	pods     int
	series   map[string]*recSeries // by the series' text
	n        int                   // scrapes
	simStats providertest.Stats
}

type recSeries struct {
	values []float64 // NaN: absent from that scrape
}

// scrape reads every pod's /metrics as the i-th scrape.
func (rec *recording) scrape(ctx context.Context, i int, addrs []string) error {
	rec.n = i + 1
	for p, addr := range addrs {
		fams, err := fetchMetrics(ctx, "http://"+addr+"/metrics")
		if err != nil {
			return fmt.Errorf("scrape %d of pod %d: %w", i, p, err)
		}
		pod := string(rune('a' + p))
		for name, parts := range recordFamilies {
			f, ok := fams[name]
			if !ok {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, s := range samples(name, f.GetType(), parts, m) {
					rec.set(seriesText(s.name, m.GetLabel(), pod, s.extra), i, s.value)
				}
			}
		}
	}
	return nil
}

func (rec *recording) set(key string, i int, v float64) {
	s, ok := rec.series[key]
	if !ok {
		s = &recSeries{}
		rec.series[key] = s
	}
	for len(s.values) < i {
		s.values = append(s.values, math.NaN())
	}
	s.values = append(s.values, v)
}

type sample struct {
	name  string
	extra [][2]string
	value float64
}

// samples are the series of one metric the rules read.
func samples(name string, typ dto.MetricType, parts []string, m *dto.Metric) []sample {
	switch typ {
	case dto.MetricType_COUNTER:
		return []sample{{name: name, value: m.GetCounter().GetValue()}}
	case dto.MetricType_GAUGE:
		return []sample{{name: name, value: m.GetGauge().GetValue()}}
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		var out []sample
		if slices.Contains(parts, "bucket") {
			bs := h.GetBucket()
			for _, b := range bs {
				out = append(out, sample{name: name + "_bucket", extra: [][2]string{{"le", formatLe(b.GetUpperBound())}}, value: float64(b.GetCumulativeCount())})
			}
			// The text format lists the +Inf bucket, and the parser keeps
			// it; a histogram without one gets it from the count.
			if len(bs) == 0 || !math.IsInf(bs[len(bs)-1].GetUpperBound(), 1) {
				out = append(out, sample{name: name + "_bucket", extra: [][2]string{{"le", "+Inf"}}, value: float64(h.GetSampleCount())})
			}
		}
		if slices.Contains(parts, "count") {
			out = append(out, sample{name: name + "_count", value: float64(h.GetSampleCount())})
		}
		return out
	}
	return nil
}

func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// seriesText is name{labels} with the labels sorted, pod added and the
// OTel exporter's scope labels left out.
func seriesText(name string, lps []*dto.LabelPair, pod string, extra [][2]string) string {
	var ls [][2]string
	for _, lp := range lps {
		if !strings.HasPrefix(lp.GetName(), "otel_scope_") {
			ls = append(ls, [2]string{lp.GetName(), lp.GetValue()})
		}
	}
	ls = append(ls, [2]string{"pod", pod})
	ls = append(ls, extra...)
	slices.SortFunc(ls, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l[0], l[1])
	}
	b.WriteByte('}')
	return b.String()
}

func fetchMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(body))
}

// write writes the recording in the format of recordAlerts.
func (rec *recording) write(w io.Writer) error {
	r := rec.run
	fmt.Fprintf(w, "# %s: %s\n", r.name, r.about)
	fmt.Fprintf(w, "# recorded by `go run ./cmd/loadtest --record-alerts DIR --record-runs %s`: %d dispatcher processes (pod a, b), /metrics scraped every %v, %d scrapes from 0s\n",
		r.name, rec.pods, recordEvery, rec.n)
	fmt.Fprintf(w, "# load: marketing published at %g/s (MARKETING_RPS %s), OTP at %g/s", cmp.Or(r.mktRate, recordMktRate), cmp.Or(r.env["MARKETING_RPS"], "70"), recordOTPRate)
	if r.badRate > 0 {
		fmt.Fprintf(w, ", malformed messages at %g/s from %v", r.badRate, r.badFrom)
	}
	fmt.Fprintln(w)
	if len(r.redisFlags) > 0 {
		fmt.Fprintf(w, "# redis: a redis-server of the run's own, started with %s\n", strings.Join(r.redisFlags, " "))
	}
	for _, ev := range r.events {
		fmt.Fprintf(w, "# at %v: %s\n", ev.at, ev.what)
	}
	st := rec.simStats
	fmt.Fprintf(w, "# the provider: %d accepted, %d answered 429 for the rate, %d while suspended, %d failed (forced status), %d refused for the credential\n",
		st.Accepted, st.Throttled, st.SuspendedAnswers, st.Failed, st.Unauthorized)
	keys := make([]string, 0, len(rec.series))
	for k := range rec.series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vals := rec.series[k].values
		for len(vals) < rec.n {
			vals = append(vals, math.NaN())
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", k, promseries.Format(vals)); err != nil {
			return err
		}
	}
	return nil
}
