package k8s

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"smsdispatcher/config"
	"smsdispatcher/receipts"
)

// The receipts' objects of ../overlays/receipts.
const receiptsName = "sms-dispatcher-receipts" // Service, Ingress, NetworkPolicy, Secret

// maxVonageCallback is the longest callback URL Vonage's SMS API takes.
const maxVonageCallback = 100

// A peer is who a NetworkPolicy admits: the pods labelled
// app.kubernetes.io/name name in the namespace namespace.
type peer struct{ namespace, name string }

var (
	prometheusPeer = peer{monitoringNamespace, "prometheus"}
	// The Ingress controller: ingress-nginx's pods, in its namespace.
	ingressControllerPeer = peer{"ingress-nginx", "ingress-nginx"}
)

func (p peer) admits(f networkingv1.NetworkPolicyPeer) bool {
	return f.IPBlock == nil && f.NamespaceSelector != nil && f.PodSelector != nil &&
		f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == p.namespace &&
		f.PodSelector.MatchLabels["app.kubernetes.io/name"] == p.name
}

// receiptsPort is RECEIPTS_ADDR's port, 0 with receipts off.
func receiptsPort(t *testing.T, cfg env) int {
	t.Helper()
	addr := cfg.env["RECEIPTS_ADDR"]
	if addr == "" {
		return 0
	}
	_, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port == 0 {
		t.Fatalf("RECEIPTS_ADDR %q: want a fixed port", addr)
	}
	return port
}

// selects reports whether sel, not empty, selects pods labelled l.
func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(l))
}

// ingressProblems lists what the NetworkPolicies selecting the pods
// labelled podLabels admit beyond Prometheus to the metrics port and, with
// receipts on (receiptsPort > 0), the Ingress controller to the receipts
// port: nothing from outside may reach HTTP_ADDR.
func ingressProblems(b *bundle, c *corev1.Container, podLabels map[string]string, metricsPort, receiptsPort int) []string {
	var problems []string
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		if !selects(&np.Spec.PodSelector, podLabels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		for _, r := range np.Spec.Ingress {
			if len(r.Ports) == 0 {
				problems = append(problems, fmt.Sprintf("NetworkPolicy %s: an ingress rule without ports admits every port", np.Name))
			}
			if len(r.From) == 0 {
				problems = append(problems, fmt.Sprintf("NetworkPolicy %s: an ingress rule without from admits everyone", np.Name))
			}
			for _, p := range r.Ports {
				var want peer
				switch n := portNumber(c, p.Port); {
				case n == metricsPort:
					want = prometheusPeer
				case receiptsPort > 0 && n == receiptsPort:
					want = ingressControllerPeer
				default:
					problems = append(problems, fmt.Sprintf("NetworkPolicy %s admits port %v, neither the metrics port %d nor the receipts port", np.Name, p.Port, metricsPort))
					continue
				}
				for _, f := range r.From {
					if !want.admits(f) {
						problems = append(problems, fmt.Sprintf("NetworkPolicy %s: port %v admits %v; only %s pods in the namespace %s may reach it", np.Name, p.Port, f, want.name, want.namespace))
					}
				}
			}
		}
	}
	return problems
}

// portNumber resolves a NetworkPolicy's port against the container's; -1
// when it names none.
func portNumber(c *corev1.Container, p *intstr.IntOrString) int {
	if p == nil {
		return -1
	}
	return resolvePort(c, *p)
}

