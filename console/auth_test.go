package console

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const audience = "/projects/123/global/backendServices/456"

// iapToken is an assertion as IAP signs it, with key under kid.
func iapToken(t *testing.T, key any, alg jose.SignatureAlgorithm, kid string, claims jwt.Claims, email string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Claims(map[string]any{"email": email}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestIAP: an assertion is taken only signed ES256 by a key of the JWKS,
// for the audience, within its times, from IAP; the email's role is the
// roles', else viewer.
func TestIAP(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var fetches atomic.Int32
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	}))
	defer jwks.Close()
	a := &IAP{Audience: audience, KeysURL: jwks.URL, Roles: map[string]Role{"olga@example.com": Operator}}

	now := time.Now()
	good := jwt.Claims{Issuer: iapIssuer, Audience: jwt.Audience{audience}, IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(9 * time.Minute))}
	with := func(f func(c *jwt.Claims)) jwt.Claims { c := good; f(&c); return c }
	hmacKey := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name  string
		token string
		want  User // zero: refused
	}{
		{"operator", iapToken(t, key, jose.ES256, "k1", good, "olga@example.com"), User{"olga@example.com", Operator}},
		{"unlisted: viewer", iapToken(t, key, jose.ES256, "k1", good, "vic@example.com"), User{"vic@example.com", Viewer}},
		{"no header", "", User{}},
		{"garbage", "not.a.jwt", User{}},
		{"another key, same kid", iapToken(t, other, jose.ES256, "k1", good, "olga@example.com"), User{}},
		{"unknown kid", iapToken(t, key, jose.ES256, "k2", good, "olga@example.com"), User{}},
		{"HS256", iapToken(t, hmacKey, jose.HS256, "k1", good, "olga@example.com"), User{}},
		{"expired", iapToken(t, key, jose.ES256, "k1", with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute)) }), "olga@example.com"), User{}},
		{"other audience", iapToken(t, key, jose.ES256, "k1", with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"/projects/123/global/backendServices/999"} }), "olga@example.com"), User{}},
		{"other issuer", iapToken(t, key, jose.ES256, "k1", with(func(c *jwt.Claims) { c.Issuer = "https://evil.example" }), "olga@example.com"), User{}},
		{"issued in the future", iapToken(t, key, jose.ES256, "k1", with(func(c *jwt.Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(5 * time.Minute)) }), "olga@example.com"), User{}},
		{"no email", iapToken(t, key, jose.ES256, "k1", good, ""), User{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.token != "" {
				r.Header.Set(IAPHeader, tt.token)
			}
			got, err := a.User(r)
			if tt.want == (User{}) {
				if err == nil {
					t.Errorf("accepted as %+v", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	// The keys are fetched once, and again for an unknown kid no more
	// than once a minute.
	if n := fetches.Load(); n != 1 {
		t.Errorf("the keys were fetched %d times, want 1", n)
	}
}

// TestAuthFromEnv: anonymous only on loopback; a wrong setting stops the
// start with one line naming its variable.
func TestAuthFromEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# users\nolga operator $2a$04$4MxMzlkQZ3ZEw9dbUZRlEeWrWWq27nIVDCl2C3d9.PqjH0m5bEM5i\n\nvic viewer $2a$04$4MxMzlkQZ3ZEw9dbUZRlEeWrWWq27nIVDCl2C3d9.PqjH0m5bEM5i\n")
	for _, tt := range []struct {
		env  env
		addr string
		want string // the variable named; "" accepted
	}{
		{env{}, "127.0.0.1:8090", ""},
		{env{"CONSOLE_AUTH": "none"}, "[::1]:8090", ""},
		{env{}, "localhost:8090", ""},
		{env{}, "0.0.0.0:8090", "CONSOLE_AUTH"},
		{env{}, ":8090", "CONSOLE_AUTH"},
		{env{"CONSOLE_AUTH": "none"}, "10.0.0.1:8090", "CONSOLE_AUTH"},
		{env{"CONSOLE_AUTH": "ldap"}, "127.0.0.1:8090", "CONSOLE_AUTH"},
		{env{"CONSOLE_AUTH": "basic"}, ":8090", "CONSOLE_USERS_FILE"},
		{env{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": good}, ":8090", ""},
		{env{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": filepath.Join(dir, "missing")}, ":8090", "CONSOLE_USERS_FILE"},
		{env{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": write("role", "olga admin $2a$04$4MxMzlkQZ3ZEw9dbUZRlEeWrWWq27nIVDCl2C3d9.PqjH0m5bEM5i\n")}, ":8090", "CONSOLE_USERS_FILE"},
		{env{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": write("plain", "olga operator hunter2\n")}, ":8090", "CONSOLE_USERS_FILE"},
		{env{"CONSOLE_AUTH": "basic", "CONSOLE_USERS_FILE": write("short", "olga operator\n")}, ":8090", "CONSOLE_USERS_FILE"},
		{env{"CONSOLE_AUTH": "iap"}, ":8090", "CONSOLE_IAP_AUDIENCE"},
		{env{"CONSOLE_AUTH": "iap", "CONSOLE_IAP_AUDIENCE": audience}, ":8090", ""},
		{env{"CONSOLE_AUTH": "iap", "CONSOLE_IAP_AUDIENCE": audience, "CONSOLE_USERS_FILE": good}, ":8090", "CONSOLE_USERS_FILE"}, // hashes: not "email role"
		{env{"CONSOLE_AUTH": "iap", "CONSOLE_IAP_AUDIENCE": audience, "CONSOLE_USERS_FILE": write("roles", "olga@example.com operator\n")}, ":8090", ""},
	} {
		_, err := AuthFromEnv(tt.env.get, tt.addr)
		var se *SettingError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v on %s: %v", tt.env, tt.addr, err)
		case tt.want != "" && (!errors.As(err, &se) || se.Env != tt.want || strings.Contains(err.Error(), "\n")):
			t.Errorf("%v on %s: %v, want one line naming %s", tt.env, tt.addr, err, tt.want)
		}
	}
}
