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