// receiptsProblems lists what keeps the rendering b from taking receipts
// the way the dispatcher expects: RECEIPTS_ADDR on a container port of its
// own named receipts, not the metrics port; a Service for that port only;
// an Ingress serving RECEIPTS_PUBLIC_URL's host, over TLS, on the receipts'
// path, to that Service; a NetworkPolicy admitting the Ingress controller to
// that port; and the generic account's receipt secret mounted.
func receiptsProblems(t *testing.T, b *bundle) []string {
	t.Helper()
	dep := one[*appsv1.Deployment](t, b, poolName)
	c := container(t, dep.Spec.Template.Spec, "dispatcher")
	podLabels := dep.Spec.Template.Labels
	cfg := effectiveEnv(t, b, c)
	metrics := httpPort(t, cfg.value(t, "HTTP_ADDR"))
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	port := receiptsPort(t, cfg)
	switch {
	case port == 0:
		return []string{"RECEIPTS_ADDR is not set: receipts are off"}
	case port == metrics:
		bad("RECEIPTS_ADDR's port %d is HTTP_ADDR's: /metrics and the probes would face the internet", port)
	}
	if p := namedPort(c, "receipts"); p != port {
		bad("container port receipts = %d, RECEIPTS_ADDR's port is %d", p, port)
	}

	public := cfg.env["RECEIPTS_PUBLIC_URL"]
	u, err := url.Parse(public)
	if err != nil || u.Scheme != "https" || u.Host == "" || strings.HasSuffix(public, "/") {
		bad("RECEIPTS_PUBLIC_URL %q: want https://host[/path] without a trailing slash", public)
		u = &url.URL{}
	}
	if sp := cfg.env["SMS_ACCOUNT"]; sp != "" {
		if cb := receipts.CallbackURL(public, sp); len(cb) > maxVonageCallback {
			bad("callback URL %s is %d characters: Vonage takes at most %d", cb, len(cb), maxVonageCallback)
		}
	}

	// Services: the receipts' one reaches the receipts port; none the metrics port.
	for _, svc := range all[*corev1.Service](b) {
		if !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, podLabels) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(sp.Port)
			}
			if n := resolvePort(c, target); n != port {
				bad("Service %s port %s reaches the pods' port %d, not the receipts port %d", svc.Name, sp.Name, n, port)
			}
		}
	}
	svc := one[*corev1.Service](t, b, receiptsName)
	if !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, podLabels) {
		bad("Service %s does not select the dispatcher's pods", svc.Name)
	}
	if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
		bad("Service %s is %s: the Ingress is the receipts' one way in", svc.Name, svc.Spec.Type)
	}

	// The Ingress: RECEIPTS_PUBLIC_URL's host, over TLS, the receipts' path only.
	ing := one[*networkingv1.Ingress](t, b, receiptsName)
	host := u.Hostname()
	tls := false
	for _, tl := range ing.Spec.TLS {
		tls = tls || (slices.Contains(tl.Hosts, host) && tl.SecretName != "")
	}
	if !tls {
		bad("Ingress %s: no TLS with a certificate Secret for %q (RECEIPTS_PUBLIC_URL's host)", ing.Name, host)
	}
	if ing.Spec.DefaultBackend != nil {
		bad("Ingress %s has a default backend: only the receipts' path may be served", ing.Name)
	}
	path := strings.TrimSuffix(u.Path, "/") + config.ReceiptsPath
	served := false
	for _, r := range ing.Spec.Rules {
		if r.Host != host {
			bad("Ingress %s serves host %q; RECEIPTS_PUBLIC_URL's host is %q", ing.Name, r.Host, host)
		}
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Path != path || p.PathType == nil || *p.PathType != networkingv1.PathTypePrefix {
				bad("Ingress %s path %q: want Prefix %q, the receipts' path below RECEIPTS_PUBLIC_URL", ing.Name, p.Path, path)
			}
			be := p.Backend.Service
			if be == nil || be.Name != svc.Name {
				bad("Ingress %s path %q does not go to the Service %s", ing.Name, p.Path, svc.Name)
				continue
			}
			for _, sp := range svc.Spec.Ports {
				if (be.Port.Name != "" && sp.Name == be.Port.Name) || (be.Port.Number != 0 && sp.Port == be.Port.Number) {
					served = served || r.Host == host
				}
			}
		}
	}
	if !served {
		bad("Ingress %s does not send %s%s to a port of the Service %s", ing.Name, host, path, svc.Name)
	}

	// The NetworkPolicy lets the Ingress controller in, to the receipts port.
	admitted := false
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		if !selects(&np.Spec.PodSelector, podLabels) {
			continue
		}
		for _, r := range np.Spec.Ingress {
			if slices.ContainsFunc(r.From, ingressControllerPeer.admits) &&
				slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return portNumber(c, p.Port) == port }) {
				admitted = true
			}
		}
	}
	if !admitted {
		bad("no NetworkPolicy admits the Ingress controller (%s pods in %s) to the receipts port %d", ingressControllerPeer.name, ingressControllerPeer.namespace, port)
	}
	problems = append(problems, ingressProblems(b, c, podLabels, metrics, port)...)

	// A pod being deleted leaves the Service's endpoints as SIGTERM comes;
	// the Ingress controller learns it later and, without a pause, sends
	// receipts to a closed listener (a provider may not post them again).
	if lc := c.Lifecycle; lc == nil || lc.PreStop == nil || lc.PreStop.Sleep == nil || lc.PreStop.Sleep.Seconds < 1 {
		bad("no preStop sleep: the Ingress controller would send receipts to a pod whose listener has closed")
	}

	// The generic API's receipts verify with a secret: a file from a Secret.
	if p := cfg.env["SMS_PROVIDER"]; p == "" || p == "generic" {
		if f := envValue(c, "SMS_RECEIPT_SECRET_FILE"); f == "" {
			bad("SMS_RECEIPT_SECRET_FILE is not set: the dispatcher refuses a generic account without it while receipts are on")
		} else if v, _ := mountedFile(t, dep.Spec.Template.Spec, c, f); v.Secret == nil {
			bad("%s is not in a Secret volume", f)
		}
	}
	return problems
}

