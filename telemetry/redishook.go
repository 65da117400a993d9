package telemetry

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"smsdispatcher/internal/scriptop"
)

// RedisHook returns a go-redis hook that counts commands by operation, so
// that Redis calls per sent message can be graphed.
func (m *Metrics) RedisHook() redis.Hook { return redisHook{m} }

type redisHook struct{ m *Metrics }

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(ctx, cmd.Args())
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.count(ctx, c.Args())
		}
		return next(ctx, cmds)
	}
}

func (h redisHook) count(ctx context.Context, args []any) {
	h.m.redisCalls.Add(ctx, 1, metric.WithAttributes(AttrRedisOp.String(scriptop.Of(args))))
}
