package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsdispatcher/admission"
	"smsdispatcher/internal/redisconn"
	"smsdispatcher/internal/redistest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serverCert returns the PEM certificate and key of a server at 127.0.0.1
// and localhost, signed by ca.
func (ca *testCA) serverCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// startTLSRedis starts a redis-server that listens on TLS only, on a free
// loopback port, with its certificate signed by ca, user alice (password
// "secret") and the default user disabled. It returns the port; the server
// is stopped when the test ends.
//
// Like redistest, it never skips: .ci/run installs Debian's redis-server,
// which is built with TLS. A redis-server without TLS support fails the
// test with a message saying so.
func startTLSRedis(t *testing.T, ca *testCA) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed: .ci/run installs it (apt-get install redis-server)")
	}
	dir := t.TempDir()
	certPEM, keyPEM := ca.serverCert(t)
	for name, b := range map[string][]byte{"ca.pem": ca.pem, "server.pem": certPEM, "server.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var lastLog string
	for range 3 { // another process may take the free port before redis-server does
		port := freePort(t)
		conf := fmt.Sprintf(`port 0
tls-port %d
bind 127.0.0.1
tls-cert-file %s
tls-key-file %s
tls-ca-cert-file %s
tls-auth-clients no
save ""
appendonly no
dir %s
logfile %s
user default off
user alice on >secret ~* &* +@all
`, port, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.pem"),
			dir, filepath.Join(dir, "redis.log"))
		confPath := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "redis.log"))
		cmd := exec.Command(bin, confPath)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		if waitListening(port, exited) {
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			return port
		}
		cmd.Process.Kill()
		<-exited
		b, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		lastLog = string(b)
		if !strings.Contains(lastLog, "Address already in use") {
			break
		}
	}
	if strings.Contains(lastLog, "not supported") || strings.Contains(lastLog, "Bad directive") {
		t.Fatalf("this redis-server was built without TLS support (BUILD_TLS=yes); Debian's redis-server has it. Log:\n%s", lastLog)
	}
	t.Fatalf("TLS redis-server did not start; log:\n%s", lastLog)
	return 0
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitListening reports whether port accepts connections within 10s, while
// the server has not exited.
func waitListening(port int, exited <-chan struct{}) bool {
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
}