// TestReceiptsOverlay checks the overlay that turns receipts on: the whole
// pool as every environment, and the receipts' way in.
func TestReceiptsOverlay(t *testing.T) {
	b := render(t, receiptsDir)
	checkPool(t, b, dispatcherVariables(t))
	for _, p := range receiptsProblems(t, b) {
		t.Error(p)
	}
	t.Run("no base placeholder is left", func(t *testing.T) {
		for _, placeholder := range []string{"set-by-overlay", ".invalid", "image: sms-dispatcher:"} {
			if strings.Contains(string(b.yaml), placeholder) {
				t.Errorf("the rendered overlay still holds %q", placeholder)
			}
		}
	})
	t.Run("every object is in the overlay's namespace", func(t *testing.T) {
		for _, o := range b.objs {
			if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != exampleNS {
				t.Errorf("%T %s: namespace %q, want %q", o, o.GetName(), o.GetNamespace(), exampleNS)
			}
		}
	})
	t.Run("the Secrets it reads are the ones documented", func(t *testing.T) {
		dirs := []string{exampleDir, receiptsDir}
		pod := one[*appsv1.Deployment](t, b, poolName).Spec.Template.Spec
		for _, v := range pod.Volumes {
			if v.Secret == nil {
				continue
			}
			if len(v.Secret.Items) == 0 {
				t.Errorf("Secret volume %s mounts every key: name the ones the dispatcher reads", v.Name)
			}
			for _, it := range v.Secret.Items {
				checkOutOfBandIn(t, dirs, "Secret", v.Secret.SecretName, it.Key)
			}
		}
		for _, tl := range one[*networkingv1.Ingress](t, b, receiptsName).Spec.TLS {
			checkOutOfBandIn(t, dirs, "Secret", tl.SecretName, corev1.TLSCertKey)
			checkOutOfBandIn(t, dirs, "Secret", tl.SecretName, corev1.TLSPrivateKeyKey)
		}
	})
	t.Run("the Dockerfile exposes the receipts port", func(t *testing.T) {
		c := container(t, one[*appsv1.Deployment](t, b, poolName).Spec.Template.Spec, "dispatcher")
		stages := dockerfileStages(t)
		var exposed []string
		for _, n := range stages[len(stages)-1].instrs {
			if strings.EqualFold(n.Value, "expose") {
				exposed = append(exposed, nodeArgs(n)...)
			}
		}
		if p := strconv.Itoa(namedPort(c, "receipts")); !slices.Contains(exposed, p) {
			t.Errorf("the image exposes %v, not the receipts port %s", exposed, p)
		}
	})
}

// TestBaseLeavesReceiptsOff: without the receipts overlay nothing takes
// receipts, and nothing but Prometheus reaches the pods.
func TestBaseLeavesReceiptsOff(t *testing.T) {
	for _, dir := range []string{baseDir, exampleDir} {
		b := render(t, dir)
		if got := receiptsProblems(t, b); !slices.Equal(got, []string{"RECEIPTS_ADDR is not set: receipts are off"}) {
			t.Errorf("k8s/%s: %v, want receipts off", dir, got)
		}
		for _, o := range b.objs {
			switch o.(type) {
			case *corev1.Service, *networkingv1.Ingress:
				t.Errorf("k8s/%s: %T %s, with receipts off", dir, o, o.GetName())
			}
		}
		c := container(t, one[*appsv1.Deployment](t, b, poolName).Spec.Template.Spec, "dispatcher")
		if namedPort(c, "receipts") != -1 {
			t.Errorf("k8s/%s: a receipts container port with receipts off", dir)
		}
	}
}

