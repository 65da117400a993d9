package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider/providertest"
)

// publishGate is a pstest reactor that, once armed, holds the first
// publish to one topic until the test opens it: the release it carries is
// published but not confirmed, the moment a releaser is killed in. The
// gate then lets the first half of its messages reach the topic (a
// publish the server took before the death) and drops the rest (one it
// never took). pstest runs a reactor under its lock, so nothing reaches
// the server while a publish is held.
type publishGate struct {
	topic   string
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{} // closed when a publish is held
	open    chan struct{} // closed by the test: the held publish goes on
	landed  atomic.Int64  // the held publish's messages that went on
	dropped atomic.Int64  // and those dropped
}

func (g *publishGate) React(req any) (bool, any, error) {
	if r, ok := req.(*pb.PublishRequest); ok && g.armed.Load() && r.GetTopic() == g.topic {
		g.once.Do(func() {
			close(g.held)
			<-g.open
			half := len(r.Messages) / 2
			g.landed.Store(int64(half))
			g.dropped.Store(int64(len(r.Messages) - half))
			r.Messages = r.Messages[:half]
		})
	}
	return false, nil, nil
}

// TestAServeKilledMidReleaseLosesNothing: a real serve process is
// SIGKILLed mid-release, with its release claimed (20 s lease, the
// default) and published but not confirmed; half of that publish reaches
// Pub/Sub, half never does. Another serve process finishes the release
// within 30 s of the kill (the promise of docs/windows.md): every
// deferred message is sent, none twice.
//
// The deferral is a cap's (one send per number in 10 s, on_cap defer),
// whose release comes seconds later where a window's comes only at a
// whole minute. The test takes each number's place itself, at one
// instant, so that every message is due at once and one pass claims
// them all.
func TestAServeKilledMidReleaseLosesNothing(t *testing.T) {
	const (
		numbers = 20
		project = "proj"
		token   = "release-t0ken"
	)
	unique := strings.ToLower(redistest.UniqueAccount(t))
	class := "k" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, unique[max(0, len(unique)-24):])
	gate := &publishGate{topic: "projects/" + project + "/topics/sms-" + class, held: make(chan struct{}), open: make(chan struct{})}
	ps := pstest.NewServer(pstest.ServerReactorOption{FuncName: "Publish", Reactor: gate})
	t.Cleanup(func() { ps.Close() })
	openGate := sync.OnceFunc(func() { close(gate.open) })
	t.Cleanup(openGate) // before ps.Close: a held publish holds pstest's lock
	sim := providertest.NewGeneric(providertest.Config{Token: token})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	file := writeFile(t, "accounts.yaml", fmt.Sprintf(`classes:
  - name: otp
  - name: %s
    max_per_recipient: {count: 1, per: 10s, on_cap: defer}
accounts:
  - {name: %s, provider: generic, generic: {url: %s, token: %s}, classes: [otp, %s]}
`, class, "a"+class, srv.URL, token, class))
	env := map[string]string{
		"PUBSUB_EMULATOR_HOST": ps.Addr,
		"PUBSUB_PROJECT_ID":    project,
		"REDIS_URL":            "redis://" + redistest.Addr(t),
		"ACCOUNTS_FILE":        file,
		"REDIS_TIMEOUT":        "2s", // a loaded CI machine is not a Redis outage
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}
	victim := startServeChild(t, "victim", freeAddr(t), env)
	victim.waitReady(t)

	// Each number's place taken now: every message published next is
	// deferred until 10 s from now (room for a loaded machine's pulls).
	rdb := redistest.Client(t)
	store := deferral.New(rdb, nil, nil)
	capped := policy.Sending{Cap: policy.Cap{Count: 1, Per: 10 * time.Second}}
	to := func(i int) string { return fmt.Sprintf("+819012%06d", i) }
	for i := range numbers {
		if j, err := store.Judge(ctx, deferral.Message{Class: class, ID: fmt.Sprint("earlier-", i), To: to(i)}, capped); err != nil || j.Verdict != deferral.Send {
			t.Fatalf("the place of number %d: %+v %v", i, j, err)
		}
	}
	client, err := topology.NewClient(ctx, project, "")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	pub := client.Publisher("sms-" + class)
	var ids []string
	var results []*pubsub.PublishResult
	for i := range numbers {
		id := fmt.Sprintf("held-%02d", i)
		data, _ := json.Marshal(map[string]string{"id": id, "to": to(i), "body": "sale"})
		results = append(results, pub.Publish(ctx, &pubsub.Message{Data: data}))
		ids = append(ids, id)
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	pub.Stop()
	gate.armed.Store(true) // from here, a publish to the class's topic is a release

	select {
	case <-gate.held:
	case <-time.After(60 * time.Second):
		t.Fatalf("no release began within 60s\n%s", victim.stderr.tail())
	}
	k := keys.DeferredOf(class)
	claims, err := rdb.HLen(ctx, k.Claims()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if claims < 2 {
		t.Fatalf("%d of %d ids claimed when the release was published, want them all, at least 2", claims, numbers)
	}
	if n := sim.Stats().Accepted; n != 0 {
		t.Fatalf("%d sent before the release, want none", n)
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	killedAt := time.Now()
	victim.wait()
	if ws, ok := victim.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the victim ended with %v, want SIGKILL", victim.err)
	}
	openGate() // half of the dead process's publish lands now: those are released twice

	// A pool's other processes run already when one dies; this one can
	// start only now (pstest is locked while the publish is held), so a
	// slow start on a loaded machine moves the bound: 10 s from its
	// readiness (the dead process's lease, deferral.ClaimLease, ran from
	// its claim, before the kill).
	survivor := startServeChild(t, "survivor", freeAddr(t), env)
	survivor.waitReady(t)
	bound := killedAt.Add(30 * time.Second)
	if b := time.Now().Add(10 * time.Second); b.After(bound) {
		t.Logf("the survivor was ready %v after the kill: the bound moves by %v", time.Since(killedAt).Round(100*time.Millisecond), b.Sub(bound).Round(100*time.Millisecond))
		bound = b
	}
	waitWithin(t, time.Until(bound), "the release finished by another process within 30s of the kill", func() bool {
		st, err := store.StatsOf(ctx, class, 0)
		return err == nil && st.Deferred == 0
	})
	t.Logf("the release finished %v after the kill", time.Since(killedAt).Round(100*time.Millisecond))
	waitWithin(t, 30*time.Second, "every message sent", func() bool {
		for _, id := range ids {
			if sim.SentCount(id) == 0 {
				return false
			}
		}
		return true
	})
	// Every copy published to the class's topic handled (a release made
	// twice is acked as a duplicate), so a second send would show by now.
	waitWithin(t, 30*time.Second, "every copy acked", func() bool {
		for _, m := range ps.Messages() {
			if m.Topic == gate.topic && m.Acks == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("killed with %d ids claimed: %d published by the dead process, %d not", claims, gate.landed.Load(), gate.dropped.Load())
	if gate.landed.Load() == 0 || gate.dropped.Load() == 0 {
		t.Errorf("the dead process's release landed %d and dropped %d, want some of each", gate.landed.Load(), gate.dropped.Load())
	}
	for _, id := range ids {
		if n := sim.SentCount(id); n != 1 {
			t.Errorf("%s sent %d times, want once", id, n)
		}
	}
	if err := survivor.exited(); err != nil {
		t.Errorf("the survivor exited: %v\n%s", err, survivor.stderr.tail())
	}
}

// startServeChild runs the real main (serve) in a child process with the
// test's environment (ACCOUNTS_FILE names the provider) and its own HTTP
// address; it is killed when the test ends, whatever happens.
func startServeChild(t *testing.T, name, addr string, env map[string]string) *killChild {
	t.Helper()
	c := &killChild{name: name, addr: addr, stderr: &killBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "serve")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if (!strings.HasPrefix(k, "SMS_") && !strings.HasPrefix(k, "OTEL_") && !strings.HasPrefix(k, "REDIS_")) || env[k] != "" {
			c.cmd.Env = append(c.cmd.Env, kv)
		}
	}
	c.cmd.Env = append(c.cmd.Env, "DISPATCHER_RUN_MAIN=1", "HTTP_ADDR="+addr)
	c.cmd.Stdout = io.Discard
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill() // an error means it has exited already
		c.wait()
	})
	return c
}

// waitReady waits for c's /readyz, failing t if c exits first.
func (c *killChild) waitReady(t *testing.T) {
	t.Helper()
	waitWithin(t, 60*time.Second, c.name+" ready", func() bool {
		if err := c.exited(); err != nil {
			t.Fatalf("%s exited before it was ready: %v\n%s", c.name, err, c.stderr.tail())
		}
		return get(t, "http://"+c.addr+"/readyz") == http.StatusOK
	})
}
