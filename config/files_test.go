package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/internal/redisconn"
)

// testCA is the path of a CA certificate in PEM (testdata/ca.pem).
const testCA = "testdata/ca.pem"

func TestProviderTokenFile(t *testing.T) {
	const secret = "t0ken-from-file-5b1e"
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string // the token, when the configuration is valid
		wantEnv string // the variable the error names, when it is not
	}{
		{"trailing newline trimmed", map[string]string{"SMS_PROVIDER_TOKEN_FILE": writeFile(t, "tok", secret+"\n")}, nil, secret, ""},
		{"CRLF trimmed", map[string]string{"SMS_PROVIDER_TOKEN_FILE": writeFile(t, "tok", secret+"\r\n")}, nil, secret, ""},
		{"no newline", map[string]string{"SMS_PROVIDER_TOKEN_FILE": writeFile(t, "tok", secret)}, nil, secret, ""},
		{"flag", nil, []string{"--provider-token-file", writeFile(t, "tok", secret+"\n")}, secret, ""},
		{"environment only", map[string]string{"SMS_PROVIDER_TOKEN": secret}, nil, secret, ""},
		{"both set", map[string]string{"SMS_PROVIDER_TOKEN": secret, "SMS_PROVIDER_TOKEN_FILE": writeFile(t, "tok", secret)}, nil, "", "SMS_PROVIDER_TOKEN_FILE"},
		{"both set, one by flag", map[string]string{"SMS_PROVIDER_TOKEN": secret}, []string{"--provider-token-file", writeFile(t, "tok", secret)}, "", "SMS_PROVIDER_TOKEN_FILE"},
		{"missing file", map[string]string{"SMS_PROVIDER_TOKEN_FILE": filepath.Join(t.TempDir(), "nope")}, nil, "", "SMS_PROVIDER_TOKEN_FILE"},
		{"a directory", map[string]string{"SMS_PROVIDER_TOKEN_FILE": t.TempDir()}, nil, "", "SMS_PROVIDER_TOKEN_FILE"},
		{"empty file", map[string]string{"SMS_PROVIDER_TOKEN_FILE": writeFile(t, "tok", "\n")}, nil, "", "SMS_PROVIDER_TOKEN_FILE"},
		{"larger than 1 MiB", map[string]string{"SMS_PROVIDER_TOKEN_FILE": writeFile(t, "tok", secret+strings.Repeat("x", maxFileSize))}, nil, "", "SMS_PROVIDER_TOKEN_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.env, tt.args...)
			if tt.wantEnv == "" {
				if err != nil || c.ProviderToken != tt.want {
					t.Fatalf("token %q, err %v; want %q", c.ProviderToken, err, tt.want)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != tt.wantEnv {
				t.Fatalf("err %v, want a configuration error naming %s", err, tt.wantEnv)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line without the token", err)
			}
		})
	}
}

// TestTokenFileUnreadable checks a file that exists but cannot be read:
// the error names the variable, not the token.
func TestTokenFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: file modes do not stop reads, so the unreadable case is a directory (TestProviderTokenFile)")
		return
	}
	path := writeFile(t, "tok", "s3cret-unreadable\n")
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(map[string]string{"SMS_PROVIDER_TOKEN_FILE": path})
	var ce *Error
	if !errors.As(err, &ce) || ce.Env != "SMS_PROVIDER_TOKEN_FILE" || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err %v, want a configuration error naming SMS_PROVIDER_TOKEN_FILE without the token", err)
	}
}

func TestRedisCAFileConfig(t *testing.T) {
	ca := testCA
	tests := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"rediss with a CA", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_CA_FILE": ca}, true},
		{"rediss cluster with a CA", map[string]string{"REDIS_URL": "rediss+cluster://h:6380", "REDIS_CA_FILE": ca}, true},
		{"a CA without TLS", map[string]string{"REDIS_URL": "redis://h:6379", "REDIS_CA_FILE": ca}, false},
		{"a CA with host:port seeds", map[string]string{"REDIS_URL": "h:1,h:2", "REDIS_CA_FILE": ca}, false},
		{"missing CA file", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_CA_FILE": filepath.Join(t.TempDir(), "nope.pem")}, false},
		{"not PEM", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_CA_FILE": writeFile(t, "ca.pem", "hello")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.env)
			if tt.ok {
				if err != nil || len(c.RedisCA) == 0 {
					t.Fatalf("config %v, CA %d bytes; want it accepted with the CA read", err, len(c.RedisCA))
				}
				rdb, err := redisconn.New(redisconn.Settings{URL: c.RedisURL, CA: c.RedisCA, CallTimeout: c.RedisTimeout})
				if err != nil {
					t.Fatal(err)
				}
				rdb.Close()
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Env != "REDIS_CA_FILE" {
				t.Fatalf("err %v, want a configuration error naming REDIS_CA_FILE", err)
			}
		})
	}
}

