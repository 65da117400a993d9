package redisconn

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
)

// Settings say how to reach Redis.
type Settings struct {
	// URL is REDIS_URL (or REDIS_URL_FILE's content): redis:// and
	// rediss:// for one server; redis+cluster://, rediss+cluster:// or a
	// comma list of host:port for Redis Cluster.
	URL string
	// CA is REDIS_CA_FILE's PEM certificates: if not empty, a rediss://
	// server's certificate must chain to one of them instead of the
	// system's roots; with a URL without TLS it is an error.
	CA []byte
	// InsecureSkipVerify is REDIS_INSECURE_SKIP_VERIFY: a rediss://
	// server's certificate is not checked; with a URL without TLS it is an
	// error.
	InsecureSkipVerify bool
	// CallTimeout is how long the longest call takes (a cluster client
	// follows failovers within it); if zero, admission.DefaultRedisTimeout.
	CallTimeout time.Duration
}

// Options turns a Redis URL (Settings.URL) into client options. Errors
// never repeat the URL, which may hold a password.
func Options(raw string) (*redis.UniversalOptions, error) {
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

// New returns the client s describes: a cluster client (which follows
// failovers, admission.FollowFailovers) for a cluster URL, else a client
// of one server.
func New(s Settings) (redis.UniversalClient, error) {
	opts, err := Options(s.URL)
	if err != nil {
		return nil, err
	}
	if s.InsecureSkipVerify {
		if opts.TLSConfig == nil {
			return nil, errors.New("skipping the certificate check applies to rediss:// URLs only")
		}
		opts.TLSConfig = opts.TLSConfig.Clone()
		opts.TLSConfig.InsecureSkipVerify = true
	}
	if len(s.CA) > 0 {
		if opts.TLSConfig == nil {
			return nil, errors.New("a CA file applies to rediss:// URLs only")
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(s.CA) {
			return nil, errors.New("no PEM certificate in the CA file")
		}
		opts.TLSConfig = opts.TLSConfig.Clone()
		opts.TLSConfig.RootCAs = roots
	}
	if opts.IsClusterMode {
		callTimeout := s.CallTimeout
		if callTimeout == 0 {
			callTimeout = admission.DefaultRedisTimeout
		}
		co := opts.Cluster()
		admission.FollowFailovers(co, callTimeout)
		return redis.NewClusterClient(co), nil
	}
	return redis.NewUniversalClient(opts), nil
}

// Warnings are what the start-up log warns of in s: a password sent in
// clear (redis:// to a host other than loopback), and a server whose
// certificate is not checked. They name hosts, never the URL, which holds
// the password. A URL Options refuses has none.
func Warnings(s Settings) []string {
	o, err := Options(s.URL)
	if err != nil {
		return nil // the configuration refused it
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
	if s.InsecureSkipVerify {
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

// Quiet silences go-redis's own log for the whole process (a dial that
// failed, printed once per retry): for an operator's command, which says
// what went wrong in the one line of the error it returns.
func Quiet() { redis.SetLogger(discardLog{}) }

type discardLog struct{}

func (discardLog) Printf(context.Context, string, ...any) {}
