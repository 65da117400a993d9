package ledger

import (
	"testing"
	"time"
)

func TestQuantileIsTheUpperBoundOfItsBucket(t *testing.T) {
	b := make([]int64, len(DeliveryBuckets)+1)
	if q := quantile(b, 0.5); q != 0 {
		t.Fatalf("no latencies: %v, want 0", q)
	}
	b[2], b[7], b[len(b)-1] = 98, 1, 1 // 98 within 1 s, 1 within 10 s, 1 past the last bound
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Second}, {0.98, time.Second}, {0.99, 10 * time.Second}, {1, DeliveryBuckets[len(DeliveryBuckets)-1]}} {
		if got := quantile(b, tt.q); got != tt.want {
			t.Errorf("quantile %g: %v, want %v", tt.q, got, tt.want)
		}
	}
}
