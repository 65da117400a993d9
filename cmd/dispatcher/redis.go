package main

import (
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/internal/redisconn"
)

// redisSettings are cfg's Redis settings (REDIS_URL or REDIS_URL_FILE,
// REDIS_CA_FILE, REDIS_INSECURE_SKIP_VERIFY), the longest call taking
// callTimeout.
func redisSettings(cfg config.Settings, callTimeout time.Duration) redisconn.Settings {
	return redisconn.Settings{URL: cfg.RedisURL, CA: cfg.RedisCA, InsecureSkipVerify: cfg.RedisInsecure, CallTimeout: callTimeout}
}

// newRedisOf is the Redis client cfg describes, whose longest call takes
// callTimeout.
func newRedisOf(cfg config.Settings, callTimeout time.Duration) (redis.UniversalClient, error) {
	return redisconn.New(redisSettings(cfg, callTimeout))
}

// operatorTimeout bounds each Redis call of an operator's command that
// changes something: an operator at a terminal, not a send waiting.
const operatorTimeout = 5 * time.Second

// operatorRedis is the Redis client of an operator's command (override,
// status, deadletters replay), whose calls wait up to timeout, and the
// accounts cfg describes with their route: REDIS_URL is required (why says what for), and
// go-redis's own log is silenced: the command says what went wrong in the
// one line of the error it returns.
func operatorRedis(cfg config.Settings, why string, timeout time.Duration) (redis.UniversalClient, config.Routing, error) {
	if cfg.RedisURL == "" {
		return nil, config.Routing{}, config.SettingError("REDIS_URL", "required (or REDIS_URL_FILE): "+why)
	}
	routing, err := cfg.Routing()
	if err != nil {
		return nil, config.Routing{}, err
	}
	redisconn.Quiet()
	rdb, err := newRedisOf(cfg, timeout)
	return rdb, routing, err
}
