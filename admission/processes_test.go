package admission

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
)

// TestHeartbeatKeepsTheRegistry: a beat lists the process with its state
// in the registry, which Processes reads; a process silent for less than
// HeartbeatKeep stays listed, one silent for longer is dropped by the next
// beat, from both keys.
func TestHeartbeatKeepsTheRegistry(t *testing.T) {
	rdb := redistest.Client(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	id := redistest.UniqueAccount(t) // unique among the tests sharing the registry
	silent, gone := id+"-silent", id+"-gone"
	now := time.Now()
	for _, p := range []struct {
		id  string
		ago time.Duration
	}{{silent, 10 * time.Second}, {gone, HeartbeatKeep + 5*time.Second}} {
		if err := rdb.ZAdd(ctx, ProcessesKey, redis.Z{Score: float64(now.Add(-p.ago).UnixMicro()), Member: p.id}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, ProcessStatesKey, p.id, "h v a=ok").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Heartbeat(ctx, id, "host v1 a=ok b=fallback"); err != nil {
		t.Fatal(err)
	}
	redisNow, procs, err := l.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Process{}
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
		t.Errorf("the process silent past HeartbeatKeep is still listed")
	}
	if n, _ := rdb.HExists(ctx, ProcessStatesKey, gone).Result(); n {
		t.Errorf("the dropped process's state is still kept")
	}
	if ms, _ := rdb.PTTL(ctx, ProcessStatesKey).Result(); ms <= 0 || ms > HeartbeatKeep {
		t.Errorf("the states' TTL %v, want at most HeartbeatKeep", ms)
	}
}

// TestTheRegistryWorksOnTheCluster: the beat, an idle account's health and
// the registry's read each touch one slot (CROSSSLOT otherwise) on a real
// Redis Cluster.
func TestTheRegistryWorksOnTheCluster(t *testing.T) {
	rdb := redistest.ClusterClient(t)
	l := newLimiter(t, rdb, testConfig(t))
	ctx := context.Background()
	id := redistest.UniqueAccount(t)
	if err := l.Heartbeat(ctx, id, "host v1 a=ok"); err != nil {
		t.Fatal(err)
	}
	if err := l.RefreshHealth(ctx); err != nil {
		t.Fatal(err)
	}
	_, procs, err := l.Processes(ctx)
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
