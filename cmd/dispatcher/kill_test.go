package main

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"go.uber.org/goleak"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/topology"
	"smsdispatcher/ledger"
	"smsdispatcher/provider/providertest"
)

// TestSIGKILLMidFloodLosesNothing is the crash test of docs/design.md ("What
// the measurements must show"): two real
// dispatcher processes (serve) share a flood; one is SIGKILLed once about a
// third of it is sent, the other drains the rest, redeliveries included.
//
// Every message must end sent at least once, or dead-lettered; every one
// must be acked; and the duplicate sends (sum of sends-1 per id) must not
// exceed the messages in flight at the kill.
//
// "In flight at the kill" is the set the send-once claim cannot protect: the
// ids the killed process had taken to the provider (its own provider
// endpoint saw a request for them) whose send was not recorded in Redis at
// the kill (their record was not "sent" or "rejected"). Only such an id can
// be sent twice: the provider may have accepted it while the process died
// before recording it, and its claim then expires and a redelivery sends
// it again. A message the dead process had sent and recorded but not yet
// acked comes back too, and must be acked as a duplicate without a second
// send. A looser count (any provider request started before the kill whose
// Pub/Sub message was not acked 150 ms later) is logged.
//
// No timing is asserted: only counts. The hang bounds are generous.
func TestSIGKILLMidFloodLosesNothing(t *testing.T) {
	// Registered first, so it runs after every other cleanup: the test
	// leaves no goroutine of its own behind.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, before,
			goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		)
	})
	const (
		token      = "kill-t0ken-8c2f"
		phone      = "+819012345678"
		marketingN = 300
		otpN       = 20
		project    = "proj"
	)
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	// The latency makes sends really in flight when the kill comes.
	sim := providertest.NewGeneric(providertest.Config{Token: token, Latency: 30 * time.Millisecond})
	// Each child has its own endpoint in front of the one simulator, so the
	// test knows which ids the killed process took to the provider.
	endpoints := [2]*killEndpoint{{sim: sim, seen: map[string]time.Time{}}, {sim: sim, seen: map[string]time.Time{}}}
	var servers [2]*httptest.Server
	for i, e := range endpoints {
		servers[i] = httptest.NewServer(e)
		t.Cleanup(servers[i].Close) // after the children are killed (cleanups run last first)
	}
	account := redistest.UniqueAccount(t)
	redisAddr := redistest.Addr(t)
	env := map[string]string{
		"PUBSUB_EMULATOR_HOST": ps.Addr,
		"PUBSUB_PROJECT_ID":    project,
		"REDIS_URL":            "redis://" + redisAddr,
		"SMS_ACCOUNT":          account,
		"SMS_PROVIDER_TOKEN":   token,
		// A dead process's claims expire within 1s+2s+5s of the kill; its
		// leased messages come back once the lease it last asked for (10s,
		// renewed every few seconds) runs out, mostly after that. One that
		// comes back sooner is nacked (in_flight_elsewhere) until it does.
		"MARKETING_MAX_WAIT": "1s",
		"OTP_MAX_WAIT":       "1s",
		"SEND_TIMEOUT":       "2s",
		// A loaded CI machine is not a Redis outage.
		"REDIS_TIMEOUT": "2s",
		"MAX_SENDERS":   "2",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	if err := run(ctx, []string{"setup"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("setup: %v", err)
	}

	// Two serve processes.
	children := [2]*killChild{}
	for i := range children {
		children[i] = startKillChild(t, fmt.Sprintf("child-%d", i), servers[i].URL, freeAddr(t), env)
	}
	for _, c := range children {
		waitWithin(t, 60*time.Second, c.name+" ready", func() bool {
			select {
			case <-c.done:
				t.Fatalf("%s exited before it was ready: %v\n%s", c.name, c.err, c.stderr.tail())
			default:
			}
			return get(t, "http://"+c.addr+"/readyz") == http.StatusOK
		})
	}

	// The flood: marketing with a few OTP among it, unique ids.
	client, err := topology.NewClient(ctx, project, "")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	type published struct {
		id, class string
	}
	var flood []published
	pubs := map[string]*pubsub.Publisher{"marketing": client.Publisher("sms-marketing"), "otp": client.Publisher("sms-otp")}
	var results []*pubsub.PublishResult
	for i := range marketingN + otpN {
		p := published{fmt.Sprintf("flood-m-%03d", i), "marketing"}
		if i%((marketingN+otpN)/otpN) == 7 {
			p = published{fmt.Sprintf("flood-o-%03d", i), "otp"}
		}
		data, _ := json.Marshal(map[string]string{"id": p.id, "to": phone, "body": "Flood message " + p.id})
		results = append(results, pubs[p.class].Publish(ctx, &pubsub.Message{Data: data}))
		flood = append(flood, p)
	}
	for _, r := range results {
		if _, err := r.Get(ctx); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	for _, p := range pubs {
		p.Stop()
	}

	rdb := redistest.Client(t)
	claims := admission.NewClaims(rdb, account, 0, 0, 0, nil)
	// recordedOf returns which of ids have their send (or rejection)
	// recorded in Redis.
	recordedOf := func(ids []string) map[string]bool {
		recorded := map[string]bool{}
		if len(ids) == 0 {
			return recorded
		}
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = claims.Key(id)
		}
		vals, err := rdb.MGet(ctx, keys...).Result()
		if err != nil {
			t.Fatalf("redis: %v", err)
		}
		for i, v := range vals {
			if s, ok := v.(string); ok && (s == ledger.RecordSent || s == ledger.RecordRejected) {
				recorded[ids[i]] = true
			}
		}
		return recorded
	}

	// Kill one child once about a third of the flood is sent: the busier
	// one, so that it surely has sends in flight, and (within a bound) at
	// a moment when it has sent and recorded a message whose ack has not
	// reached Pub/Sub yet (acks go out in batches every 100ms): that
	// message comes back, and only the send-once record keeps it from a
	// second send.
	waitWithin(t, 60*time.Second, "a third of the flood sent", func() bool { return sim.Stats().Accepted >= len(flood)/3 })
	victim, survivor := children[0], children[1]
	ve, se := endpoints[0], endpoints[1]
	if endpoints[1].count() > endpoints[0].count() {
		victim, survivor, ve, se = children[1], children[0], endpoints[1], endpoints[0]
	}
	for aim := time.Now().Add(5 * time.Second); time.Now().Before(aim); time.Sleep(10 * time.Millisecond) {
		acked := killAcked(ps)
		var sentUnacked []string
		for id := range ve.snapshot() {
			if !acked[id] && sim.SentCount(id) > 0 {
				sentUnacked = append(sentUnacked, id)
			}
		}
		if len(recordedOf(sentUnacked)) > 0 {
			break
		}
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL %s: %v", victim.name, err)
	}
	victim.wait()
	killedAt := time.Now()
	sentAtKill := sim.Stats().Accepted

	// What Redis held for each id at the kill: the dead process's claims
	// stay as they were until they expire (seconds from now).
	ids := make([]string, len(flood))
	for i, p := range flood {
		ids[i] = p.id
	}
	recorded := recordedOf(ids) // id -> its send (or rejection) was recorded at the kill

	// The looser count: a provider request started before the
	// kill, its message not acked once in-transit acks had time to land.
	time.Sleep(150 * time.Millisecond)
	ackedAfterKill := killAcked(ps)
	startedBeforeKill := map[string]bool{}
	for _, e := range endpoints {
		for id, at := range e.snapshot() {
			if at.Before(killedAt) {
				startedBeforeKill[id] = true
			}
		}
	}
	looseInFlight := 0
	for id := range startedBeforeKill {
		if !ackedAfterKill[id] {
			looseInFlight++
		}
	}

	// The survivor drains everything, redeliveries of the dead process's
	// messages included.
	waitWithin(t, 90*time.Second, "every message acked", func() bool {
		select {
		case <-survivor.done:
			t.Fatalf("%s exited while draining: %v\n%s", survivor.name, survivor.err, survivor.stderr.tail())
		default:
		}
		acked := killAcked(ps)
		for _, p := range flood {
			if !acked[p.id] {
				return false
			}
		}
		return true
	})
	drained := time.Since(killedAt)

	if err := survivor.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", survivor.name, err)
	}
	select {
	case <-survivor.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60s of SIGTERM\n%s", survivor.name, survivor.stderr.tail())
	}
	if err := survivor.exited(); err != nil {
		t.Errorf("%s after SIGTERM: %v, want exit status 0\n%s", survivor.name, err, survivor.stderr.tail())
	}

	// In flight at the kill: ids the killed process took to the provider
	// whose send was not recorded.
	// And the ids it had sent and recorded but not acked: they come back,
	// and the send-once record alone keeps them from a second send.
	inFlight := map[string]bool{}
	recordedNotAcked := 0
	for id := range ve.snapshot() {
		switch {
		case !recorded[id]:
			inFlight[id] = true
		case !ackedAfterKill[id]:
			recordedNotAcked++
		}
	}
	deadLettered := killDeadLettered(ps, "projects/"+project+"/topics/sms-dead-letter")
	acked := killAcked(ps)
	sent, duplicates := 0, 0
	var lost, notAcked, badDups []string
	for _, p := range flood {
		n := sim.SentCount(p.id)
		if n > 0 {
			sent++
		}
		if n > 1 {
			duplicates += n - 1
			if !inFlight[p.id] || n > 2 {
				badDups = append(badDups, fmt.Sprintf("%s sent %d times", p.id, n))
			}
		}
		if n == 0 && !deadLettered[p.id] {
			lost = append(lost, p.id)
		}
		if !acked[p.id] {
			notAcked = append(notAcked, p.id)
		}
	}
	dlCount := 0
	for _, p := range flood {
		if deadLettered[p.id] {
			dlCount++
		}
	}
	redelivered, maxDeliveries := 0, 0
	for _, m := range ps.Messages() {
		if m.Topic != "projects/"+project+"/topics/sms-dead-letter" && m.Deliveries > 1 {
			redelivered++
			maxDeliveries = max(maxDeliveries, m.Deliveries)
		}
	}
	t.Logf("published %d (%d marketing, %d OTP); killed %s after %d sends; "+
		"requests via killed/surviving endpoint: %d/%d ids",
		len(flood), marketingN, otpN, victim.name, sentAtKill, ve.count(), se.count())
	t.Logf("sent %d, dead-lettered %d, duplicates %d; in flight at the kill: %d (unrecorded sends of the killed process), "+
		"%d (requests started before the kill, not acked 150ms after); sent, recorded, not acked at the kill "+
		"(redelivered, must not be sent again): %d; redelivered %d (at most %d deliveries); drained %v after the kill",
		sent, dlCount, duplicates, len(inFlight), looseInFlight, recordedNotAcked, redelivered, maxDeliveries,
		drained.Round(time.Millisecond))

	logs := victim.stderr.String() + survivor.stderr.String()
	if len(lost) > 0 {
		t.Errorf("%d messages neither sent nor dead-lettered: %v", len(lost), lost)
	}
	if len(notAcked) > 0 {
		t.Errorf("%d messages never acked: %v", len(notAcked), notAcked)
	}
	if duplicates > len(inFlight) || len(badDups) > 0 {
		t.Errorf("%d duplicate sends, %d messages in flight at the kill; duplicates outside it: %v",
			duplicates, len(inFlight), badDups)
	}
	for _, secret := range []string{token, phone, strings.TrimPrefix(phone, "+81")} {
		if strings.Contains(logs, secret) {
			t.Errorf("the children's logs hold %q", secret)
		}
	}
	if t.Failed() {
		t.Logf("%s stderr (killed):\n%s", victim.name, victim.stderr.tail())
		t.Logf("%s stderr:\n%s", survivor.name, survivor.stderr.tail())
	}
}

