package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/config"
)

// redisOptions turns REDIS_URL into client options: redis:// and rediss://
// for one server; redis+cluster://, rediss+cluster:// or a comma list of
// host:port for Redis Cluster. Errors never repeat the URL, which may hold a
// password.
func redisOptions(raw string) (*redis.UniversalOptions, error) {
	var opts redis.UniversalOptions
	switch {
	case strings.HasPrefix(raw, "redis+cluster://"), strings.HasPrefix(raw, "rediss+cluster://"):
		co, err := redis.ParseClusterURL(strings.Replace(raw, "+cluster", "", 1))
		if err != nil {
			return nil, errors.New("not a valid redis+cluster:// URL")
		}
		opts = redis.UniversalOptions{Addrs: co.Addrs, Username: co.Username, Password: co.Password, TLSConfig: co.TLSConfig, IsClusterMode: true}
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"), strings.HasPrefix(raw, "unix://"):
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, errors.New("not a valid redis:// URL")
		}
		opts = redis.UniversalOptions{Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig}
	case !strings.Contains(raw, "://"):
		for _, a := range strings.Split(raw, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
				return nil, fmt.Errorf("want redis://, rediss://, redis+cluster:// or host:port[,host:port...]")
			}
			opts.Addrs = append(opts.Addrs, strings.TrimSpace(a))
		}
		opts.IsClusterMode = true
	default:
		return nil, errors.New("want redis://, rediss://, redis+cluster:// or host:port[,host:port...]")
	}
	// The limiter bounds each call with a context deadline.
	opts.ContextTimeoutEnabled = true
	opts.DisableIdentity = true
	return &opts, nil
}

// newRedis returns a client for REDIS_URL; a rediss:// server is verified
// against the system's roots.
func newRedis(raw string) (redis.UniversalClient, error) {
	return newRedisWithCA(raw, nil, admission.DefaultRedisTimeout)
}

// newRedisWithCA returns a client for REDIS_URL whose longest call takes
// callTimeout. If caPEM is not empty (REDIS_CA_FILE), a rediss:// server's
// certificate must chain to one of the PEM certificates in it instead of
// the system's roots; caPEM with a URL without TLS is an error.
func newRedisWithCA(raw string, caPEM []byte, callTimeout time.Duration) (redis.UniversalClient, error) {
	return redisClient(raw, caPEM, false, callTimeout)
}

// newRedisOf is the Redis client cfg describes (REDIS_URL or
// REDIS_URL_FILE, REDIS_CA_FILE, REDIS_INSECURE_SKIP_VERIFY), whose
// longest call takes callTimeout.
func newRedisOf(cfg config.Settings, callTimeout time.Duration) (redis.UniversalClient, error) {
	return redisClient(cfg.RedisURL, cfg.RedisCA, cfg.RedisInsecure, callTimeout)
}

// redisClient is newRedisWithCA that, with insecure, does not check a
// rediss:// server's certificate.
func redisClient(raw string, caPEM []byte, insecure bool, callTimeout time.Duration) (redis.UniversalClient, error) {
	opts, err := redisOptions(raw)
	if err != nil {
		return nil, err
	}
	if insecure {
		if opts.TLSConfig == nil {
			return nil, errors.New("skipping the certificate check applies to rediss:// URLs only")
		}
		opts.TLSConfig = opts.TLSConfig.Clone()
		opts.TLSConfig.InsecureSkipVerify = true
	}
	if len(caPEM) > 0 {
		if opts.TLSConfig == nil {
			return nil, errors.New("a CA file applies to rediss:// URLs only")
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("no PEM certificate in the CA file")
		}
		opts.TLSConfig = opts.TLSConfig.Clone()
		opts.TLSConfig.RootCAs = roots
	}
	if opts.IsClusterMode {
		co := opts.Cluster()
		admission.FollowFailovers(co, callTimeout)
		return redis.NewClusterClient(co), nil
	}
	return redis.NewUniversalClient(opts), nil
}

// redisWarnings are what the start-up log warns of in cfg's Redis
// settings: a password sent in clear (redis:// to a host other than
// loopback), and a server whose certificate is not checked. They name
// hosts, never the URL, which holds the password.
func redisWarnings(cfg config.Settings) []string {
	o, err := redisOptions(cfg.RedisURL)
	if err != nil {
		return nil // validate refused it
	}
	var w []string
	if o.Password != "" && o.TLSConfig == nil {
		for _, a := range o.Addrs {
			if host, _, err := net.SplitHostPort(a); err == nil && !loopback(host) {
				w = append(w, fmt.Sprintf("the Redis password travels in clear to %s (a redis:// URL): anyone on the path can read it; use rediss://", host))
				break
			}
		}
	}
	if cfg.RedisInsecure {
		w = append(w, "the Redis server's certificate is not checked (REDIS_INSECURE_SKIP_VERIFY=true): anyone on the path can pose as it and read the password")
	}
	return w
}

// loopback reports whether host is this machine: localhost or a loopback
// address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// operatorTimeout bounds each Redis call of an operator's command that
// changes something: an operator at a terminal, not a send waiting.
const operatorTimeout = 5 * time.Second

// operatorRedis is the Redis client of an operator's command (override,
// status, deadletters replay), whose calls wait up to timeout: REDIS_URL is
// required (why says what for), and go-redis's own log (a dial that
// failed, printed once per retry) is silenced: the command says what went
// wrong in the one line of the error it returns.
func operatorRedis(cfg config.Settings, why string, timeout time.Duration) (redis.UniversalClient, error) {
	if cfg.RedisURL == "" {
		return nil, config.SettingError("REDIS_URL", "required (or REDIS_URL_FILE): "+why)
	}
	redis.SetLogger(discardRedisLog{})
	return newRedisOf(cfg, timeout)
}

// operatorLimiter is account s's limiter for an operator's command, on its
// client rdb, its calls waiting up to timeout.
func operatorLimiter(rdb redis.UniversalClient, cfg config.Settings, s config.Account, timeout time.Duration, logger *slog.Logger) (*admission.Limiter, error) {
	lc := limiterConfig(cfg, s, logger)
	lc.RedisTimeout = timeout
	return admission.New(rdb, lc)
}

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}
