package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/crypto/bcrypt"
)

// Role is what a user of the console may do; each role may do what the
// roles before it may.
type Role int

const (
	// Viewer reads every page, numbers masked to their last four digits.
	Viewer Role = iota
	// Support may also read one dead letter's whole number.
	Support
	// Operator may also act: replay dead letters, the actions of the
	// lists (Options.Lists), set and clear an account's override.
	Operator
)

var roleNames = [...]string{"viewer", "support", "operator"}

func (r Role) String() string { return roleNames[r] }

// parseRole is the Role named s.
func parseRole(s string) (Role, bool) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), true
		}
	}
	return 0, false
}

// User is who asks, as an Auth found.
type User struct {
	Name string
	Role Role
}

// MaySee reports whether u may read a dead letter's whole number.
func (u User) MaySee() bool { return u.Role >= Support }

// MayAct reports whether u may act: replay, a list's actions, override.
func (u User) MayAct() bool { return u.Role >= Operator }

// Auth says who sent a request; an error means nobody it knows (the
// console answers 401).
type Auth interface {
	User(r *http.Request) (User, error)
	// Challenge is the WWW-Authenticate header of a 401; "" none.
	Challenge() string
}

// errUnknown is the error of a request an Auth cannot tie to a user.
var errUnknown = errors.New("unknown user")

// Local is the Auth of a console on a loopback address: everyone who can
// reach it is its operator, as a developer's own machine is.
type Local struct{}

func (Local) User(*http.Request) (User, error) { return User{Name: "local", Role: Operator}, nil }
func (Local) Challenge() string                { return "" }

// Basic is HTTP basic authentication against a users file's bcrypt
// hashes (ReadUsers).
type Basic struct {
	users map[string]basicUser
}

type basicUser struct {
	hash []byte
	role Role
}

// dummyHash is compared against when the user is unknown, so that an
// unknown name takes as long as a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("unknown user"), bcrypt.MinCost)

func (b Basic) User(r *http.Request) (User, error) {
	name, password, ok := r.BasicAuth()
	if !ok {
		return User{}, errUnknown
	}
	u, known := b.users[name]
	hash := u.hash
	if !known {
		hash = dummyHash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || !known {
		return User{}, errUnknown
	}
	return User{Name: name, Role: u.role}, nil
}

func (Basic) Challenge() string { return `Basic realm="sms-dispatcher console", charset="UTF-8"` }

// ReadUsers reads a users file: a line per user, "name role bcrypt-hash"
// (role viewer, support or operator; the hash from `htpasswd -nB` or
// bcrypt's own tools), blank lines and lines starting with # ignored.
// With hashes false (IAP: the proxy checked who it is), the lines are
// "name role".
func ReadUsers(path string, hashes bool) (map[string]basicUser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	users := map[string]basicUser{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		want := 2
		if hashes {
			want = 3
		}
		if len(fields) != want {
			return nil, fmt.Errorf("line %d: want %d fields (name role%s), got %d", n, want, map[bool]string{true: " bcrypt-hash"}[hashes], len(fields))
		}
		role, ok := parseRole(fields[1])
		if !ok {
			return nil, fmt.Errorf("line %d: role %q: want viewer, support or operator", n, fields[1])
		}
		u := basicUser{role: role}
		if hashes {
			u.hash = []byte(fields[2])
			if _, err := bcrypt.Cost(u.hash); err != nil {
				return nil, fmt.Errorf("line %d: %s's hash: %v", n, fields[0], err)
			}
		}
		if _, dup := users[fields[0]]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", n, fields[0])
		}
		users[fields[0]] = u
	}
	return users, sc.Err()
}

// IAPHeader is the header Identity-Aware Proxy signs its user into.
const IAPHeader = "x-goog-iap-jwt-assertion"

// IAPKeysURL is where Google publishes the keys IAP signs with.
const IAPKeysURL = "https://www.gstatic.com/iap/verify/public_key-jwk"

// iapIssuer is the issuer of IAP's assertions.
const iapIssuer = "https://cloud.google.com/iap"

// IAP verifies Identity-Aware Proxy's signed header: its ES256 signature
// against the keys at KeysURL, its audience and its times. A verified
// user has the role Roles gives its email, or Viewer.
type IAP struct {
	Audience string
	KeysURL  string
	Roles    map[string]Role
	Client   *http.Client // nil: one with a 10 s timeout

	mu      sync.Mutex
	keys    jose.JSONWebKeySet
	fetched time.Time // the keys' last successful fetch
	tried   time.Time // the last fetch, failed or not
}

// iapKeysEvery is how often the keys are fetched again: Google rotates
// them, and a key id not in the set fetches them at once (at most once
// a minute).
const iapKeysEvery = time.Hour

