package config

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
)

// FuzzConfig feeds arbitrary values of the rate, burst, wait, account and
// URL variables through Flags and its validation. Nothing may panic; a
// rejected configuration is one line naming a known variable; an accepted
// one keeps the invariants the limiter relies on and is accepted by the
// limiter too, so that no value passes the check at start and fails (or
// overflows) later.
func FuzzConfig(f *testing.F) {
	f.Add("100", "90", "70", "5", "23", "1s", "8s", "default", "redis://127.0.0.1:6379/0", "http://p")
	f.Add("1e6", "1e6", "0.01", "1", "1", "1ns", "24h", "a", "rediss://u:p@h:6380", "https://p/x")
	f.Add("NaN", "Inf", "-0", "0x10", "9223372036854775807", "2562047h", "-1s", "{x}", "redis+cluster://a:1?addr=b:2", "")
	f.Add("1e-300", "1e-300", "1e-301", "1000000", "100000", "1h", "1m", "sms acc", "a:1, b:2", "ftp://p")
	f.Add("100", "100", "100", "1000001", "100001", "24h0m1s", "0s", "", "http://u:hunter2@r:1", "http://")
	f.Fuzz(func(t *testing.T, contract, target, marketing, burst, senders, otpWait, mktWait, account, redisURL, providerURL string) {
		env := map[string]string{
			"CONTRACT_RPS": contract, "TARGET_RPS": target, "MARKETING_RPS": marketing,
			"BURST": burst, "MAX_SENDERS": senders, "OTP_MAX_WAIT": otpWait, "MARKETING_MAX_WAIT": mktWait,
			"SMS_ACCOUNT": account, "REDIS_URL": redisURL, "SMS_PROVIDER_URL": providerURL,
		}
		c, err := loadConfig(env)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a configError", err, err)
			}
			if !known(ce.Env) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line naming a known variable", err)
			}
			if ce.Env == "REDIS_URL" && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q repeats the Redis password", err)
			}
			return
		}
		for name, v := range map[string]float64{"contract": c.ContractRPS, "target": c.TargetRPS, "marketing": c.MarketingRPS} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				t.Fatalf("accepted a %s rate of %v", name, v)
			}
		}
		switch {
		case c.TargetRPS > c.ContractRPS:
			t.Fatalf("accepted TARGET_RPS %v above CONTRACT_RPS %v", c.TargetRPS, c.ContractRPS)
		case c.MarketingRPS > c.TargetRPS:
			t.Fatalf("accepted MARKETING_RPS %v above TARGET_RPS %v", c.MarketingRPS, c.TargetRPS)
		case c.Burst < 1 || c.MaxSenders < 1:
			t.Fatalf("accepted BURST %d, MAX_SENDERS %d", c.Burst, c.MaxSenders)
		case c.OTPMaxWait <= 0 || c.MarketingMaxWait <= 0:
			t.Fatalf("accepted waits %v, %v", c.OTPMaxWait, c.MarketingMaxWait)
		case c.Name == "":
			t.Fatal("accepted an empty account")
		case c.ArrivalJitter < 0 || c.ArrivalJitter > time.Second:
			t.Fatalf("accepted PROVIDER_ARRIVAL_JITTER %v", c.ArrivalJitter)
		}
		// A provider counting a sliding second sees at most TARGET_RPS ×
		// (1 s + jitter) + BURST (the tolerance absorbs float rounding).
		if reach := c.TargetRPS*(1+c.ArrivalJitter.Seconds()) + float64(c.Burst); reach > c.ContractRPS*(1+1e-12) {
			t.Fatalf("accepted TARGET_RPS %v, BURST %d, jitter %v: %v could reach the provider in one second, above CONTRACT_RPS %v",
				c.TargetRPS, c.Burst, c.ArrivalJitter, reach, c.ContractRPS)
		}
		// A send claim's TTL is wait + send timeout + 5s: it must not overflow.
		if ttl := c.MarketingMaxWait + c.SendTimeout + 5*time.Second; ttl <= 0 {
			t.Fatalf("claim TTL overflows: %v", ttl)
		}
		for _, n := range []int{c.Outstanding(admission.OTP, c.Account), c.Outstanding(admission.Marketing, c.Account)} {
			if n < 10 || n > 1<<40 {
				t.Fatalf("flow control of %d messages from an accepted configuration", n)
			}
		}
		lim := admission.Config{Account: c.Name, TargetRPS: c.TargetRPS, MarketingRPS: c.MarketingRPS,
			Burst: c.Burst, MaxSenders: c.MaxSenders, RedisTimeout: c.RedisTimeout}
		if err := lim.Validate(); err != nil {
			t.Fatalf("accepted here, refused by the limiter: %v", err)
		}
		// The limiter's largest products, in nanoseconds, must not overflow.
		perProcess := c.TargetRPS / float64(c.MaxSenders)
		if slowest := 1e9 / min(perProcess, c.MarketingRPS/float64(c.MaxSenders)); slowest >= math.MaxInt64/2 {
			t.Fatalf("fallback interval of %v ns overflows", slowest)
		}
		if tol := 1e9 / c.MarketingRPS * float64(c.Burst); tol >= math.MaxInt64/2 {
			t.Fatalf("burst tolerance of %v ns overflows", tol)
		}
	})
}