// killEndpoint is one child's provider endpoint: it notes when each id
// first reached it, then hands the request to the shared simulator.
type killEndpoint struct {
	sim  *providertest.Simulator
	mu   sync.Mutex
	seen map[string]time.Time // guarded by mu
}

func (e *killEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Idempotency-Key")
	now := time.Now()
	e.mu.Lock()
	if _, ok := e.seen[id]; !ok {
		e.seen[id] = now
	}
	e.mu.Unlock()
	e.sim.ServeHTTP(w, r)
}

func (e *killEndpoint) snapshot() map[string]time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := make(map[string]time.Time, len(e.seen))
	for k, v := range e.seen {
		m[k] = v
	}
	return m
}

func (e *killEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

// killChild is a dispatcher serve process.
type killChild struct {
	name, addr string
	cmd        *exec.Cmd
	stderr     *killBuffer
	done       chan struct{} // closed once Wait returned
	err        error         // Wait's result; read after done
}

// startKillChild runs the real main (serve) in a child process with the
// test's environment, its own provider URL and HTTP address. It is killed
// when the test ends, whatever happens.
func startKillChild(t *testing.T, name, providerURL, addr string, env map[string]string) *killChild {
	t.Helper()
	c := &killChild{name: name, addr: addr, stderr: &killBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "serve")
	// The test's environment (t.Setenv) and nothing of the developer's
	// SMS_*, OTEL_* or REDIS_* beyond it.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if (!strings.HasPrefix(name, "SMS_") && !strings.HasPrefix(name, "OTEL_") && !strings.HasPrefix(name, "REDIS_")) || env[name] != "" {
			c.cmd.Env = append(c.cmd.Env, kv)
		}
	}
	// Last, so that they win over any of the same name.
	c.cmd.Env = append(c.cmd.Env, "DISPATCHER_RUN_MAIN=1", "SMS_PROVIDER_URL="+providerURL, "HTTP_ADDR="+addr)
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

func (c *killChild) wait() { <-c.done }

// exited returns nil while the child runs or once it exited with status 0,
// else why it ended.
func (c *killChild) exited() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// killBuffer is a bytes.Buffer safe for the writes of exec's copying
// goroutine and the test's reads.
type killBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *killBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *killBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last lines of the buffer, for a failure message.
func (b *killBuffer) tail() string {
	s := b.String()
	if len(s) > 8000 {
		s = "...\n" + s[len(s)-8000:]
	}
	return s
}

// killAcked returns the ids (from the data) of the published messages
// pstest saw acked at least once.
func killAcked(ps *pstest.Server) map[string]bool {
	acked := map[string]bool{}
	for _, m := range ps.Messages() {
		if m.Acks > 0 {
			acked[killDataID(m.Data)] = true
		}
	}
	return acked
}

// killDeadLettered returns the ids of the messages published to topic.
func killDeadLettered(ps *pstest.Server, topic string) map[string]bool {
	ids := map[string]bool{}
	for _, m := range ps.Messages() {
		if m.Topic == topic {
			ids[killDataID(m.Data)] = true
		}
	}
	return ids
}

func killDataID(data []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(data, &v)
	return v.ID
}
