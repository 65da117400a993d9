package localstack

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// The Pub/Sub client (topology's names) starts OpenCensus's worker at init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestNackDelay: a nack (deadline 0) of a subscription given a delay waits
// that delay; another subscription's nack, and a deadline that is not a
// nack, are left as they are.
func TestNackDelay(t *testing.T) {
	r := nackDelayReactor("p", map[string]time.Duration{"otp": time.Second, "mkt": 5 * time.Second}).Reactor
	for _, tc := range []struct {
		sub        string
		deadline   int32
		wantSecond int32
	}{
		{"projects/p/subscriptions/otp", 0, 1},
		{"projects/p/subscriptions/mkt", 0, 5},
		{"projects/p/subscriptions/other", 0, 0},
		{"projects/q/subscriptions/otp", 0, 0},
		{"projects/p/subscriptions/mkt", 30, 30},
	} {
		req := &pubsubpb.ModifyAckDeadlineRequest{Subscription: tc.sub, AckDeadlineSeconds: tc.deadline}
		handled, _, err := r.React(req)
		if handled || err != nil {
			t.Errorf("%s: handled %v, error %v; want pstest to handle it", tc.sub, handled, err)
		}
		if req.AckDeadlineSeconds != tc.wantSecond {
			t.Errorf("%s, deadline %d: got %d, want %d", tc.sub, tc.deadline, req.AckDeadlineSeconds, tc.wantSecond)
		}
	}
}

// TestEmbeddedRedisRunsScriptsWithFlags: on the embedded Redis, a client
// that Adapt readied runs a script with a "#!lua" line by EVAL and then by
// EVALSHA, as Redis 7 would.
func TestEmbeddedRedisRunsScriptsWithFlags(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Embedded() {
		t.Fatal("no RedisURL, yet the stack's Redis is not the embedded one")
	}
	opts, err := redis.ParseURL(s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	s.Adapt(rdb)
	script := redis.NewScript("#!lua flags=no-writes\nreturn 7")
	for i := range 2 { // the first by EVAL after NOSCRIPT, the second by EVALSHA
		if v, err := script.Run(context.Background(), rdb, nil).Int(); err != nil || v != 7 {
			t.Fatalf("run %d: %v, %v; want 7", i, v, err)
		}
	}
}