// TestConfigBounds: values past the bounds the limiter's arithmetic takes
// stop the process at start, naming the variable.
func TestConfigBounds(t *testing.T) {
	tests := []struct {
		env, value string
	}{
		{"CONTRACT_RPS", "2e6"},
		{"TARGET_RPS", "0.001"},
		{"MARKETING_RPS", "0.001"},
		{"BURST", "1000001"},
		{"MAX_SENDERS", "100001"},
		{"OTP_MAX_WAIT", "25h"},
		{"SEND_TIMEOUT", "2562047h"},
		{"SMS_ACCOUNT", "compte-é"},
		{"SMS_ACCOUNT", "tab\there"},
		{"SMS_ACCOUNT", "."},
		{"SMS_ACCOUNT", ".."},
		{"SMS_ACCOUNT", "a/b"},
		{"PROVIDER_ARRIVAL_JITTER", "1001ms"},
		{"PROVIDER_ARRIVAL_JITTER", "-1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			_, err := loadConfig(map[string]string{tt.env: tt.value})
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != tt.env {
				t.Fatalf("err %v, want a configuration error naming %s", err, tt.env)
			}
		})
	}
	// TARGET_RPS × (1 s + jitter) + BURST must fit CONTRACT_RPS, so the
	// largest rate and the largest burst cannot go together.
	for _, env := range []map[string]string{
		{"CONTRACT_RPS": "1e6", "TARGET_RPS": "999999", "MARKETING_RPS": "0.01", "BURST": "1", "PROVIDER_ARRIVAL_JITTER": "0", "MAX_SENDERS": "100000", "OTP_MAX_WAIT": "24h"},
		{"CONTRACT_RPS": "1e6", "TARGET_RPS": "0.01", "MARKETING_RPS": "0.01", "BURST": "999999", "PROVIDER_ARRIVAL_JITTER": "1s"},
	} {
		if _, err := loadConfig(env); err != nil {
			t.Fatalf("the bounds themselves %v: %v, want accepted", env, err)
		}
	}
}