func (a *IAP) User(r *http.Request) (User, error) {
	raw := r.Header.Get(IAPHeader)
	if raw == "" {
		return User{}, errUnknown
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(tok.Headers) != 1 {
		return User{}, errUnknown
	}
	key, err := a.key(r.Context(), tok.Headers[0].KeyID)
	if err != nil {
		return User{}, err
	}
	var claims jwt.Claims
	var who struct {
		Email string `json:"email"`
	}
	if err := tok.Claims(key, &claims, &who); err != nil {
		return User{}, errUnknown
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: iapIssuer, AnyAudience: jwt.Audience{a.Audience}, Time: time.Now()}, 30*time.Second); err != nil {
		return User{}, errUnknown
	}
	if who.Email == "" || claims.IssuedAt == nil || claims.Expiry == nil {
		return User{}, errUnknown
	}
	return User{Name: who.Email, Role: a.Roles[who.Email]}, nil
}

func (*IAP) Challenge() string { return "" }

// key is the public key of id. The keys are fetched again when id is not
// among them, or they are older than iapKeysEvery, at most once a minute
// (a failed fetch keeps the keys there are).
func (a *IAP) key(ctx context.Context, id string) (*jose.JSONWebKey, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := a.keys.Key(id)
	if (len(keys) == 0 || time.Since(a.fetched) > iapKeysEvery) && time.Since(a.tried) > time.Minute {
		a.tried = time.Now()
		if err := a.fetch(ctx); err != nil && len(keys) == 0 {
			return nil, err
		}
		keys = a.keys.Key(id)
	}
	if len(keys) == 0 {
		return nil, errUnknown
	}
	return &keys[0], nil
}

// fetch reads the keys at KeysURL.
func (a *IAP) fetch(ctx context.Context) error {
	client := a.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.KeysURL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("IAP keys: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("IAP keys: %s", resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return fmt.Errorf("IAP keys: %w", err)
	}
	a.keys, a.fetched = set, time.Now()
	return nil
}

// AuthFromEnv is the Auth that getenv's CONSOLE_AUTH and its companions
// describe, for a console listening on addr:
//
//	CONSOLE_AUTH        none (only on a loopback addr), basic or iap;
//	                    unset: none on a loopback addr, else an error
//	CONSOLE_USERS_FILE  basic: "name role bcrypt-hash" lines (required);
//	                    iap: "email role" lines (optional; others are viewers)
//	CONSOLE_IAP_AUDIENCE  iap: the backend service's audience (required),
//	                    /projects/NUMBER/global/backendServices/ID
//	CONSOLE_IAP_KEYS_URL  iap: the keys' URL (default IAPKeysURL)
//
// A wrong setting is an error naming its variable (*SettingError).
func AuthFromEnv(getenv func(string) string, addr string) (Auth, error) {
	mode := getenv("CONSOLE_AUTH")
	usersFile := getenv("CONSOLE_USERS_FILE")
	switch mode {
	case "", "none":
		if !Loopback(addr) {
			return nil, settingError("CONSOLE_AUTH", fmt.Sprintf("must be basic or iap: CONSOLE_ADDR %s is not a loopback address, and the console is never anonymous elsewhere", addr))
		}
		return Local{}, nil
	case "basic":
		if usersFile == "" {
			return nil, settingError("CONSOLE_USERS_FILE", "required with CONSOLE_AUTH=basic")
		}
		users, err := ReadUsers(usersFile, true)
		if err != nil {
			return nil, settingError("CONSOLE_USERS_FILE", err.Error())
		}
		return Basic{users: users}, nil
	case "iap":
		a := &IAP{Audience: getenv("CONSOLE_IAP_AUDIENCE"), KeysURL: getenv("CONSOLE_IAP_KEYS_URL"), Roles: map[string]Role{}}
		if a.Audience == "" {
			return nil, settingError("CONSOLE_IAP_AUDIENCE", "required with CONSOLE_AUTH=iap: /projects/NUMBER/global/backendServices/ID")
		}
		if a.KeysURL == "" {
			a.KeysURL = IAPKeysURL
		}
		if usersFile != "" {
			users, err := ReadUsers(usersFile, false)
			if err != nil {
				return nil, settingError("CONSOLE_USERS_FILE", err.Error())
			}
			for name, u := range users {
				a.Roles[name] = u.role
			}
		}
		return a, nil
	}
	return nil, settingError("CONSOLE_AUTH", fmt.Sprintf("%q: want none, basic or iap", mode))
}

// Loopback reports whether addr (host:port) listens on a loopback
// address only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SettingError is a console setting's error: one line naming the
// variable, as package config's are.
type SettingError struct{ Env, Msg string }

func settingError(env, msg string) *SettingError { return &SettingError{env, msg} }

func (e *SettingError) Error() string { return "invalid configuration: " + e.Env + ": " + e.Msg }

// ExitCode is the status a process exits with on e: 2, a usage error.
func (e *SettingError) ExitCode() int { return 2 }
