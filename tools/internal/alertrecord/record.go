package alertrecord

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
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
	"github.com/redis/go-redis/v9"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"smsdispatcher/internal/localstack"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/tools/internal/redisserver"
)

// Record runs the runs named in only (all if empty; Names lists them) on
// the Redis of redisOpts and writes their recordings into dir, progress to
// stderr.
func Record(ctx context.Context, dir string, only []string, redisOpts *redis.Options, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "alertrecord-")
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
		fmt.Fprintf(stderr, "alertrecord: recording %s (%v)\n", r.name, r.length)
		rec, err := r.record(ctx, bin, tmp, redisOpts, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		var b bytes.Buffer
		if err := rec.write(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, r.name+".txt"), b.Bytes(), 0o644); err != nil {
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
	w := &runWorld{}
	direct := *redisOpts // the run's Redis, for its events
	if len(r.redisFlags) > 0 {
		path, err := exec.LookPath("redis-server")
		if err != nil {
			return nil, fmt.Errorf("a redis-server of the run's own: %w", err)
		}
		own, err := redisserver.Start(ctx, path, r.redisFlags...)
		if err != nil {
			return nil, err
		}
		defer own.Stop()
		direct = redis.Options{Addr: own.Addr}
	}
	w.redis = redis.NewClient(&direct)
	defer w.redis.Close()
	proxy, err := redistest.StartProxy(direct.Addr)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	w.proxy = proxy
	sim := r.sim
	sim.Token = recordToken
	if len(r.optOuts) > 0 { // the pods serve receipts: the simulator signs them
		sim.Receipts.Secret = recordToken
	}
	var receiptTarget []target
	if r.receipts != nil {
		d, err := startReceiptDriver(ctx, r.name, *r.receipts)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		w.receipts = d
		receiptTarget = []target{{addr: d.addr, pod: "receipts", families: receiptFamilies}}
	}
	stack, err := localstack.Start(localstack.Options{
		Project:    recordProject,
		NackDelays: nackDelays,
		Reactors:   []pstest.ServerReactorOption{{FuncName: "Publish", Reactor: deadLetterGate{&w.dlOutage}}},
		Sim:        sim,
		Wrap: func(h http.Handler) http.Handler {
			var delayed http.Handler = http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
				if d := time.Duration(w.delay.Load()); d > 0 {
					select {
					case <-time.After(d):
					case <-req.Context().Done():
						return
					}
				}
				h.ServeHTTP(rw, req)
			})
			if w.receipts != nil {
				delayed = w.receipts.wrap(delayed)
			}
			return delayed
		},
		RedisURL: "redis://" + proxy.Addr(),
	})
	if err != nil {
		return nil, err
	}
	defer stack.Close()
	w.sim = stack.Sim
	ps, simURL := stack.Pubsub, stack.SimURL

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
		"REDIS_URL="+stack.RedisURL, "REDIS_TIMEOUT=500ms")
	if r.accounts != "" {
		file := filepath.Join(runDir, "accounts.yaml")
		if err := os.WriteFile(file, fmt.Appendf(nil, r.accounts, simURL, w.tokenFile), 0o600); err != nil {
			return nil, err
		}
		env = append(env, "ACCOUNTS_FILE="+file)
	} else {
		env = append(env, "SMS_ACCOUNT="+r.name, "SMS_PROVIDER_URL="+simURL, "SMS_PROVIDER_TOKEN_FILE="+w.tokenFile)
	}
	for k, v := range r.env {
		env = append(env, k+"="+v)
	}
	var podEnv [][]string // each pod's settings of its own, besides env
	var webhooks []string // the pods' inbound webhooks, for the run's STOPs
	if len(r.optOuts) > 0 {
		if podEnv, webhooks, err = inboundListeners(pods, r.name, w.tokenFile); err != nil {
			return nil, err
		}
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
		port, err := redisserver.FreePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		logFile, err := os.Create(filepath.Join(runDir, "pod-"+string(rune('a'+len(procs)))+".log"))
		if err != nil {
			return nil, err
		}
		defer logFile.Close()
		p := exec.Command(bin, "serve")
		p.Env, p.Stderr = append(env, "HTTP_ADDR="+addr), logFile
		if podEnv != nil {
			p.Env = append(p.Env, podEnv[len(procs)]...)
		}
		redisserver.SetParentDeathSignal(p)
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
	if webhooks != nil {
		wg.Go(func() { r.replyStop(ctx, w.sim, webhooks, start, stderr) })
	}
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
		if err := rec.scrape(ctx, i, append(podTargets(addrs), receiptTarget...)); err != nil {
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
// the run's mktRate, OTP at its otpRate and their verifications, and the
// malformed messages.
func (r alertRun) feed(ctx context.Context, client *pubsub.Client, start time.Time) {
	otp := client.Publisher("sms-otp")
	mkt := client.Publisher("sms-marketing")
	verifications := client.Publisher("sms-verifications")
	defer otp.Stop()
	defer mkt.Stop()
	defer verifications.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var sentOTP, sentMkt, sentBad, verifiedUpTo, sentAttack int
	mktRate, otpRate := cmp.Or(r.mktRate, recordMktRate), cmp.Or(r.otpRate, recordOTPRate)
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
		for ; float64(sentOTP) < el*otpRate; sentOTP++ {
			otp.Publish(ctx, &pubsub.Message{Data: message(fmt.Sprintf("%s-otp-%d", r.name, sentOTP), "Your code is 482913")})
		}
		if r.attackRate > 0 {
			for ; float64(sentAttack) < (el-r.attackFrom.Seconds())*r.attackRate; sentAttack++ {
				to := fmt.Sprintf("+8190%08d", rand.IntN(100_000_000))
				b, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("%s-attack-%d", r.name, sentAttack), "to": to, "body": "Your code is 482913"})
				otp.Publish(ctx, &pubsub.Message{Data: b})
			}
		}
		// The OTP published verifyLag ago: r.verified of each 5 are used.
		for ; r.verified > 0 && float64(verifiedUpTo) < (el-verifyLag.Seconds())*otpRate; verifiedUpTo++ {
			if verifiedUpTo%5 < r.verified {
				data, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("%s-otp-%d", r.name, verifiedUpTo)})
				verifications.Publish(ctx, &pubsub.Message{Data: data})
			}
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

// nackDelays are the dispatcher's subscriptions' RetryPolicy minimum
// backoffs (docs/contract.md), which Pub/Sub holds a nacked message for.
var nackDelays = map[string]time.Duration{
	"sms-otp-dispatcher":       topology.MinimumBackoff("otp"),
	"sms-marketing-dispatcher": topology.MinimumBackoff("marketing"),
}

// deadLetterGate refuses publishes to the dead-letter topic while on.
type deadLetterGate struct{ on *atomic.Bool }

func (g deadLetterGate) React(req any) (bool, any, error) {
	if r, ok := req.(*pubsubpb.PublishRequest); ok && g.on.Load() && strings.HasSuffix(r.Topic, "/sms-dead-letter") {
		return true, nil, status.Error(codes.PermissionDenied, "the dead-letter topic refuses publishes (recorded outage)")
	}
	return false, nil, nil
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
