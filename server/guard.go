package server

import (
	"context"
	"errors"

	"cloud.google.com/go/pubsub/v2"

	"smsdispatcher/config"
	"smsdispatcher/config/policy"
	"smsdispatcher/dispatch"
	"smsdispatcher/guard"
)

// The process's pumping guard (package guard): built from the classes'
// policies, asked by the dispatcher before each admission, run beside it
// (its blocks read every half second and on each push, its sends
// counted), and fed the verifications when a class judges conversion.

// processGuard is the guard of a Server and what it runs on.
type processGuard struct {
	g             *guard.Guard
	verifications *pubsub.Subscriber // VERIFICATIONS_TOPIC's subscription; nil: no class judges conversion
}

// newGuard returns the guard of lanes' policies, nil when no class is
// guarded: then nothing of it runs.
func (s *Server) newGuard(ps *pubsub.Client, lanes []dispatch.Lane) (*processGuard, error) {
	rules := map[string]*policy.Guard{}
	conversion := false
	for _, l := range lanes {
		if l.Policy.Guard.On() {
			rules[l.Class.String()] = l.Policy.Guard
			conversion = conversion || l.Policy.Guard.MinConversion.MinSends > 0
		}
	}
	if len(rules) == 0 {
		return nil, nil
	}
	rdb, ok := s.rdb.(guard.Redis)
	if !ok {
		return nil, errors.New("server: the Redis client cannot read the guard's blocks")
	}
	pg := &processGuard{}
	var counted func(class, to string)
	if s.opts.Telemetry != nil && s.opts.Telemetry.Metrics != nil {
		counted = s.opts.Telemetry.Metrics.GuardSent
	}
	pg.g = guard.New(rdb, rules, s.id, guard.Options{Logger: s.logger, Counted: counted,
		Publish: func(ctx context.Context, data []byte, attrs map[string]string) error {
			r := s.status.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs})
			go func() {
				if _, err := r.Get(context.WithoutCancel(ctx)); err != nil {
					s.logger.Warn("could not publish a blocked message's status event", "err", err)
				}
			}()
			return nil
		}})
	if conversion {
		pg.verifications = ps.Subscriber(config.VerificationsSubscription)
	}
	return pg, nil
}

// run runs the guard until ctx ends.
func (pg *processGuard) run(ctx context.Context, s *Server) {
	done := make(chan struct{})
	go func() { defer close(done); pg.g.Run(ctx) }()
	if pg.verifications != nil {
		var counts guard.VerificationCounts
		if s.opts.Telemetry != nil && s.opts.Telemetry.Metrics != nil {
			counts = s.opts.Telemetry.Metrics
		}
		if err := pg.g.Listen(ctx, pg.verifications, counts); err != nil && ctx.Err() == nil {
			s.logger.Error("the verifications' pull ended; min_conversion sees no verification", "err", err)
		}
	}
	<-done
}
