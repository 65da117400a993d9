package ledger

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
)

// TestReceiptLifetimesAreClamped: receipt.lua's owed set takes any
// lifetime without an error (below 1 ms counts as 1, past 2^40 ms as
// 2^40), and receipt.lua reads back numbers out of range, or not
// numbers, as clamped (finish.lua's side is admission's
// TestStoryLifetimesAreClamped).
func TestReceiptLifetimesAreClamped(t *testing.T) {
	rdb := redistest.Client(t)
	l := New(rdb, Config{Account: redistest.UniqueAccount(t), Timeout: 2 * time.Second})
	ctx := context.Background()
	for i, ms := range []string{"0", "-1", fmt.Sprint(int64(math.MinInt64)), fmt.Sprint(int64(math.MaxInt64)), "1e300"} {
		id, pid := fmt.Sprint("id", i), fmt.Sprint("pid", i)
		// The story's keys, planted for the receipt, with 64 parts (n
		// clamped) of which this receipt delivers one, as an older
		// version kept a story: a hash at the id's key.
		if err := rdb.Del(ctx, l.key.Msg(id)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, l.key.Msg(id), "n", "1e300", "sent", "-7", "ov", "x", "class", "otp").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Expire(ctx, l.key.Msg(id), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, l.pidKey(pid), "1:"+id, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		rc := l.sweepCall()
		rc.PID, rc.Status = l.pidKey(pid), "delivered"
		argv := rc.argv()
		argv[2], argv[3] = ms, ms // when it happened, the owed set's lifetime
		v, err := receiptScript.Run(ctx, rdb, rc.keys(), argv...).Slice()
		if err != nil {
			t.Fatalf("receipt.lua with %s ms: %v", ms, err)
		}
		folds, _, err := l.parseFolds(v)
		if err != nil || len(folds) != 1 || folds[0].Status != "buffered" || !folds[0].SentAt.IsZero() {
			t.Fatalf("receipt.lua with %s ms and numbers out of range: %+v %v", ms, folds, err)
		}
		if ttl := rdb.PTTL(ctx, l.key.Owed()).Val(); ttl > time.Duration(1<<40)*time.Millisecond {
			t.Fatalf("lifetime %s ms: the owed set lives %v, past 2^40 ms", ms, ttl)
		}
	}
}