// TestReceiptsChecksCatch breaks the receipts overlay's rendering one way
// at a time: each check above must notice.
func TestReceiptsChecksCatch(t *testing.T) {
	b := render(t, receiptsDir)
	if got := receiptsProblems(t, b); len(got) != 0 {
		t.Fatalf("the overlay as written: %v", got)
	}
	cm := one[*corev1.ConfigMap](t, b, poolName)
	svc := one[*corev1.Service](t, b, receiptsName)
	ing := one[*networkingv1.Ingress](t, b, receiptsName)
	np := one[*networkingv1.NetworkPolicy](t, b, receiptsName)
	dep := one[*appsv1.Deployment](t, b, poolName)
	c := &dep.Spec.Template.Spec.Containers[0]
	for _, tc := range []struct {
		name   string
		mutate func() (restore func())
		want   string
	}{
		{"receipts on the metrics port", func() func() {
			return setEnv(c, "RECEIPTS_ADDR", cm.Data["HTTP_ADDR"])
		}, "is HTTP_ADDR's"},
		{"the Service reaches the metrics port", func() func() {
			was := svc.Spec.Ports[0].TargetPort
			svc.Spec.Ports[0].TargetPort = intstr.FromString("http")
			return func() { svc.Spec.Ports[0].TargetPort = was }
		}, "not the receipts port"},
		{"the Ingress serves another host than the public URL's", func() func() {
			was := ing.Spec.Rules[0].Host
			ing.Spec.Rules[0].Host = "other.example.com"
			return func() { ing.Spec.Rules[0].Host = was }
		}, "RECEIPTS_PUBLIC_URL's host"},
		{"the Ingress without TLS", func() func() {
			was := ing.Spec.TLS
			ing.Spec.TLS = nil
			return func() { ing.Spec.TLS = was }
		}, "no TLS"},
		{"the Ingress serves every path", func() func() {
			was := ing.Spec.Rules[0].HTTP.Paths[0].Path
			ing.Spec.Rules[0].HTTP.Paths[0].Path = "/"
			return func() { ing.Spec.Rules[0].HTTP.Paths[0].Path = was }
		}, "the receipts' path"},
		{"the policy admits no Ingress controller", func() func() {
			was := np.Spec.Ingress
			np.Spec.Ingress = nil
			return func() { np.Spec.Ingress = was }
		}, "no NetworkPolicy admits the Ingress controller"},
		{"the policy admits the Ingress controller to the metrics port", func() func() {
			was := np.Spec.Ingress[0].Ports[0].Port
			http := intstr.FromString("http")
			np.Spec.Ingress[0].Ports[0].Port = &http
			return func() { np.Spec.Ingress[0].Ports[0].Port = was }
		}, "only prometheus pods"},
		{"the policy admits everyone to the receipts port", func() func() {
			was := np.Spec.Ingress[0].From
			np.Spec.Ingress[0].From = nil
			return func() { np.Spec.Ingress[0].From = was }
		}, "admits everyone"},
		{"the container port is not named receipts", func() func() {
			i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "receipts" })
			c.Ports[i].Name = "hooks"
			return func() { c.Ports[i].Name = "receipts" }
		}, "container port receipts"},
		{"no pause before the drain", func() func() {
			was := c.Lifecycle
			c.Lifecycle = nil
			return func() { c.Lifecycle = was }
		}, "no preStop sleep"},
		{"no receipt secret", func() func() {
			was := c.Env
			c.Env = slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool { return e.Name == "SMS_RECEIPT_SECRET_FILE" })
			return func() { c.Env = was }
		}, "SMS_RECEIPT_SECRET_FILE is not set"},
		{"a callback URL Vonage refuses", func() func() {
			return setEnv(c, "RECEIPTS_PUBLIC_URL", envValue(c, "RECEIPTS_PUBLIC_URL")+"/"+strings.Repeat("x", 80))
		}, "Vonage takes at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore := tc.mutate()
			defer restore()
			got := receiptsProblems(t, b)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q: want one saying %q", got, tc.want)
			}
		})
	}
}

