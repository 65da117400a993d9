package redisconn

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
)

// policyEvery is how often a process reads Redis's maxmemory-policy.
const policyEvery = time.Minute

// policyTimeout bounds one read of the policy (every master's, on Redis
// Cluster).
const policyTimeout = 5 * time.Second

// PolicyWatch reads Redis's maxmemory-policy at start and every
// policyEvery. While the policy evicts (any but noeviction), Redis may drop
// the limiter's keys under memory pressure: a send-once record (the id is
// sent twice), a lease (the in-flight limit lifts), a penalty (a 429 ends
// early). Each check then logs one error line and sets the gauge
// sms_redis_evicting_policy. Only the goroutine of Run uses it.
type PolicyWatch struct {
	Client   redis.UniversalClient
	Logger   *slog.Logger
	Evicting func(bool) // sets the gauge (sms_redis_evicting_policy)
}

// Run checks at once, then every policyEvery until ctx ends.
func (w PolicyWatch) Run(ctx context.Context) {
	t := time.NewTicker(policyEvery)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check reads the policy once. A policy it cannot read (Redis down) leaves
// the gauge as it was, with a warning.
func (w PolicyWatch) check(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	policy, err := admission.MaxmemoryPolicy(cctx, w.Client)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		w.Logger.Warn("could not read redis maxmemory-policy", "err", err)
	case admission.Evicts(policy):
		w.Evicting(true)
		w.Logger.Error("redis maxmemory-policy evicts keys: under memory pressure it drops send-once records, leases and penalties; set it to noeviction",
			"maxmemory_policy", policy)
	default:
		w.Evicting(false)
	}
}
