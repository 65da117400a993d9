package status

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/keys"
	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/scriptop"
)

// TestHeartbeatKeepsTheRegistry: a beat lists the process with its state
// in the registry, which processes reads; a process silent for less than
// heartbeatKeep stays listed, one silent for longer is dropped by the next
// beat, from both keys.
func TestHeartbeatKeepsTheRegistry(t *testing.T) {
	rdb := redistest.Client(t)
	r := Redis{Client: rdb}
	ctx := context.Background()
	id := redistest.UniqueAccount(t) // unique among the tests sharing the registry
	silent, gone := id+"-silent", id+"-gone"
	now := time.Now()
	for _, p := range []struct {
		id  string
		ago time.Duration
	}{{silent, 10 * time.Second}, {gone, heartbeatKeep + 5*time.Second}} {
		if err := rdb.ZAdd(ctx, keys.Processes(), redis.Z{Score: float64(now.Add(-p.ago).UnixMicro()), Member: p.id}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, keys.ProcessStates(), p.id, "h v a=ok").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.heartbeat(ctx, id, "host v1 a=ok b=fallback"); err != nil {
		t.Fatal(err)
	}
	redisNow, procs, err := r.processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]listed{}
	for _, p := range procs {
		byID[p.ID] = p
	}
	if p, ok := byID[id]; !ok || p.State != "host v1 a=ok b=fallback" || redisNow.Sub(p.LastBeat) > 5*time.Second {
		t.Errorf("the beating process: %+v (listed %v) at %v", p, ok, redisNow)
	}
	if p, ok := byID[silent]; !ok || redisNow.Sub(p.LastBeat) < 9*time.Second {
		t.Errorf("the process silent for 10s: %+v (listed %v), want listed with its last beat", p, ok)
	}
	if _, ok := byID[gone]; ok {
		t.Errorf("the process silent past heartbeatKeep is still listed")
	}
	if n, _ := rdb.HExists(ctx, keys.ProcessStates(), gone).Result(); n {
		t.Errorf("the dropped process's state is still kept")
	}
	if ms, _ := rdb.PTTL(ctx, keys.ProcessStates()).Result(); ms <= 0 || ms > heartbeatKeep {
		t.Errorf("the states' TTL %v, want at most heartbeatKeep", ms)
	}
}

// TestTheRegistryWorksOnTheCluster: the beat, an idle account's health and
// the registry's read each touch one slot (CROSSSLOT otherwise) on a real
// Redis Cluster.
func TestTheRegistryWorksOnTheCluster(t *testing.T) {
	rdb := redistest.ClusterClient(t)
	circuit := admission.NewCircuit(0, nil)
	l, err := admission.New(rdb, admission.Config{Account: redistest.UniqueAccount(t), RedisTimeout: 2 * time.Second}, admission.WithCircuit(circuit))
	if err != nil {
		t.Fatal(err)
	}
	r := Redis{Client: rdb, Circuit: circuit}
	ctx := context.Background()
	id := redistest.UniqueAccount(t)
	if err := r.heartbeat(ctx, id, "host v1 a=ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RefreshHealth(ctx, 0); err != nil {
		t.Fatal(err)
	}
	_, procs, err := r.processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.ID == id {
			return
		}
	}
	t.Fatalf("processes %+v, want %s listed", procs, id)
}

// TestAFullRedisRefusesAHeartbeat: on a Redis at its maxmemory under
// noeviction, heartbeat.lua (no flags) is refused whole and writes
// nothing.
func TestAFullRedisRefusesAHeartbeat(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: redistest.Private(t), MaxRetries: -1,
		DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	r := Redis{Client: rdb, Timeout: 2 * time.Second}
	if err := r.heartbeat(ctx, "p0", "h v a=ok"); err != nil {
		t.Fatal(err)
	}
	before, err := rdb.ZRangeWithScores(ctx, keys.Processes(), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"maxmemory-policy", admission.NoEviction}, {"maxmemory", "1"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.heartbeat(ctx, "p1", "h v a=ok"); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("heartbeat on a full Redis: %v, want refused (OOM)", err)
	}
	after, err := rdb.ZRangeWithScores(ctx, keys.Processes(), 0, -1).Result()
	if err != nil || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a full Redis's registry changed: %v, then %v (%v)", before, after, err)
	}
}

// TestScriptOpNamesTheStatusCalls: a heartbeat, the registry's read and an
// account's read are each named by their script, so that the
// Redis-calls figures say which costs what.
func TestScriptOpNamesTheStatusCalls(t *testing.T) {
	rdb := redistest.Client(t)
	l := limiterOn(t, rdb, nil)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	ctx := context.Background()
	r := Redis{Client: rdb}
	if err := r.heartbeat(ctx, redistest.UniqueAccount(t), "host v a=ok"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.processes(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.readAccount(ctx, l, time.Now(), 2); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, args := range rec.Commands() {
		// An EVALSHA answered NOSCRIPT is followed by its EVAL: one step.
		if op := scriptop.Of(args); op != scriptop.Other && (len(got) == 0 || got[len(got)-1] != op) {
			got = append(got, op)
		}
	}
	if want := []string{OpHeartbeat, OpProcesses, OpStatus}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
}
