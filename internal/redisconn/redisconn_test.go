package redisconn

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
)

func TestRedisOptions(t *testing.T) {
	tests := []struct {
		url     string
		cluster bool
		addrs   int
		tls     bool
		bad     bool
	}{
		{"redis://localhost:6379/0", false, 1, false, false},
		{"rediss://:pw@redis.example:6380", false, 1, true, false},
		{"redis+cluster://a:7000?addr=b:7001&addr=c:7002", true, 3, false, false},
		{"rediss+cluster://a:7000", true, 1, true, false},
		{"a:7000,b:7001, c:7002", true, 3, false, false},
		{"http://redis:6379", false, 0, false, true},
		{"localhost", false, 0, false, true},
	}
	for _, tt := range tests {
		o, err := Options(tt.url)
		if tt.bad {
			if err == nil {
				t.Errorf("%q: want an error", tt.url)
			}
			continue
		}
		if err != nil || o.IsClusterMode != tt.cluster || len(o.Addrs) != tt.addrs || (o.TLSConfig != nil) != tt.tls || !o.ContextTimeoutEnabled {
			t.Errorf("%q: %+v, %v", tt.url, o, err)
		}
		// A cluster client must find a promoted replica within seconds
		// (admission/failover_test.go shows why and that it does).
		rdb, err := New(Settings{URL: tt.url})
		if err != nil {
			t.Fatalf("%q: %v", tt.url, err)
		}
		if c, ok := rdb.(*redis.ClusterClient); ok != tt.cluster {
			t.Errorf("%q: client %T, want a cluster client: %v", tt.url, rdb, tt.cluster)
		} else if ok {
			co := c.Options()
			if co.ClusterStateReloadInterval != admission.ClusterStateReloadInterval || co.ReadTimeout != time.Second {
				t.Errorf("%q: slot map reloaded every %v, read timeout %v; want %v, 1s",
					tt.url, co.ClusterStateReloadInterval, co.ReadTimeout, admission.ClusterStateReloadInterval)
			}
			if (co.TLSConfig != nil) != tt.tls || !co.ContextTimeoutEnabled {
				t.Errorf("%q: cluster client lost TLS (%v) or context timeouts (%v)", tt.url, co.TLSConfig != nil, co.ContextTimeoutEnabled)
			}
		}
		rdb.Close()
	}
}

// TestRedisWarnings: the start-up log warns of a password sent in clear
// to another machine, and of a certificate not checked, naming the host,
// never the password.
func TestRedisWarnings(t *testing.T) {
	tests := []struct {
		s    Settings
		want string // in the one warning; "" for none
	}{
		{Settings{URL: "redis://:pw@10.0.0.3:6379"}, "the Redis password travels in clear to 10.0.0.3"},
		{Settings{URL: "redis://alice:pw@redis.example:6379/0"}, "in clear to redis.example"},
		{Settings{URL: "redis+cluster://:pw@10.0.0.3:7000?addr=10.0.0.4:7001"}, "in clear to 10.0.0.3"},
		{Settings{URL: "redis://:pw@127.0.0.1:6379"}, ""},
		{Settings{URL: "redis://:pw@localhost:6379"}, ""},
		{Settings{URL: "redis://:pw@[::1]:6379"}, ""},
		{Settings{URL: "redis://10.0.0.3:6379"}, ""}, // no password
		{Settings{URL: "rediss://:pw@10.0.0.3:6378"}, ""},
		{Settings{URL: "10.0.0.3:7000,10.0.0.4:7001"}, ""},
		{Settings{URL: "rediss://:pw@10.0.0.3:6378", InsecureSkipVerify: true}, "certificate is not checked (REDIS_INSECURE_SKIP_VERIFY=true)"},
	}
	for _, tt := range tests {
		w := Warnings(tt.s)
		switch {
		case tt.want == "" && len(w) != 0:
			t.Errorf("%v: warnings %q, want none", tt.s, w)
		case tt.want != "" && (len(w) != 1 || !strings.Contains(w[0], tt.want)):
			t.Errorf("%v: warnings %q, want one saying %q", tt.s, w, tt.want)
		case len(w) == 1 && strings.Contains(w[0], "pw"):
			t.Errorf("%v: warning %q shows the password", tt.s, w[0])
		}
	}
}
