package redisconn

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/telemetry"
)

// TestAnEvictingRedisIsReportedAtEveryCheck: each check of a Redis whose
// maxmemory-policy evicts logs one error line naming the policy and sets
// sms_redis_evicting_policy; once the policy is noeviction, the gauge
// reads 0 and nothing is logged.
func TestAnEvictingRedisIsReportedAtEveryCheck(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: redistest.Private(t), MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { rdb.Close() })
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	w := PolicyWatch{Client: rdb, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Evicting: m.SetRedisEvicting}
	gauge := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "sms_redis_evicting_policy "); ok {
				return v
			}
		}
		return "absent"
	}
	errorLines := func() int { return strings.Count(logs.String(), `"level":"ERROR"`) }

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		w.check(ctx)
		if got := errorLines(); got != i {
			t.Errorf("after check %d of a volatile-lru Redis: %d error lines, want %d:\n%s", i, got, i, logs.String())
		}
	}
	if !strings.Contains(logs.String(), `"maxmemory_policy":"volatile-lru"`) {
		t.Errorf("the error line does not name the policy:\n%s", logs.String())
	}
	if g := gauge(); g != "1" {
		t.Errorf("sms_redis_evicting_policy = %s with volatile-lru, want 1", g)
	}

	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	w.check(ctx)
	if g := gauge(); g != "0" {
		t.Errorf("sms_redis_evicting_policy = %s with noeviction, want 0", g)
	}
	if got := errorLines(); got != 2 {
		t.Errorf("%d error lines after a check of a noeviction Redis, want none more:\n%s", got, logs.String())
	}
}