// TestRedisURLSettings: skip_verify=true in a rediss:// URL needs
// REDIS_INSECURE_SKIP_VERIFY=true, which applies to TLS only and not with
// a CA file; REDIS_URL_FILE holds the URL instead of REDIS_URL, and its
// errors name it. No error shows the password.
func TestRedisURLSettings(t *testing.T) {
	const secret = "hunter2"
	ca := testCA
	file := func(content string) string { return writeFile(t, "redis-url", content) }
	tests := []struct {
		name    string
		env     map[string]string
		want    string // the variable the error names; "" for accepted
		url     string // accepted: the URL read
		skipped bool   // accepted: the certificate is not checked
	}{
		{"skip_verify in the URL", map[string]string{"REDIS_URL": "rediss://:" + secret + "@h:6380?skip_verify=true"}, "REDIS_URL", "", false},
		{"skip_verify in the URL, told", map[string]string{"REDIS_URL": "rediss://:" + secret + "@h:6380?skip_verify=true", "REDIS_INSECURE_SKIP_VERIFY": "true"}, "", "rediss://:" + secret + "@h:6380?skip_verify=true", true},
		{"told alone", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_INSECURE_SKIP_VERIFY": "true"}, "", "rediss://h:6380", true},
		{"told false", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_INSECURE_SKIP_VERIFY": "false"}, "", "rediss://h:6380", false},
		{"told without TLS", map[string]string{"REDIS_URL": "redis://h:6379", "REDIS_INSECURE_SKIP_VERIFY": "true"}, "REDIS_INSECURE_SKIP_VERIFY", "", false},
		{"told with a CA file", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_INSECURE_SKIP_VERIFY": "true", "REDIS_CA_FILE": ca}, "REDIS_INSECURE_SKIP_VERIFY", "", false},
		{"told yes", map[string]string{"REDIS_URL": "rediss://h:6380", "REDIS_INSECURE_SKIP_VERIFY": "yes"}, "REDIS_INSECURE_SKIP_VERIFY", "", false},
		{"URL file", map[string]string{"REDIS_URL_FILE": file("rediss://:" + secret + "@h:6380\n")}, "", "rediss://:" + secret + "@h:6380", false},
		{"URL file and REDIS_URL", map[string]string{"REDIS_URL_FILE": file("redis://h:6379"), "REDIS_URL": "redis://h:6379"}, "REDIS_URL_FILE", "", false},
		{"URL file missing", map[string]string{"REDIS_URL_FILE": filepath.Join(t.TempDir(), "nope")}, "REDIS_URL_FILE", "", false},
		{"URL file empty", map[string]string{"REDIS_URL_FILE": file(" \n")}, "REDIS_URL_FILE", "", false},
		{"URL file not a Redis URL", map[string]string{"REDIS_URL_FILE": file("http://u:" + secret + "@h")}, "REDIS_URL_FILE", "", false},
		{"URL file with skip_verify", map[string]string{"REDIS_URL_FILE": file("rediss://:" + secret + "@h:6380?skip_verify=true")}, "REDIS_URL_FILE", "", false},
		{"URL file without TLS, and a CA", map[string]string{"REDIS_URL_FILE": file("redis://h:6379"), "REDIS_CA_FILE": ca}, "REDIS_CA_FILE", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(tt.env)
			if tt.want != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Env != tt.want {
					t.Fatalf("err %v, want a configuration error naming %s", err, tt.want)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %q: want one line without the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RedisURL != tt.url {
				t.Fatalf("the URL read is %q, want %q", c.RedisURL, tt.url)
			}
			rdb, err := redisconn.New(redisconn.Settings{URL: c.RedisURL, CA: c.RedisCA, InsecureSkipVerify: c.RedisInsecure, CallTimeout: c.RedisTimeout})
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			tc := rdb.(*redis.Client).Options().TLSConfig
			if skipped := tc != nil && tc.InsecureSkipVerify; skipped != tt.skipped {
				t.Fatalf("certificate check skipped: %v, want %v", skipped, tt.skipped)
			}
		})
	}
}
