package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestEveryScriptCallStaysInOneClusterSlot runs both scripts on the real
// Redis Cluster and checks the keys each command actually carried: a key
// without the account's hash tag fails here with CROSSSLOT (the limiter
// would fall back) or with keys in two slots.
func TestEveryScriptCallStaysInOneClusterSlot(t *testing.T) {
	for _, class := range []Class{OTP, Marketing} {
		t.Run(class.String(), func(t *testing.T) {
			rdb := redistest.ClusterClient(t)
			rec := &redistest.Recorder{}
			rdb.AddHook(rec)
			l := newLimiter(t, rdb, testConfig(t))
			ctx := context.Background()

			if d := try(t, l, class); !d.Allowed || d.Source != SourceRedis {
				t.Fatalf("TryAcquire on the cluster: %+v, want allowed by redis", d)
			}
			if err := l.ReportThrottled(ctx, 50*time.Millisecond); err != nil {
				t.Fatalf("ReportThrottled on the cluster: %v", err)
			}
			if d := try(t, l, class); d.Source != SourcePenalty {
				t.Fatalf("after ReportThrottled: %+v, want a penalty denial", d)
			}

			slots := map[int64][]string{}
			scripts := 0
			for _, args := range rec.Commands() {
				name := fmt.Sprint(args[0])
				if name != "evalsha" && name != "eval" {
					continue
				}
				scripts++
				n, _ := args[2].(int)
				for _, a := range args[3 : 3+n] {
					key := fmt.Sprint(a)
					slot, err := rdb.ClusterKeySlot(ctx, key).Result()
					if err != nil {
						t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
					}
					slots[slot] = append(slots[slot], key)
				}
			}
			if scripts < 2 {
				t.Fatalf("saw %d script calls, want at least 2", scripts)
			}
			if len(slots) != 1 {
				t.Fatalf("script keys span %d slots, want 1: %v", len(slots), slots)
			}
		})
	}
}

// TestASenderPoolAdmitsOnTheCluster: the pool's script names each sender's
// TAT key from its index (keys of the account's slot, not declared): the
// Redis Cluster serves them, and the pool is built and used there.
func TestASenderPoolAdmitsOnTheCluster(t *testing.T) {
	rdb := redistest.ClusterClient(t)
	cfg := testConfig(t)
	cfg.TargetRPS, cfg.MarketingRPS = 1000, 1000
	cfg.Senders = []Sender{{From: "+15550000001", RPS: 1}, {From: "+15550000002", RPS: 1}}
	l := newLimiter(t, rdb, cfg)
	var got []string
	for range 3 {
		d := try(t, l, Marketing)
		if d.Source != SourceRedis {
			t.Fatalf("on the cluster: %+v, want a decision of redis", d)
		}
		got = append(got, d.Sender)
	}
	if fmt.Sprint(got) != "[+15550000001 +15550000002 ]" {
		t.Fatalf("senders taken %q, want each once and then a denial", got)
	}
}