// setupAccepts loads e as `dispatcher setup` does, with the dispatcher's
// own configuration loader: every command checks every setting it is
// given (the receipts' among them), not only the ones it uses.
func setupAccepts(e env) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	load := config.Flags(fs, config.Pubsub|config.Topics|config.Subscriptions|config.DeadLetters|config.Waits,
		func(name string) string { return e.env[name] })
	_, err := load()
	return err
}

// serveAccepts loads the pool container c's environment as `dispatcher
// serve` does, with the dispatcher's own configuration loader, on stand-ins
// for what the cluster provides: each file a variable names that a volume
// mounts is a temporary file (a secret's placeholder; a CA certificate for
// REDIS_CA_FILE), REDIS_URL the out-of-band example's.
func serveAccepts(t *testing.T, b *bundle, pod corev1.PodSpec, c *corev1.Container) error {
	t.Helper()
	e := effectiveEnv(t, b, c)
	vals := maps.Clone(e.env)
	for name := range e.unknown {
		switch name {
		case "REDIS_URL":
			vals[name] = "rediss://:AUTH-STRING@10.0.0.3:6378"
		case "GOMEMLIMIT":
		default:
			t.Fatalf("%s comes from outside the manifests: give the check a stand-in", name)
		}
	}
	dir := t.TempDir()
	for name, v := range vals {
		if !strings.HasSuffix(name, "_FILE") {
			continue
		}
		mountedFile(t, pod, c, v) // fails the test unless a volume holds it
		content := []byte("placeholder-secret\n")
		if name == "REDIS_CA_FILE" {
			content = selfSignedPEM(t)
		}
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, content, 0o600); err != nil {
			t.Fatal(err)
		}
		vals[name] = f
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	_, err := config.Flags(fs, config.All, func(name string) string { return vals[name] })()
	return err
}

// selfSignedPEM is a CA certificate in PEM, as REDIS_CA_FILE holds.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "memorystore-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestServeAcceptsThePool: the pool's configuration, in each rendering,
// is one `dispatcher serve` starts with; and the check can fail.
func TestServeAcceptsThePool(t *testing.T) {
	for _, dir := range []string{exampleDir, receiptsDir} {
		b := render(t, dir)
		pod := one[*appsv1.Deployment](t, b, poolName).Spec.Template.Spec
		c := container(t, pod, "dispatcher")
		if err := serveAccepts(t, b, pod, c); err != nil {
			t.Errorf("k8s/%s: dispatcher serve refuses the pool's configuration: %v", dir, err)
		}
		if dir != receiptsDir {
			continue
		}
		restore := setEnv(c, "RECEIPTS_PUBLIC_URL", "http://sms-receipts.example.com")
		if err := serveAccepts(t, b, pod, c); err == nil || !strings.Contains(err.Error(), "RECEIPTS_PUBLIC_URL") {
			t.Errorf("k8s/%s with an http:// public URL: %v, want RECEIPTS_PUBLIC_URL refused", dir, err)
		}
		restore()
	}
}

// TestSetupJobRefusesReceiptsWithoutTheirSecret shows the setup Job's check
// in checkPool can fail: the receipts' settings in the ConfigMap the Job
// reads would stop it.
func TestSetupJobRefusesReceiptsWithoutTheirSecret(t *testing.T) {
	b := render(t, receiptsDir)
	dep := one[*appsv1.Deployment](t, b, poolName)
	job := one[*batchv1.Job](t, b, setupName)
	c := container(t, dep.Spec.Template.Spec, "dispatcher")
	jc := &job.Spec.Template.Spec.Containers[0]
	if err := setupAccepts(effectiveEnv(t, b, jc)); err != nil {
		t.Fatalf("the Job as written: %v", err)
	}
	for _, name := range []string{"RECEIPTS_ADDR", "RECEIPTS_PUBLIC_URL"} {
		setEnv(jc, name, envValue(c, name))
	}
	err := setupAccepts(effectiveEnv(t, b, jc))
	if err == nil || !strings.Contains(err.Error(), "SMS_RECEIPT_SECRET_FILE") {
		t.Errorf("setup with the receipts' settings and no secret: %v, want SMS_RECEIPT_SECRET_FILE refused", err)
	}
}

// setEnv sets c's variable name to value, and returns what restores it.
func setEnv(c *corev1.Container, name, value string) (restore func()) {
	was := slices.Clone(c.Env)
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: name})
		i = len(c.Env) - 1
	}
	c.Env[i].Value = value
	return func() { c.Env = was }
}
