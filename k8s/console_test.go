package k8s

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The console's overlay and the names of its objects.
const (
	consoleDir  = "overlays/console"
	consoleName = "sms-dispatcher-console"
)

// GKE's BackendConfig is not a dependency of the module: this mirrors the
// fields of cloud.google.com/v1 that backendconfig.yaml uses, so a
// misspelt or misplaced field there still fails strict decoding.
type backendConfig struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		IAP *struct {
			Enabled                bool `json:"enabled"`
			OAuthClientCredentials *struct {
				SecretName string `json:"secretName"`
			} `json:"oauthclientCredentials,omitempty"`
		} `json:"iap,omitempty"`
		HealthCheck *struct {
			Type        string `json:"type,omitempty"`
			RequestPath string `json:"requestPath,omitempty"`
			Port        int32  `json:"port,omitempty"`
		} `json:"healthCheck,omitempty"`
		TimeoutSec int `json:"timeoutSec,omitempty"`
	} `json:"spec"`
}

func (o *backendConfig) GetName() string      { return o.Metadata.Name }
func (o *backendConfig) GetNamespace() string { return o.Metadata.Namespace }

func init() {
	apiTypes["cloud.google.com/v1/BackendConfig"] = func() object { return new(backendConfig) }
}

// consoleVariables are the CONSOLE_* variables the console's code reads.
func consoleVariables(t *testing.T) map[string]bool {
	t.Helper()
	vars := map[string]bool{}
	re := regexp.MustCompile(`"(CONSOLE_[A-Z_]+)"`)
	for _, pattern := range []string{"../console/*.go", "../cmd/dispatcher/console.go"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				vars[m[1]] = true
			}
		}
	}
	for _, v := range []string{"CONSOLE_ADDR", "CONSOLE_AUTH", "CONSOLE_IAP_AUDIENCE"} {
		if !vars[v] {
			t.Fatalf("the console's code reads no %s (found %v)", v, vars)
		}
	}
	return vars
}

// TestConsoleOverlay: the console runs `dispatcher console` on the pool's
// image and settings, authenticated by IAP, which the load balancer puts in
// front of its Service; its health check and probes reach the
// unauthenticated port; the pool is unchanged.
func TestConsoleOverlay(t *testing.T) {
	b := render(t, consoleDir)
	checkPool(t, b, dispatcherVariables(t))
	d := one[*appsv1.Deployment](t, b, consoleName)
	pod := d.Spec.Template.Spec
	c := container(t, pod, "console")
	pool := container(t, one[*appsv1.Deployment](t, b, poolName).Spec.Template.Spec, "dispatcher")
	vars := consoleVariables(t)

	if !slices.Equal(c.Args, []string{"console"}) || c.Image != pool.Image || strings.HasPrefix(c.Image, "sms-dispatcher:") {
		t.Errorf("console container: args %v, image %q; want [console] and the pool's image %q", c.Args, c.Image, pool.Image)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1: the chart's history is a process's", d.Spec.Replicas)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "CONSOLE_") && !vars[e.Name] {
			t.Errorf("env %s: the console reads no such variable", e.Name)
		}
		if slices.Contains(secretVariables, e.Name) && e.Value != "" {
			t.Errorf("env %s: a literal value; a secret comes from a Secret", e.Name)
		}
	}
	if envValue(c, "CONSOLE_AUTH") != "iap" || !strings.HasPrefix(envValue(c, "CONSOLE_IAP_AUDIENCE"), "/projects/") {
		t.Errorf("CONSOLE_AUTH %q, CONSOLE_IAP_AUDIENCE %q: want iap and a backend service's audience", envValue(c, "CONSOLE_AUTH"), envValue(c, "CONSOLE_IAP_AUDIENCE"))
	}
	port := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		t.Fatalf("the console container has no port %s", name)
		return 0
	}
	if got := envValue(c, "CONSOLE_ADDR"); got != ":"+strconv.Itoa(int(port("console"))) {
		t.Errorf("CONSOLE_ADDR %q, want the console port :%d", got, port("console"))
	}
	if got := envValue(c, "CONSOLE_METRICS_ADDR"); got != ":"+strconv.Itoa(int(port("http"))) {
		t.Errorf("CONSOLE_METRICS_ADDR %q, want the http port :%d", got, port("http"))
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.StrVal != "http" {
			t.Errorf("probe %+v: want /healthz on the http port (the pages answer 401 without IAP)", p)
		}
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("the console container's root filesystem is writable")
	}

	svc := one[*corev1.Service](t, b, consoleName)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "console" || svc.Spec.Selector["app.kubernetes.io/component"] != "console" {
		t.Errorf("Service %s: %+v; want one port to the console port, of the console's pods", consoleName, svc.Spec)
	}
	var ref struct{ Default string }
	if err := yaml.Unmarshal([]byte(svc.Annotations["cloud.google.com/backend-config"]), &ref); err != nil || ref.Default == "" {
		t.Fatalf("Service %s names no BackendConfig: %v", consoleName, err)
	}
	bc := one[*backendConfig](t, b, ref.Default)
	if bc.Spec.IAP == nil || !bc.Spec.IAP.Enabled || bc.Spec.IAP.OAuthClientCredentials == nil {
		t.Errorf("BackendConfig %s: IAP not enabled with an OAuth client", bc.Metadata.Name)
	}
	if hc := bc.Spec.HealthCheck; hc == nil || hc.RequestPath != "/healthz" || hc.Port != port("http") {
		t.Errorf("BackendConfig %s: health check %+v, want /healthz on the http port %d", bc.Metadata.Name, hc, port("http"))
	}

	ing := one[*networkingv1.Ingress](t, b, consoleName)
	routed := false
	for _, r := range ing.Spec.Rules {
		for _, p := range r.HTTP.Paths {
			routed = routed || (p.Backend.Service != nil && p.Backend.Service.Name == consoleName && p.Backend.Service.Port.Name == svc.Spec.Ports[0].Name)
		}
	}
	if !routed || len(ing.Spec.TLS) == 0 || ing.Annotations["kubernetes.io/ingress.allow-http"] != "false" {
		t.Errorf("Ingress %s: want TLS only, routing to the Service's port", consoleName)
	}

	// Prometheus scrapes sms_console_actions_total on the http port,
	// which the NetworkPolicy opens to it.
	pm := one[*monitoringv1.PodMonitor](t, b, consoleName)
	if pm.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "console" || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Errorf("PodMonitor %s: %+v, want one endpoint on the console's pods", consoleName, pm.Spec)
	} else if ep := pm.Spec.PodMetricsEndpoints[0]; ptrValue(ep.Port) != "http" || ep.Path != "/metrics" {
		t.Errorf("PodMonitor %s: port %q path %q, want http and /metrics (CONSOLE_METRICS_ADDR)", consoleName, ptrValue(ep.Port), ep.Path)
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("PodMonitor %s selects %s=%s, which the console's pods lack", consoleName, k, v)
		}
	}
	if pool := one[*monitoringv1.PodMonitor](t, b, poolName); pool.Spec.Selector.MatchLabels["app.kubernetes.io/component"] == "console" {
		t.Errorf("the pool's PodMonitor selects the console")
	}

	np := one[*networkingv1.NetworkPolicy](t, b, consoleName)
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "console" || len(np.Spec.PolicyTypes) != 2 {
		t.Errorf("NetworkPolicy %s: %+v, want the console's pods, ingress and egress", consoleName, np.Spec)
	}
	for _, o := range b.objs {
		if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != exampleNS {
			t.Errorf("%T %s: namespace %q, want %q", o, o.GetName(), o.GetNamespace(), exampleNS)
		}
	}
}