// TestArrivalJitterCheck: the start-up check refuses TARGET_RPS × (1 s +
// PROVIDER_ARRIVAL_JITTER) + BURST (+ MAX_SEGMENTS - 1 with rates in
// segments) above CONTRACT_RPS, naming the variable, and accepts what
// fits, up to equality.
func TestArrivalJitterCheck(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string // the variable the error names; "" for accepted
	}{
		{nil, ""}, // the defaults: 90 × 1.02 + 5 = 96.8
		{map[string]string{"TARGET_RPS": "97", "BURST": "1"}, ""},                                             // 99.94
		{map[string]string{"TARGET_RPS": "95", "PROVIDER_ARRIVAL_JITTER": "0"}, ""},                           // 100, equal
		{map[string]string{"TARGET_RPS": "50", "MARKETING_RPS": "40", "BURST": "49"}, ""},                     // 51 + 49 = 100, equal
		{map[string]string{"TARGET_RPS": "47", "MARKETING_RPS": "40", "PROVIDER_ARRIVAL_JITTER": "1s"}, ""},   // 94 + 5
		{map[string]string{"RATE_UNIT": "segment", "MAX_SEGMENTS": "4"}, ""},                                  // 91.8 + 5 + 3 = 99.8
		{map[string]string{"RATE_UNIT": "segment", "PROVIDER_ARRIVAL_JITTER": "0"}, ""},                       // 90 + 5 + 5 = 100
		{map[string]string{"TARGET_RPS": "96"}, "TARGET_RPS"},                                                 // 102.92
		{map[string]string{"TARGET_RPS": "97", "BURST": "2"}, "TARGET_RPS"},                                   // 100.94
		{map[string]string{"TARGET_RPS": "98", "BURST": "1"}, "TARGET_RPS"},                                   // 100.96
		{map[string]string{"PROVIDER_ARRIVAL_JITTER": "1s"}, "TARGET_RPS"},                                    // 185
		{map[string]string{"RATE_UNIT": "segment", "MAX_SEGMENTS": "6"}, "MAX_SEGMENTS"},                      // 91.8 + 5 + 5 = 101.8
		{map[string]string{"RATE_UNIT": "segment", "MAX_SEGMENTS": "4", "BURST": "6"}, "MAX_SEGMENTS"},        // 100.8
		{map[string]string{"PROVIDER_ARRIVAL_JITTER": "-1ms"}, "PROVIDER_ARRIVAL_JITTER"},                     // negative
		{map[string]string{"PROVIDER_ARRIVAL_JITTER": "1.001s"}, "PROVIDER_ARRIVAL_JITTER"},                   // above 1 s
		{map[string]string{"PROVIDER_ARRIVAL_JITTER": "20"}, "PROVIDER_ARRIVAL_JITTER"},                       // no unit
		{map[string]string{"PROVIDER_ARRIVAL_JITTER": "soon"}, "PROVIDER_ARRIVAL_JITTER"},                     // not a duration
		{map[string]string{"TARGET_RPS": "96", "PROVIDER_ARRIVAL_JITTER": "-1ms"}, "PROVIDER_ARRIVAL_JITTER"}, // its range first
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			c, err := loadConfig(tt.env)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err %v, want accepted", err)
				}
				want := 20 * time.Millisecond // the default
				if v, ok := tt.env["PROVIDER_ARRIVAL_JITTER"]; ok {
					want, _ = time.ParseDuration(v)
				}
				if c.ArrivalJitter != want {
					t.Fatalf("PROVIDER_ARRIVAL_JITTER read as %v, want %v", c.ArrivalJitter, want)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != tt.want {
				t.Fatalf("err %v, want a configuration error naming %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line", err)
			}
			if tt.want != "PROVIDER_ARRIVAL_JITTER" {
				for _, name := range []string{"TARGET_RPS", "PROVIDER_ARRIVAL_JITTER", "BURST", "CONTRACT_RPS"} {
					if !strings.Contains(err.Error(), name) {
						t.Errorf("error %q does not name %s", err, name)
					}
				}
			}
		})
	}
	// A flag wins over the variable, as for every setting.
	if c, err := loadConfig(map[string]string{"PROVIDER_ARRIVAL_JITTER": "1s"}, "--provider-arrival-jitter", "0"); err != nil || c.ArrivalJitter != 0 {
		t.Fatalf("--provider-arrival-jitter 0 over the variable 1s: %v, %v; want 0s accepted", c.ArrivalJitter, err)
	}
}
