//go:build !nodemo

package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/provider"
)

// localStack is everything a dispatcher needs, on this machine: an
// in-process Pub/Sub (pstest), Redis (miniredis, unless REDIS_URL names a
// real one) and the provider simulator behind an HTTP server.
type localStack struct {
	Pubsub   *pstest.Server
	Sim      *provider.Simulator
	SimURL   string
	redisURL string // a real Redis, or the embedded one's

	simSrv *httptest.Server
	mr     *miniredis.Miniredis
	stopMR context.CancelFunc
	wg     sync.WaitGroup
}

// startLocal starts the stack; close stops it.
func startLocal(cfg config, sim provider.SimConfig) (*localStack, error) {
	s := &localStack{Pubsub: pstest.NewServer(), Sim: provider.NewSimulator(sim), redisURL: cfg.RedisURL}
	s.simSrv = httptest.NewServer(s.Sim)
	s.SimURL = s.simSrv.URL
	if s.redisURL == "" {
		mr, err := miniredis.Run()
		if err != nil {
			s.close()
			return nil, fmt.Errorf("embedded redis: %w", err)
		}
		s.mr = mr
		s.redisURL = "redis://" + mr.Addr()
		// miniredis runs TTLs down only when told to: tell it in real
		// time, so penalties and claims expire as they would on Redis.
		ctx, cancel := context.WithCancel(context.Background())
		s.stopMR = cancel
		s.wg.Go(func() {
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			last := time.Now()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					mr.FastForward(now.Sub(last))
					last = now
				}
			}
		})
	}
	return s, nil
}

// newRedis returns a new client of the stack's Redis: one per dispatcher
// instance, as separate pods would have.
func (s *localStack) newRedis() (redis.UniversalClient, error) { return newRedis(s.redisURL) }

func (s *localStack) embeddedRedis() bool { return s.mr != nil }

func (s *localStack) close() {
	if s.stopMR != nil {
		s.stopMR()
		s.wg.Wait()
	}
	if s.mr != nil {
		s.mr.Close()
	}
	if s.simSrv != nil {
		s.simSrv.Close()
	}
	s.Pubsub.Close()
}
