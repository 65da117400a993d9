package demo

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/localstack"
	"smsdispatcher/provider/providertest"
	"smsdispatcher/status"
)

// receiptsOn turns delivery receipts on for the run, unless RECEIPTS_ADDR
// says where: on a free loopback port, whose http:// URL the simulator
// posts the receipts to, signed with the stack's token.
func receiptsOn(cfg config.Settings, sim *providertest.Config) (config.Settings, error) {
	if cfg.ReceiptsAddr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return cfg, fmt.Errorf("demo: a port for the receipts: %w", err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cfg.ReceiptsAddr, cfg.ReceiptsPublicURL = addr, "http://"+addr
	}
	sim.Receipts.Secret = localstack.Token
	return cfg, nil
}

// receiptsSettle is how long the run waits, once everything is sent, for
// the last final receipts.
const receiptsSettle = 10 * time.Second

// waitDelivery waits until the account's final receipts number sent (or
// receiptsSettle has passed) and returns what they said, by class: the
// limiter's per-minute counters of the run's last minutes.
func (r *run) waitDelivery(ctx context.Context, rdb redis.UniversalClient, sent int) map[string]Delivery {
	if !r.cfg.ReceiptsOn() {
		return nil
	}
	lc := r.cfg.Limiter(r.cfg.Account)
	lc.RedisTimeout = time.Second
	lim, err := admission.New(rdb, lc)
	if err != nil {
		return nil
	}
	window := max(status.DeliveryWindow, time.Since(r.start).Truncate(time.Minute)+2*time.Minute)
	deadline := time.Now().Add(receiptsSettle)
	for {
		stats, err := lim.Ledger().DeliveryStats(ctx, window)
		var finals int64
		for _, st := range stats {
			finals += st.Finals
		}
		if err == nil && (finals >= int64(sent) || time.Now().After(deadline)) {
			out := map[string]Delivery{}
			for _, class := range r.cfg.Classes {
				st := stats[class.String()]
				out[class.String()] = Delivery{Finals: st.Finals, Delivered: st.Delivered, P50: st.P50, P99: st.P99}
			}
			return out
		}
		if err != nil && time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}