// TestRedisTLSAndACL runs the dispatcher's own Redis client setup, from
// REDIS_URL and REDIS_CA_FILE through the configuration, against a real
// TLS-only redis-server with an ACL user.
func TestRedisTLSAndACL(t *testing.T) {
	ca := newTestCA(t, "sms test CA")
	port := startTLSRedis(t, ca)
	caFile := writeFile(t, "ca.pem", string(ca.pem))
	rogueFile := writeFile(t, "rogue.pem", string(newTestCA(t, "rogue CA").pem))
	url := func(userinfo string) string { return fmt.Sprintf("rediss://%s127.0.0.1:%d", userinfo, port) }
	var connectEnv func(t *testing.T, env map[string]string) *admissionProbe

	// connect builds the client as serve does: configuration, then newRedisOf.
	connect := func(t *testing.T, redisURL, caPath string) *admissionProbe {
		t.Helper()
		env := map[string]string{"REDIS_URL": redisURL}
		if caPath != "" {
			env["REDIS_CA_FILE"] = caPath
		}
		return connectEnv(t, env)
	}
	connectEnv = func(t *testing.T, env map[string]string) *admissionProbe {
		t.Helper()
		cfg, err := loadConfig(env)
		if err != nil {
			t.Fatalf("configuration: %v", err)
		}
		rdb, err := newRedisOf(cfg, cfg.RedisTimeout)
		if err != nil {
			t.Fatalf("newRedisOf: %v", err)
		}
		t.Cleanup(func() { rdb.Close() })
		lim, err := admission.New(rdb, admission.Config{Account: redistest.UniqueAccount(t), RedisTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p := &admissionProbe{pingErr: rdb.Ping(ctx).Err()}
		p.decision, p.err = lim.Admit(ctx, admission.OTP, 1, time.Second, admission.Claim{})
		return p
	}

	t.Run("alice with the CA", func(t *testing.T) {
		p := connect(t, url("alice:secret@"), caFile)
		if p.pingErr != nil || p.err != nil || !p.decision.Allowed || p.decision.Source != admission.SourceRedis {
			t.Fatalf("ping %v; Admit = %+v, %v; want allowed by redis", p.pingErr, p.decision, p.err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		p := connect(t, url("alice:wrong@"), caFile)
		if p.pingErr == nil || !strings.Contains(p.pingErr.Error(), "WRONGPASS") {
			t.Fatalf("ping: %v, want WRONGPASS", p.pingErr)
		}
		if p.decision.Source == admission.SourceRedis {
			t.Fatalf("Admit = %+v: decided by redis with a wrong password", p.decision)
		}
	})
	t.Run("default user is off", func(t *testing.T) {
		if p := connect(t, url(""), caFile); p.pingErr == nil {
			t.Fatal("ping without credentials succeeded; want the default user refused")
		}
	})
	t.Run("server not signed by the CA", func(t *testing.T) {
		p := connect(t, url("alice:secret@"), rogueFile)
		var unknown x509.UnknownAuthorityError
		if !errors.As(p.pingErr, &unknown) {
			t.Fatalf("ping: %v, want x509.UnknownAuthorityError", p.pingErr)
		}
		if p.decision.Source == admission.SourceRedis {
			t.Fatalf("Admit = %+v: decided by an unverified redis", p.decision)
		}
	})
	t.Run("system roots only", func(t *testing.T) {
		if p := connect(t, url("alice:secret@"), ""); p.pingErr == nil {
			t.Fatal("ping verified a server signed by a test CA against the system's roots")
		}
	})
	t.Run("the URL from REDIS_URL_FILE", func(t *testing.T) {
		p := connectEnv(t, map[string]string{"REDIS_URL_FILE": writeFile(t, "redis-url", url("alice:secret@")+"\n"), "REDIS_CA_FILE": caFile})
		if p.pingErr != nil || p.err != nil || !p.decision.Allowed || p.decision.Source != admission.SourceRedis {
			t.Fatalf("ping %v; Admit = %+v, %v; want allowed by redis", p.pingErr, p.decision, p.err)
		}
	})
	t.Run("certificate unchecked when told", func(t *testing.T) {
		for _, env := range []map[string]string{
			{"REDIS_URL": url("alice:secret@"), "REDIS_INSECURE_SKIP_VERIFY": "true"},
			{"REDIS_URL": url("alice:secret@") + "?skip_verify=true", "REDIS_INSECURE_SKIP_VERIFY": "true"},
		} {
			if p := connectEnv(t, env); p.pingErr != nil || p.decision.Source != admission.SourceRedis {
				t.Fatalf("%v: ping %v, TryAcquire %+v; want a server signed by a test CA reached unchecked", env, p.pingErr, p.decision)
			}
		}
	})
	t.Run("plain redis:// to the TLS port", func(t *testing.T) {
		if p := connect(t, fmt.Sprintf("redis://alice:secret@127.0.0.1:%d", port), ""); p.pingErr == nil {
			t.Fatal("ping without TLS succeeded on a TLS-only port")
		}
	})
}

// admissionProbe is what one client saw of the server.
type admissionProbe struct {
	pingErr  error
	decision admission.Decision
	err      error
}

// TestRedisInsecureSkipVerifyReachesTheClient: REDIS_INSECURE_SKIP_VERIFY
// read by the configuration turns the certificate check off in the client
// the commands build and gives serve's warning.
func TestRedisInsecureSkipVerifyReachesTheClient(t *testing.T) {
	cfg, err := loadConfig(map[string]string{"REDIS_URL": "rediss://:pw@10.0.0.3:6378", "REDIS_INSECURE_SKIP_VERIFY": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if w := redisconn.Warnings(redisSettings(cfg, cfg.RedisTimeout)); len(w) != 1 || !strings.Contains(w[0], "REDIS_INSECURE_SKIP_VERIFY=true") {
		t.Errorf("warnings %q, want one naming REDIS_INSECURE_SKIP_VERIFY=true", w)
	}
	rdb, err := newRedisOf(cfg, cfg.RedisTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if tc := rdb.(*redis.Client).Options().TLSConfig; tc == nil || !tc.InsecureSkipVerify {
		t.Error("the client checks the certificate, want it not checked")
	}
}
