package k8s

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dfparser "github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The directories under k8s/ that hold manifests.
const (
	baseDir       = "base"
	exampleDir    = "overlays/example"
	receiptsDir   = "overlays/receipts"
	monitoringDir = "monitoring"
)

// Names the manifests give their objects.
const (
	poolName  = "sms-dispatcher"       // Deployment, ConfigMap, HPA, PDB, PodMonitor, NetworkPolicy, ServiceAccount
	setupName = "sms-dispatcher-setup" // Job, its ServiceAccount and NetworkPolicy
	exampleNS = "sms"
)

// otherSendersAnnotation on the ConfigMap counts the processes outside the
// Deployment that send on the account: MAX_SENDERS must cover them too.
const otherSendersAnnotation = "smsdispatcher.io/other-senders"

// stopMargin is what a pod does after SIGTERM besides letting sends finish
// for SHUTDOWN_GRACE, each step bounded at 5 s: stop the pulls (the client
// nacks what it had not handed over; a Pub/Sub that does not answer is
// left behind), flush the dead-letter publisher, stop the HTTP server and
// flush the trace exporter. terminationGracePeriodSeconds must exceed
// SHUTDOWN_GRACE by more than this, or the kubelet kills a draining pod.
const stopMargin = 20 * time.Second

// monitoringNamespace is where Prometheus runs: its pods are the only ones
// the NetworkPolicy lets reach the dispatcher.
const monitoringNamespace = "monitoring"

// otpBacklogMetric is the Custom Metrics Stackdriver Adapter's name of a
// subscription's backlog.
const otpBacklogMetric = "pubsub.googleapis.com|subscription|num_undelivered_messages"

// notInKustomization are manifests kept beside an overlay on purpose but
// not applied with it, and why.
var notInKustomization = map[string]string{
	exampleDir + "/keda-scaledobject.yaml":    "an alternative to the HPA",
	exampleDir + "/out-of-band.example.yaml":  "the shapes of objects created out of band (credentials)",
	receiptsDir + "/out-of-band.example.yaml": "the shapes of objects created out of band (credentials)",
}

// readOutsideSettings are variables the dispatcher process reads that are
// not rows of config/table.go's settings table (besides OTEL_*, the OpenTelemetry
// SDK's own), and who reads them.
var readOutsideSettings = map[string]string{
	"PUBSUB_EMULATOR_HOST": "the Pub/Sub client library",
	"GOOGLE_CLOUD_PROJECT": "config/table.go, as PUBSUB_PROJECT_ID's fallback",
	"GOMEMLIMIT":           "the Go runtime (soft memory limit)",
}

// secretVariables never belong in a ConfigMap nor in a literal value.
var secretVariables = []string{"REDIS_URL", "SMS_PROVIDER_TOKEN"}

// ---------------------------------------------------------------------------
// Decoding.

// KEDA's API is not a dependency of the module: these mirror the fields of
// keda.sh/v1alpha1 that keda-scaledobject.yaml uses, so a misspelt or
// misplaced field there still fails strict decoding.
type scaledObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		Advanced        *struct {
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			MetricType        string            `json:"metricType,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

func (o *scaledObject) GetName() string      { return o.Metadata.Name }
func (o *scaledObject) GetNamespace() string { return o.Metadata.Namespace }

type triggerAuthentication struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		PodIdentity *struct {
			Provider string `json:"provider"`
		} `json:"podIdentity,omitempty"`
	} `json:"spec"`
}

func (o *triggerAuthentication) GetName() string      { return o.Metadata.Name }
func (o *triggerAuthentication) GetNamespace() string { return o.Metadata.Namespace }

// kustomization is a kustomization.yaml, decoded as kustomize's own type.
type kustomization struct{ kustomize.Kustomization }

func (k *kustomization) GetName() string      { return "kustomization" }
func (k *kustomization) GetNamespace() string { return "" }

// An object is what every decoded document is.
type object interface {
	GetName() string
	GetNamespace() string
}

// apiTypes maps apiVersion/kind to the Go type a document must decode into.
var apiTypes = map[string]func() object{
	"v1/ConfigMap":      func() object { return new(corev1.ConfigMap) },
	"v1/Secret":         func() object { return new(corev1.Secret) },
	"v1/ServiceAccount": func() object { return new(corev1.ServiceAccount) },
	"v1/Service":        func() object { return new(corev1.Service) },
	"v1/Namespace":      func() object { return new(corev1.Namespace) },
	"apps/v1/Deployment": func() object {
		return new(appsv1.Deployment)
	},
	"autoscaling/v2/HorizontalPodAutoscaler":  func() object { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"policy/v1/PodDisruptionBudget":           func() object { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":      func() object { return new(networkingv1.NetworkPolicy) },
	"networking.k8s.io/v1/Ingress":            func() object { return new(networkingv1.Ingress) },
	"batch/v1/Job":                            func() object { return new(batchv1.Job) },
	"monitoring.coreos.com/v1/PodMonitor":     func() object { return new(monitoringv1.PodMonitor) },
	"monitoring.coreos.com/v1/PrometheusRule": func() object { return new(monitoringv1.PrometheusRule) },
	"keda.sh/v1alpha1/ScaledObject":           func() object { return new(scaledObject) },
	"keda.sh/v1alpha1/TriggerAuthentication":  func() object { return new(triggerAuthentication) },
	"kustomize.config.k8s.io/v1beta1/Kustomization": func() object {
		return new(kustomization)
	},
}

// decode decodes one YAML document into its API type, strictly: an unknown
// or duplicated field is an error.
func decode(doc []byte) (object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	newObject, ok := apiTypes[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("apiVersion %q kind %q: no Go type known to this test (add it to apiTypes)", tm.APIVersion, tm.Kind)
	}
	obj := newObject()
	target := any(obj)
	if k, ok := obj.(*kustomization); ok {
		target = &k.Kustomization
	}
	if err := yaml.UnmarshalStrict(doc, target); err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.Kind, nameOf(doc), err)
	}
	return obj, nil
}

func nameOf(doc []byte) string {
	var m struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	_ = yaml.Unmarshal(doc, &m)
	return m.Metadata.Name
}

// splitDocuments splits a YAML stream into its documents, dropping those
// that hold only comments.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var v any
		if err := yaml.Unmarshal(d, &v); err != nil {
			return nil, err
		}
		if v != nil {
			docs = append(docs, d)
		}
	}
}

// decodeFile decodes every document of a file under k8s/.
func decodeFile(t *testing.T, rel string) []object {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(rel))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := splitDocuments(data)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	if len(docs) == 0 {
		t.Fatalf("%s: no YAML document", rel)
	}
	var objs []object
	for i, d := range docs {
		obj, err := decode(d)
		if err != nil {
			t.Errorf("%s, document %d: %v", rel, i+1, err)
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

// yamlFiles lists the YAML files under dir (relative to k8s/), slash-separated.
func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.FromSlash(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && filepath.ToSlash(p) == alertTestsDir {
			return filepath.SkipDir // promtool's rule tests (alerttests_test.go), not manifests
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no YAML file under k8s/%s", dir)
	}
	return files
}

// ---------------------------------------------------------------------------
// Rendering.

// A bundle is the objects `kubectl apply -k dir` would send.
type bundle struct {
	dir  string
	objs []object
	yaml []byte // the whole rendering, for text checks
}

// render builds dir with the kustomize library, as `kubectl apply -k` does
// (files outside a kustomization's root are refused the same way), and
// decodes every resulting object strictly.
func render(t *testing.T, dir string) *bundle {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build k8s/%s: %v", dir, err)
	}
	all, err := m.AsYaml()
	if err != nil {
		t.Fatalf("k8s/%s: %v", dir, err)
	}
	b := &bundle{dir: dir, yaml: all}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("k8s/%s: %v", dir, err)
		}
		obj, err := decode(y)
		if err != nil {
			t.Errorf("k8s/%s rendered: %v", dir, err)
			continue
		}
		b.objs = append(b.objs, obj)
	}
	return b
}

// all returns the bundle's objects of type T.
func all[T object](b *bundle) []T {
	var out []T
	for _, o := range b.objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the bundle's one object of type T called name.
func one[T object](t *testing.T, b *bundle, name string) T {
	t.Helper()
	var found []T
	for _, o := range all[T](b) {
		if o.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("k8s/%s: %d objects of type %T named %q, want 1", b.dir, len(found), zero, name)
	}
	return found[0]
}

// ---------------------------------------------------------------------------
// What the dispatcher reads.

// dispatcherVariables returns the variables of config/table.go's settings table:
// the first string of each row.
func dispatcherVariables(t *testing.T) map[string]bool {
	t.Helper()
	const file = "../config/table.go"
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "settings" || len(vs.Values) != 1 {
			return true
		}
		table, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatalf("%s: settings is not a composite literal", file)
		}
		for _, e := range table.Elts {
			row, ok := e.(*ast.CompositeLit)
			if !ok || len(row.Elts) == 0 {
				t.Fatalf("%s: a settings row is not a composite literal", file)
			}
			lit, ok := row.Elts[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("%s: a settings row does not start with a string", file)
			}
			name, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			vars[name] = true
		}
		return false
	})
	// The table must be found and hold what the checks below rely on.
	for _, v := range []string{"HTTP_ADDR", "MAX_SENDERS", "TARGET_RPS", "CONTRACT_RPS", "MARKETING_RPS", "SHUTDOWN_GRACE", "OTP_SUBSCRIPTION", "MARKETING_SUBSCRIPTION"} {
		if !vars[v] {
			t.Fatalf("%s: settings has no row for %s (found %d rows)", file, v, len(vars))
		}
	}
	return vars
}

// reads reports whether the dispatcher reads variable v, and if not, why.
func reads(vars map[string]bool, v string) bool {
	_, elsewhere := readOutsideSettings[v]
	return vars[v] || elsewhere || strings.HasPrefix(v, "OTEL_")
}

// ---------------------------------------------------------------------------
// The tests.

// TestEveryManifestDecodesStrictly decodes every YAML document under k8s/,
// as written (patches and examples included), into its API type.
func TestEveryManifestDecodesStrictly(t *testing.T) {
	kinds := map[string]int{}
	for _, dir := range []string{baseDir, exampleDir, receiptsDir, consoleDir, monitoringDir} {
		for _, f := range yamlFiles(t, dir) {
			for _, obj := range decodeFile(t, f) {
				kinds[fmt.Sprintf("%T", obj)]++
			}
		}
	}
	// The checks cannot pass by finding nothing.
	for _, want := range []string{"*v1.Deployment", "*v1.ConfigMap", "*v1.Secret", "*v1.ServiceAccount", "*v1.Namespace",
		"*v2.HorizontalPodAutoscaler", "*v1.PodDisruptionBudget", "*v1.NetworkPolicy", "*v1.Job",
		"*v1.PodMonitor", "*v1.PrometheusRule", "*k8s.scaledObject", "*k8s.kustomization", "*v1.Service", "*v1.Ingress"} {
		if kinds[want] == 0 {
			t.Errorf("no %s among the manifests (found %v)", want, kinds)
		}
	}
}

// TestStrictDecodingRejectsUnknownFields shows the decoding above can fail.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n",
		"misplaced":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\nHTTP_ADDR: ':8080'\n",
		"duplicate key":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {A: '1', A: '2'}\n",
		"unknown kind":   "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
	} {
		if _, err := decode([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// TestKustomizationsListEveryManifest: a manifest beside a kustomization
// that it does not list is never applied; one listed that is missing fails
// the build. The files kept aside on purpose must stay aside.
func TestKustomizationsListEveryManifest(t *testing.T) {
	for _, dir := range []string{baseDir, exampleDir, receiptsDir, consoleDir, monitoringDir} {
		var k *kustomization
		for _, o := range decodeFile(t, dir+"/kustomization.yaml") {
			k, _ = o.(*kustomization)
		}
		if k == nil {
			t.Fatalf("k8s/%s/kustomization.yaml: not a Kustomization", dir)
		}
		listed := map[string]bool{}
		for _, r := range k.Resources {
			listed[path.Clean(dir+"/"+r)] = true
		}
		for _, p := range k.Patches {
			if p.Path != "" {
				listed[path.Clean(dir+"/"+p.Path)] = true
			}
		}
		for f := range listed {
			if _, err := os.Stat(filepath.FromSlash(f)); err != nil {
				t.Errorf("k8s/%s/kustomization.yaml lists %s: %v", dir, f, err)
			}
		}
		for _, f := range yamlFiles(t, dir) {
			if path.Dir(f) != dir || path.Base(f) == "kustomization.yaml" {
				continue
			}
			_, aside := notInKustomization[f]
			switch {
			case aside && listed[f]:
				t.Errorf("k8s/%s/kustomization.yaml lists %s, which is %s", dir, f, notInKustomization[f])
			case !aside && !listed[f]:
				t.Errorf("k8s/%s/kustomization.yaml does not list %s", dir, f)
			}
		}
	}
	// ../monitoring is part of the base.
	one[*monitoringv1.PrometheusRule](t, render(t, baseDir), poolName)
}

func TestBase(t *testing.T) {
	b := render(t, baseDir)
	checkPool(t, b, dispatcherVariables(t))
}

func TestExampleOverlay(t *testing.T) {
	b := render(t, exampleDir)
	checkPool(t, b, dispatcherVariables(t))

	t.Run("every object is in the overlay's namespace", func(t *testing.T) {
		one[*corev1.Namespace](t, b, exampleNS)
		for _, o := range b.objs {
			if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != exampleNS {
				t.Errorf("%T %s: namespace %q, want %q", o, o.GetName(), o.GetNamespace(), exampleNS)
			}
		}
	})
	t.Run("no base placeholder is left", func(t *testing.T) {
		for _, placeholder := range []string{"set-by-overlay", ".invalid", "image: sms-dispatcher:"} {
			if bytes.Contains(b.yaml, []byte(placeholder)) {
				t.Errorf("the rendered overlay still holds %q", placeholder)
			}
		}
		dep := one[*appsv1.Deployment](t, b, poolName)
		if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.Contains(img, "/") {
			t.Errorf("image %q: want a registry path", img)
		}
	})
	t.Run("the Redis CA file is mounted", func(t *testing.T) {
		dep := one[*appsv1.Deployment](t, b, poolName)
		c := container(t, dep.Spec.Template.Spec, "dispatcher")
		caFile := envValue(c, "REDIS_CA_FILE")
		if caFile == "" {
			t.Fatal("REDIS_CA_FILE is not set: Memorystore's TLS certificate would not verify")
		}
		v, item := mountedFile(t, dep.Spec.Template.Spec, c, caFile)
		if v.ConfigMap == nil {
			t.Fatalf("%s is not in a ConfigMap volume", caFile)
		}
		checkOutOfBand(t, "ConfigMap", v.ConfigMap.Name, item)
	})
	t.Run("the Secrets the pods read are the ones documented", func(t *testing.T) {
		dep := one[*appsv1.Deployment](t, b, poolName)
		c := container(t, dep.Spec.Template.Spec, "dispatcher")
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				checkOutOfBand(t, "Secret", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			}
		}
		v, item := mountedFile(t, dep.Spec.Template.Spec, c, envValue(c, "SMS_PROVIDER_TOKEN_FILE"))
		if v.Secret == nil {
			t.Fatal("SMS_PROVIDER_TOKEN_FILE is not in a Secret volume")
		}
		checkOutOfBand(t, "Secret", v.Secret.SecretName, item)
	})
	t.Run("the example REDIS_URL is Memorystore with AUTH and TLS, and the policy lets it out", func(t *testing.T) {
		var redisURL string
		for _, o := range decodeFile(t, exampleDir+"/out-of-band.example.yaml") {
			if s, ok := o.(*corev1.Secret); ok && s.StringData["REDIS_URL"] != "" {
				redisURL = s.StringData["REDIS_URL"]
			}
		}
		u, err := url.Parse(redisURL)
		if err != nil || u.Scheme != "rediss" || u.Port() != "6378" {
			t.Fatalf("REDIS_URL %q: want rediss://...:6378 (Memorystore's TLS port)", redisURL)
		}
		if pw, ok := u.User.Password(); !ok || pw == "" {
			t.Errorf("REDIS_URL: want the AUTH string as the password")
		}
		port, _ := strconv.Atoi(u.Port())
		dep := one[*appsv1.Deployment](t, b, poolName)
		if !egressAllows(b, dep.Spec.Template.Labels, port) {
			t.Errorf("no NetworkPolicy lets the dispatcher reach Redis on port %d", port)
		}
	})
}

// checkOutOfBand checks that out-of-band.example.yaml shows an object of
// kind and name with key.
func checkOutOfBand(t *testing.T, kind, name, key string) {
	t.Helper()
	checkOutOfBandIn(t, []string{exampleDir}, kind, name, key)
}

// checkOutOfBandIn checks that the out-of-band.example.yaml of one of dirs
// shows an object of kind and name with key.
func checkOutOfBandIn(t *testing.T, dirs []string, kind, name, key string) {
	t.Helper()
	var objs []object
	for _, dir := range dirs {
		objs = append(objs, decodeFile(t, dir+"/out-of-band.example.yaml")...)
	}
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Secret:
			if kind == "Secret" && v.Name == name {
				if _, ok := v.StringData[key]; ok {
					return
				}
				if _, ok := v.Data[key]; ok {
					return
				}
			}
		case *corev1.ConfigMap:
			if kind == "ConfigMap" && v.Name == name {
				if _, ok := v.Data[key]; ok {
					return
				}
			}
		}
	}
	t.Errorf("the manifests read %s %s key %s, which no out-of-band.example.yaml of %v shows", kind, name, key, dirs)
}

// checkPool checks a rendered bundle: each object on its own and the
// invariants between them and the dispatcher.
func checkPool(t *testing.T, b *bundle, vars map[string]bool) {
	dep := one[*appsv1.Deployment](t, b, poolName)
	cm := one[*corev1.ConfigMap](t, b, poolName)
	hpa := one[*autoscalingv2.HorizontalPodAutoscaler](t, b, poolName)
	pdb := one[*policyv1.PodDisruptionBudget](t, b, poolName)
	pm := one[*monitoringv1.PodMonitor](t, b, poolName)
	netpol := one[*networkingv1.NetworkPolicy](t, b, poolName)
	job := one[*batchv1.Job](t, b, setupName)
	pod := dep.Spec.Template.Spec
	podLabels := dep.Spec.Template.Labels
	c := container(t, pod, "dispatcher")
	cfg := effectiveEnv(t, b, c)

	t.Run("every variable set is one the dispatcher reads", func(t *testing.T) {
		for _, spec := range []corev1.PodSpec{pod, job.Spec.Template.Spec} {
			for _, ct := range slices.Concat(spec.InitContainers, spec.Containers) {
				for _, e := range ct.Env {
					if !reads(vars, e.Name) {
						t.Errorf("container %s sets %s, which the dispatcher does not read", ct.Name, e.Name)
					}
				}
				for _, ef := range ct.EnvFrom {
					if ef.SecretRef != nil {
						t.Errorf("container %s: envFrom a Secret hides which variables it sets; use env with secretKeyRef", ct.Name)
					}
					if ef.ConfigMapRef != nil {
						for k := range one[*corev1.ConfigMap](t, b, ef.ConfigMapRef.Name).Data {
							if !reads(vars, ef.Prefix+k) {
								t.Errorf("ConfigMap %s sets %s, which the dispatcher does not read", ef.ConfigMapRef.Name, ef.Prefix+k)
							}
						}
					}
				}
			}
		}
	})

	t.Run("secrets come from Secrets", func(t *testing.T) {
		for _, s := range secretVariables {
			if _, ok := cm.Data[s]; ok {
				t.Errorf("ConfigMap holds %s: it is a secret", s)
			}
			for _, e := range c.Env {
				if e.Name == s && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("env %s: want valueFrom.secretKeyRef", s)
				}
			}
		}
		if !cfg.set("REDIS_URL") {
			t.Error("REDIS_URL is not set: serve refuses to start without it")
		}
		tokenFile := envValue(c, "SMS_PROVIDER_TOKEN_FILE")
		if tokenFile != "/var/run/secrets/sms-provider/token" {
			t.Errorf("SMS_PROVIDER_TOKEN_FILE = %q, want /var/run/secrets/sms-provider/token", tokenFile)
		}
		if cfg.set("SMS_PROVIDER_TOKEN") {
			t.Error("both SMS_PROVIDER_TOKEN and SMS_PROVIDER_TOKEN_FILE are set: the dispatcher refuses that")
		}
		v, _ := mountedFile(t, pod, c, tokenFile)
		if v.Secret == nil {
			t.Errorf("%s is not in a Secret volume", tokenFile)
		}
	})

	t.Run("rates", func(t *testing.T) {
		contract, target, marketing := cfg.number(t, "CONTRACT_RPS"), cfg.number(t, "TARGET_RPS"), cfg.number(t, "MARKETING_RPS")
		if target > contract {
			t.Errorf("TARGET_RPS %v > CONTRACT_RPS %v", target, contract)
		}
		if marketing > target {
			t.Errorf("MARKETING_RPS %v > TARGET_RPS %v: OTP would have no room", marketing, target)
		}
		if burst := cfg.number(t, "BURST"); burst < 1 {
			t.Errorf("BURST %v < 1", burst)
		}
	})

	t.Run("MAX_SENDERS covers every sender", func(t *testing.T) {
		maxSenders := int(cfg.number(t, "MAX_SENDERS"))
		maxReplicas := int(hpa.Spec.MaxReplicas)
		surge := maxSurge(t, dep, maxReplicas)
		other, err := strconv.Atoi(cm.Annotations[otherSendersAnnotation])
		if err != nil || other < 0 {
			t.Fatalf("ConfigMap annotation %s = %q: want the number of senders outside this Deployment", otherSendersAnnotation, cm.Annotations[otherSendersAnnotation])
		}
		if need := maxReplicas + surge + other; maxSenders < need {
			t.Errorf("MAX_SENDERS %d < HPA maxReplicas %d + rolling-update surge %d + other senders %d = %d", maxSenders, maxReplicas, surge, other, need)
		}
	})

	t.Run("probes, scrape and policy use HTTP_ADDR's port", func(t *testing.T) {
		port := httpPort(t, cfg.value(t, "HTTP_ADDR"))
		if p := namedPort(c, "http"); p != port {
			t.Errorf("container port http = %d, HTTP_ADDR's port is %d", p, port)
		}
		for _, pr := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
			if pr.probe == nil || pr.probe.HTTPGet == nil {
				t.Errorf("no HTTP %s probe", pr.name)
				continue
			}
			if pr.probe.HTTPGet.Path != pr.path {
				t.Errorf("%s probe path %q, want %q", pr.name, pr.probe.HTTPGet.Path, pr.path)
			}
			if p := resolvePort(c, pr.probe.HTTPGet.Port); p != port {
				t.Errorf("%s probe port %v = %d, want %d", pr.name, pr.probe.HTTPGet.Port.String(), p, port)
			}
		}
		ann := dep.Spec.Template.Annotations
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(port) || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("scrape annotations %v: want scrape true, port %d, path /metrics", ann, port)
		}
		if len(pm.Spec.PodMetricsEndpoints) == 0 {
			t.Fatal("PodMonitor has no endpoint")
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.Port == nil || namedPort(c, *ep.Port) != port || ep.Path != "/metrics" {
				t.Errorf("PodMonitor endpoint port %v path %q: want the port named for %d, /metrics", ptrValue(ep.Port), ep.Path, port)
			}
		}
		if !matches(t, &pm.Spec.Selector, podLabels) {
			t.Error("PodMonitor does not select the dispatcher pods")
		}
		if len(netpol.Spec.Ingress) == 0 {
			t.Error("NetworkPolicy admits nothing: Prometheus could not scrape")
		}
		for _, r := range netpol.Spec.Ingress {
			if len(r.Ports) == 0 {
				t.Error("NetworkPolicy ingress rule without ports admits every port")
			}
			if len(r.From) == 0 {
				t.Error("NetworkPolicy ingress rule without from admits every pod of the cluster")
			}
			for _, f := range r.From {
				if f.IPBlock != nil || f.NamespaceSelector == nil || f.PodSelector == nil ||
					f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != monitoringNamespace ||
					f.PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
					t.Errorf("NetworkPolicy ingress from %v: only Prometheus's pods in the namespace %s may scrape", f, monitoringNamespace)
				}
			}
			for _, p := range r.Ports {
				if p.Port == nil || resolvePort(c, *p.Port) != port {
					t.Errorf("NetworkPolicy ingress port %v: only the metrics port %d may be open", p.Port, port)
				}
			}
		}
	})

	t.Run("the pod outlives its drain", func(t *testing.T) {
		grace, err := time.ParseDuration(cfg.value(t, "SHUTDOWN_GRACE"))
		if err != nil {
			t.Fatal(err)
		}
		// A preStop pause comes before SIGTERM, within the same grace period.
		var pause time.Duration
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			if c.Lifecycle.PreStop.Sleep == nil {
				t.Error("preStop: want a sleep action (the image has no shell for exec)")
			} else {
				pause = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			}
		}
		tgp := pod.TerminationGracePeriodSeconds
		if tgp == nil || time.Duration(*tgp)*time.Second <= pause+grace+stopMargin {
			t.Errorf("terminationGracePeriodSeconds %v: want more than the preStop pause %v + SHUTDOWN_GRACE %v + %v", ptrValue(tgp), pause, grace, stopMargin)
		}
	})

	t.Run("the HPA scales on CPU and the OTP backlog only", func(t *testing.T) {
		ref := hpa.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != dep.Name {
			t.Errorf("HPA targets %v, want the Deployment %s", ref, dep.Name)
		}
		if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 {
			t.Errorf("HPA minReplicas %v: want at least 2", ptrValue(hpa.Spec.MinReplicas))
		}
		if dep.Spec.Replicas != nil {
			t.Errorf("Deployment sets replicas %d: the HPA owns the count, and an apply would reset it", *dep.Spec.Replicas)
		}
		otpSub, marketingSub := cfg.value(t, "OTP_SUBSCRIPTION"), cfg.value(t, "MARKETING_SUBSCRIPTION")
		var cpu, backlog bool
		for _, m := range hpa.Spec.Metrics {
			switch {
			case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU:
				cpu = true
			case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil && m.External.Metric.Name == otpBacklogMetric:
				sel := m.External.Metric.Selector
				if sel == nil || sel.MatchLabels["resource.labels.subscription_id"] != otpSub {
					t.Errorf("backlog metric selector %v: want resource.labels.subscription_id %s", sel, otpSub)
				}
				backlog = true
			default:
				t.Errorf("HPA metric %s: want CPU and the OTP backlog only", m.Type)
			}
		}
		if !cpu || !backlog {
			t.Errorf("HPA scales on CPU: %v, OTP backlog: %v; want both", cpu, backlog)
		}
		spec, _ := json.Marshal(hpa.Spec)
		if strings.Contains(string(spec), marketingSub) || strings.Contains(strings.ToLower(string(spec)), "marketing") {
			t.Errorf("the HPA names the marketing subscription: more pods never send marketing faster")
		}
		bh := hpa.Spec.Behavior
		if bh == nil || bh.ScaleDown == nil || bh.ScaleDown.StabilizationWindowSeconds == nil || *bh.ScaleDown.StabilizationWindowSeconds < 60 {
			t.Error("HPA: want behavior.scaleDown.stabilizationWindowSeconds of at least 60 (the backlog metric is a minute old)")
		}
	})

	t.Run("the pool is spread and disruptions are bounded", func(t *testing.T) {
		if !matches(t, dep.Spec.Selector, podLabels) {
			t.Error("Deployment selector does not match its own pods")
		}
		zone := false
		for _, tsc := range pod.TopologySpreadConstraints {
			if !matches(t, tsc.LabelSelector, podLabels) {
				t.Errorf("topology spread on %s does not select the pods", tsc.TopologyKey)
			}
			zone = zone || tsc.TopologyKey == corev1.LabelTopologyZone
		}
		if !zone {
			t.Errorf("no topologySpreadConstraint on %s", corev1.LabelTopologyZone)
		}
		if !matches(t, pdb.Spec.Selector, podLabels) {
			t.Error("PodDisruptionBudget does not select the dispatcher pods")
		}
		switch {
		case pdb.Spec.MaxUnavailable != nil:
			if pdb.Spec.MaxUnavailable.IntValue() < 1 && pdb.Spec.MaxUnavailable.Type == intstr.Int {
				t.Error("PodDisruptionBudget maxUnavailable 0 blocks every node drain")
			}
		case pdb.Spec.MinAvailable != nil:
			if hpa.Spec.MinReplicas != nil && pdb.Spec.MinAvailable.Type == intstr.Int && int32(pdb.Spec.MinAvailable.IntValue()) >= *hpa.Spec.MinReplicas {
				t.Error("PodDisruptionBudget minAvailable >= minReplicas blocks node drains")
			}
		default:
			t.Error("PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
		}
	})

	t.Run("security", func(t *testing.T) {
		checkSecurity(t, "Deployment", pod)
		checkSecurity(t, "setup Job", job.Spec.Template.Spec)
	})

	t.Run("Workload Identity", func(t *testing.T) {
		gsa := regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$`)
		seen := map[string]string{}
		for what, spec := range map[string]corev1.PodSpec{"Deployment": pod, "setup Job": job.Spec.Template.Spec} {
			sa := one[*corev1.ServiceAccount](t, b, spec.ServiceAccountName)
			a := sa.Annotations["iam.gke.io/gcp-service-account"]
			if !gsa.MatchString(a) {
				t.Errorf("%s: ServiceAccount %s annotation iam.gke.io/gcp-service-account = %q", what, sa.Name, a)
			}
			seen[what] = sa.Name
		}
		if seen["Deployment"] == seen["setup Job"] {
			t.Error("the dispatcher and the setup Job share a service account: the pool would hold Pub/Sub admin rights")
		}
	})

	t.Run("the setup Job runs setup with the pool's image and configuration", func(t *testing.T) {
		spec := job.Spec.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("setup Job has %d containers, want 1", len(spec.Containers))
		}
		jc := spec.Containers[0]
		if !slices.Equal(jc.Args, []string{"setup"}) || len(jc.Command) != 0 {
			t.Errorf("setup Job command %q args %q, want the image's entrypoint with args [setup]", jc.Command, jc.Args)
		}
		if !slices.Equal(c.Args, []string{"serve"}) {
			t.Errorf("dispatcher args %q, want [serve]", c.Args)
		}
		if jc.Image != c.Image {
			t.Errorf("setup Job image %q, dispatcher image %q: want the same", jc.Image, c.Image)
		}
		if !slices.EqualFunc(jc.EnvFrom, c.EnvFrom, func(a, b corev1.EnvFromSource) bool {
			return a.ConfigMapRef != nil && b.ConfigMapRef != nil && a.ConfigMapRef.Name == b.ConfigMapRef.Name
		}) {
			t.Error("setup Job and dispatcher do not read the same ConfigMap: setup would create other names")
		}
		if rp := spec.RestartPolicy; rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever {
			t.Errorf("setup Job restartPolicy %q", rp)
		}
		if err := setupAccepts(effectiveEnv(t, b, &jc)); err != nil {
			t.Errorf("dispatcher setup refuses the Job's configuration: %v", err)
		}
		sel := one[*networkingv1.NetworkPolicy](t, b, setupName)
		if !matches(t, &sel.Spec.PodSelector, job.Spec.Template.Labels) || matches(t, &sel.Spec.PodSelector, podLabels) {
			t.Error("the setup NetworkPolicy must select the Job's pods and not the dispatcher's")
		}
		if matches(t, &netpol.Spec.PodSelector, job.Spec.Template.Labels) {
			t.Error("the dispatcher NetworkPolicy selects the setup Job's pods")
		}
	})

	t.Run("ingress: Prometheus to the metrics port, the Ingress controller to the receipts port", func(t *testing.T) {
		for _, p := range ingressProblems(b, c, podLabels, httpPort(t, cfg.value(t, "HTTP_ADDR")), receiptsPort(t, cfg)) {
			t.Error(p)
		}
	})

	t.Run("egress goes only to Redis, HTTPS, DNS and the metadata server", func(t *testing.T) {
		checkEgress(t, netpol)
		checkEgress(t, one[*networkingv1.NetworkPolicy](t, b, setupName))
		if ep := cfg.env["OTEL_EXPORTER_OTLP_ENDPOINT"]; ep != "" {
			u, err := url.Parse(ep)
			if err != nil {
				t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT %q: %v", ep, err)
			}
			port, _ := strconv.Atoi(u.Port())
			if port == 0 {
				port = map[string]int{"http": 80, "https": 443}[u.Scheme]
			}
			if !egressAllows(b, podLabels, port) {
				t.Errorf("no NetworkPolicy lets the dispatcher reach the OTLP endpoint %s", ep)
			}
		}
	})
}

// env is a container's environment as the process sees it: envFrom first,
// env over it. Values from Secrets and fields are present but unknown.
type env struct {
	env     map[string]string
	unknown map[string]bool
}

func effectiveEnv(t *testing.T, b *bundle, c *corev1.Container) env {
	t.Helper()
	e := env{env: map[string]string{}, unknown: map[string]bool{}}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			for k, v := range one[*corev1.ConfigMap](t, b, ef.ConfigMapRef.Name).Data {
				e.env[ef.Prefix+k] = v
			}
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom != nil {
			delete(e.env, v.Name)
			e.unknown[v.Name] = true
			continue
		}
		delete(e.unknown, v.Name)
		e.env[v.Name] = v.Value
	}
	return e
}

func (e env) set(name string) bool { return e.env[name] != "" || e.unknown[name] }

// value returns a variable the checks need the manifests to state.
func (e env) value(t *testing.T, name string) string {
	t.Helper()
	v, ok := e.env[name]
	if !ok || v == "" {
		t.Fatalf("%s is not set in the ConfigMap or the container's env: state it rather than rely on the default", name)
	}
	return v
}

func (e env) number(t *testing.T, name string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(e.value(t, name), 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func container(t *testing.T, spec corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// mountedFile finds the volume and the key that make file exist in c.
func mountedFile(t *testing.T, spec corev1.PodSpec, c *corev1.Container, file string) (corev1.Volume, string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, file)
		if err != nil || strings.HasPrefix(rel, "..") || m.SubPath != "" {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("volume mount %s is writable", m.MountPath)
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			var items []corev1.KeyToPath
			switch {
			case v.Secret != nil:
				items = v.Secret.Items
			case v.ConfigMap != nil:
				items = v.ConfigMap.Items
			default:
				t.Fatalf("%s: volume %s is neither a Secret nor a ConfigMap", file, v.Name)
			}
			if len(items) == 0 {
				return v, rel // every key is a file of its own name
			}
			for _, it := range items {
				if it.Path == rel {
					return v, it.Key
				}
			}
			t.Fatalf("%s: volume %s has no item with path %s", file, v.Name, rel)
		}
	}
	t.Fatalf("%s is in no volume mounted in container %s", file, c.Name)
	return corev1.Volume{}, ""
}

func httpPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("HTTP_ADDR %q: %v", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port == 0 {
		t.Fatalf("HTTP_ADDR %q: want a fixed port", addr)
	}
	return port
}

func namedPort(c *corev1.Container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return -1
}

func resolvePort(c *corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.String {
		return namedPort(c, p.StrVal)
	}
	return p.IntValue()
}

// maxSurge is the most pods a rolling update adds over the wanted count.
func maxSurge(t *testing.T, dep *appsv1.Deployment, replicas int) int {
	t.Helper()
	s := dep.Spec.Strategy
	if s.Type == appsv1.RecreateDeploymentStrategyType {
		return 0
	}
	surge := intstr.FromString("25%") // the API's default
	if s.RollingUpdate != nil && s.RollingUpdate.MaxSurge != nil {
		surge = *s.RollingUpdate.MaxSurge
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&surge, replicas, true)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func matches(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(l))
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// checkSecurity checks a pod runs its containers nonroot, read-only,
// without capabilities or privilege escalation, under seccomp, with
// resources bounded.
func checkSecurity(t *testing.T, what string, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("%s: shares a host namespace", what)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a Kubernetes API token it never uses", what)
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s container %s: no securityContext", what, c.Name)
			continue
		}
		if v := firstSet(sc.RunAsNonRoot, psc.RunAsNonRoot); v == nil || !*v {
			t.Errorf("%s container %s: runAsNonRoot is not true", what, c.Name)
		}
		// The image's USER cannot be checked by the kubelet unless numeric;
		// a numeric runAsUser makes runAsNonRoot verifiable whatever it is.
		if v := firstSet(sc.RunAsUser, psc.RunAsUser); v == nil || *v == 0 {
			t.Errorf("%s container %s: want a non-zero runAsUser", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s container %s: root filesystem is writable", what, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s container %s: allowPrivilegeEscalation is not false", what, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s container %s: privileged", what, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s container %s: want capabilities drop [ALL] and none added", what, c.Name)
		}
		sp := firstSet(sc.SeccompProfile, psc.SeccompProfile)
		if sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s container %s: want seccompProfile RuntimeDefault", what, c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
			if req.IsZero() || lim.IsZero() {
				t.Errorf("%s container %s: want a %s request and limit", what, c.Name, r)
			} else if req.Cmp(lim) > 0 {
				t.Errorf("%s container %s: %s request above its limit", what, c.Name, r)
			}
		}
	}
}

func firstSet[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

// Where the dispatcher and the setup Job may connect. NetworkPolicy cannot
// name hosts: the provider and Google APIs share 443.
var (
	egressPorts = map[int32]string{53: "DNS", 443: "the provider and Google APIs", 6378: "Redis (TLS, Memorystore)", 6379: "Redis"}
	// The GKE metadata server, where Workload Identity hands out tokens,
	// only at its own address.
	metadataServer = map[int32]string{988: "169.254.169.252/32", 80: "169.254.169.254/32"}
)

func checkEgress(t *testing.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress and Egress", np.Name, np.Spec.PolicyTypes)
	}
	if len(np.Spec.Egress) == 0 {
		t.Errorf("NetworkPolicy %s allows no egress: not even DNS", np.Name)
	}
	for _, r := range np.Spec.Egress {
		if len(r.Ports) == 0 {
			t.Errorf("NetworkPolicy %s: an egress rule without ports allows every port", np.Name)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.Port.Type != intstr.Int || p.EndPort != nil {
				t.Errorf("NetworkPolicy %s: egress port %v: want one numbered port", np.Name, p.Port)
				continue
			}
			n := p.Port.IntVal
			if _, ok := egressPorts[n]; ok {
				continue
			}
			cidr, ok := metadataServer[n]
			if !ok || len(r.To) != 1 || r.To[0].IPBlock == nil || r.To[0].IPBlock.CIDR != cidr {
				t.Errorf("NetworkPolicy %s: egress to port %d %v is neither Redis, HTTPS, DNS nor the metadata server", np.Name, n, r.To)
			}
		}
	}
}

// egressAllows reports whether some NetworkPolicy selecting pods with
// podLabels allows egress to TCP port (anywhere or somewhere).
func egressAllows(b *bundle, podLabels map[string]string, port int) bool {
	for _, np := range all[*networkingv1.NetworkPolicy](b) {
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !s.Matches(labels.Set(podLabels)) {
			continue
		}
		for _, r := range np.Spec.Egress {
			for _, p := range r.Ports {
				if p.Port != nil && p.Port.Type == intstr.Int && int(p.Port.IntVal) == port && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
					return true
				}
			}
		}
	}
	return false
}

// TestKEDAAlternative checks the ScaledObject kept beside the example
// overlay against the HPA it would replace.
func TestKEDAAlternative(t *testing.T) {
	b := render(t, baseDir)
	hpa := one[*autoscalingv2.HorizontalPodAutoscaler](t, b, poolName)
	otpSub := one[*corev1.ConfigMap](t, b, poolName).Data["OTP_SUBSCRIPTION"]
	keda := &bundle{dir: exampleDir}
	for _, o := range decodeFile(t, exampleDir+"/keda-scaledobject.yaml") {
		keda.objs = append(keda.objs, o)
	}
	so := one[*scaledObject](t, keda, poolName)
	if so.Spec.ScaleTargetRef.Name != poolName {
		t.Errorf("ScaledObject targets %q", so.Spec.ScaleTargetRef.Name)
	}
	if so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount != hpa.Spec.MaxReplicas {
		t.Errorf("ScaledObject maxReplicaCount %v, HPA maxReplicas %d: keep them equal so MAX_SENDERS covers both", ptrValue(so.Spec.MaxReplicaCount), hpa.Spec.MaxReplicas)
	}
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 2 {
		t.Errorf("ScaledObject minReplicaCount %v: want at least 2", ptrValue(so.Spec.MinReplicaCount))
	}
	var cpu, backlog bool
	for _, tr := range so.Spec.Triggers {
		for _, v := range tr.Metadata {
			if strings.Contains(strings.ToLower(v), "marketing") {
				t.Errorf("ScaledObject trigger %s names marketing: more pods never send marketing faster", tr.Type)
			}
		}
		switch tr.Type {
		case "cpu":
			cpu = true
		case "prometheus":
			if !strings.Contains(tr.Metadata["query"], `subscription_id="`+otpSub+`"`) {
				t.Errorf("prometheus trigger query %q: want the backlog of %s", tr.Metadata["query"], otpSub)
			}
			if tr.AuthenticationRef == nil {
				t.Error("prometheus trigger: no authenticationRef (Google Managed Prometheus needs Workload Identity)")
			} else {
				ta := one[*triggerAuthentication](t, keda, tr.AuthenticationRef.Name)
				if ta.Spec.PodIdentity == nil || ta.Spec.PodIdentity.Provider != "gcp" {
					t.Errorf("TriggerAuthentication %s: want podIdentity provider gcp", ta.Metadata.Name)
				}
			}
			backlog = true
		default:
			t.Errorf("ScaledObject trigger %s: want cpu and the OTP backlog only (gcp-pubsub is deprecated)", tr.Type)
		}
	}
	if !cpu || !backlog {
		t.Errorf("ScaledObject scales on CPU: %v, OTP backlog: %v; want both", cpu, backlog)
	}
}

// ---------------------------------------------------------------------------
// The image.

type stage struct {
	name, image string
	from        *dfparser.Node
	instrs      []*dfparser.Node
}

func dockerfileStages(t *testing.T) []stage {
	t.Helper()
	f, err := os.Open("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := dfparser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s", w.Short)
	}
	var stages []stage
	for _, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			args := nodeArgs(n)
			s := stage{from: n}
			if len(args) > 0 {
				s.image = args[0]
			}
			if len(args) == 3 && strings.EqualFold(args[1], "as") {
				s.name = args[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if !strings.EqualFold(n.Value, "arg") {
				t.Errorf("Dockerfile line %d: %s before the first FROM", n.StartLine, n.Value)
			}
			continue
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, n)
	}
	return stages
}

func nodeArgs(n *dfparser.Node) []string {
	var args []string
	for a := n.Next; a != nil; a = a.Next {
		args = append(args, a.Value)
	}
	return args
}

func TestDockerfile(t *testing.T) {
	stages := dockerfileStages(t)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a runtime stage", len(stages))
	}
	final := stages[len(stages)-1]
	builders := map[string]stage{}
	for _, s := range stages[:len(stages)-1] {
		builders[s.name] = s
	}

	t.Run("the runtime image is distroless static nonroot or scratch", func(t *testing.T) {
		distroless := regexp.MustCompile(`^gcr\.io/distroless/static(-debian\d+)?:nonroot(@sha256:[0-9a-f]{64})?$`)
		if !distroless.MatchString(final.image) && final.image != "scratch" {
			t.Errorf("final stage FROM %q: want gcr.io/distroless/static-debianNN:nonroot or scratch", final.image)
		}
		var user, entrypoint *dfparser.Node
		copied := false
		for _, n := range final.instrs {
			switch strings.ToLower(n.Value) {
			case "user":
				user = n
			case "entrypoint":
				entrypoint = n
			case "copy":
				for _, fl := range n.Flags {
					if from, ok := strings.CutPrefix(fl, "--from="); ok {
						if _, ok := builders[from]; !ok {
							t.Errorf("COPY --from=%s: no such earlier stage", from)
						}
						args := nodeArgs(n)
						copied = copied || args[len(args)-1] == "/dispatcher"
					}
				}
			case "run":
				t.Errorf("final stage RUN on line %d: the runtime image has no shell", n.StartLine)
			}
		}
		if !copied {
			t.Error("final stage does not COPY --from a build stage to /dispatcher")
		}
		if final.image == "scratch" && !strings.Contains(strings.Join(originals(final.instrs), "\n"), "ca-certificates") {
			t.Error("scratch has no CA certificates: copy them in (the provider and Google APIs are HTTPS)")
		}
		if user == nil {
			t.Fatal("final stage has no USER")
		}
		u, _, _ := strings.Cut(nodeArgs(user)[0], ":")
		if uid, err := strconv.Atoi(u); (err == nil && uid == 0) || (err != nil && u != "nonroot") {
			t.Errorf("USER %s: want nonroot (65532 in distroless)", nodeArgs(user)[0])
		}
		if entrypoint == nil || !entrypoint.Attributes["json"] || !slices.Equal(nodeArgs(entrypoint), []string{"/dispatcher"}) {
			t.Errorf(`final stage: want ENTRYPOINT ["/dispatcher"] (exec form: signals reach the process)`)
		}
	})

	t.Run("the build is static, trimmed and cached", func(t *testing.T) {
		var build *dfparser.Node
		var buildStage stage
		for _, s := range stages[:len(stages)-1] {
			for _, n := range s.instrs {
				if strings.EqualFold(n.Value, "run") && strings.Contains(n.Original, "go build") {
					build, buildStage = n, s
				}
			}
		}
		if build == nil {
			t.Fatal("no RUN go build in a build stage")
		}
		env := strings.Join(originals(buildStage.instrs), "\n")
		for _, want := range []string{"-trimpath", "-ldflags", "-s -w", "./cmd/dispatcher"} {
			if !strings.Contains(build.Original, want) {
				t.Errorf("go build: no %s in %q", want, build.Original)
			}
		}
		if !strings.Contains(env, "CGO_ENABLED=0") {
			t.Error("build stage: no CGO_ENABLED=0 (the runtime image has no libc)")
		}
		// go.mod and go.sum alone first, then the download, then the source:
		// the module layer survives a change to the code.
		order := []string{"COPY go.mod go.sum", "go mod download", "COPY . ."}
		at := -1
		for _, step := range order {
			i := slices.IndexFunc(buildStage.instrs, func(n *dfparser.Node) bool { return strings.Contains(n.Original, step) })
			if i <= at {
				t.Errorf("build stage: want %q, in that order", order)
				break
			}
			at = i
		}
		goVersion := goDirective(t)
		if !strings.HasPrefix(buildStage.image, "golang:"+goVersion) {
			t.Errorf("build stage FROM %q: go.mod says go %s", buildStage.image, goVersion)
		}
	})
}

func originals(ns []*dfparser.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Original)
	}
	return out
}

// goDirective returns go.mod's language version as major.minor.
func goDirective(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			parts := strings.Split(v, ".")
			if len(parts) >= 2 {
				return parts[0] + "." + parts[1]
			}
		}
	}
	t.Fatal("go.mod: no go directive")
	return ""
}

// TestDockerignoreKeepsTheBuildInputs: every file `go build ./cmd/dispatcher`
// reads must reach the build context, and the repository's history must
// not.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := listDispatcherDeps(t, dockerBuildTags(t),
		`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`)
	inputs := []string{"go.mod", "go.sum"}
	for _, p := range files {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, filepath.ToSlash(rel))
	}
	if len(inputs) < 10 || !slices.Contains(inputs, "cmd/dispatcher/main.go") || !slices.Contains(inputs, "admission/admit/global.lua") {
		t.Fatalf("go list found only %v", inputs)
	}
	for _, in := range inputs {
		excluded, err := pm.MatchesOrParentMatches(in)
		if err != nil {
			t.Fatal(err)
		}
		if excluded {
			t.Errorf(".dockerignore excludes %s, which the build reads", in)
		}
	}
	for _, out := range []string{".git/config", "k8s/base/deployment.yaml", "cmd/dispatcher/main_test.go", "tools/cmd/loadtest/main.go"} {
		if excluded, _ := pm.MatchesOrParentMatches(out); !excluded {
			t.Errorf(".dockerignore lets %s into the build context", out)
		}
	}
}

// dockerBuildTags returns the build tags of the Dockerfile's go build, ""
// if it sets none.
func dockerBuildTags(t *testing.T) string {
	t.Helper()
	for _, s := range dockerfileStages(t) {
		for _, n := range s.instrs {
			if !strings.EqualFold(n.Value, "run") || !strings.Contains(n.Original, "go build") {
				continue
			}
			if m := regexp.MustCompile(`\s-?-tags[= ]+(?:"([^"]*)"|'([^']*)'|(\S+))`).FindStringSubmatch(n.Original); m != nil {
				return m[1] + m[2] + m[3]
			}
			return ""
		}
	}
	t.Fatal("no RUN go build in the Dockerfile")
	return ""
}

// listDispatcherDeps runs go list -deps -f format on ./cmd/dispatcher of the
// root module, with the build tags given, and returns its output's fields.
func listDispatcherDeps(t *testing.T, tags, format string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "-tags", tags, "-f", format, "./cmd/dispatcher")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	return strings.Fields(string(out))
}

// TestImageLeavesOutTheDemo: the binary the Dockerfile builds has no test
// servers. `dispatcher demo` runs on an in-process Pub/Sub (pstest), Redis
// (miniredis) and the provider simulator (providertest) behind an httptest
// server; the Dockerfile's build tags (nodemo) must leave all of them out.
func TestImageLeavesOutTheDemo(t *testing.T) {
	tags := dockerBuildTags(t)
	deps := listDispatcherDeps(t, tags, "{{.ImportPath}}")
	if !slices.Contains(deps, "smsdispatcher/provider") {
		t.Fatalf("go list found only %v", deps)
	}
	for _, p := range []string{"cloud.google.com/go/pubsub/v2/pstest", "github.com/alicebob/miniredis/v2", "net/http/httptest", "smsdispatcher/internal/demo", "smsdispatcher/internal/localstack", "smsdispatcher/provider/providertest"} {
		if slices.Contains(deps, p) {
			t.Errorf("the Dockerfile's build (tags %q) links %s: build with -tags nodemo", tags, p)
		}
	}
}

// TestInternalHoldsWhatTheBinaryLinks: the product's internal/ holds what
// `dispatcher` links (with the demo, `go run ./cmd/dispatcher demo`) and the
// helpers its tests import; a program, or a package that the binary does
// not link yet code outside tests imports, is a tool's, and belongs to the
// tools module (tools/).
func TestInternalHoldsWhatTheBinaryLinks(t *testing.T) {
	linked := listDispatcherDeps(t, "", "{{.ImportPath}}")
	if !slices.Contains(linked, "smsdispatcher/internal/demo") {
		t.Fatalf("go list found only %v", linked)
	}
	// Each line: a package of the product's module, its name, then what its
	// non-test files import.
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{.Name}} {{join .Imports " "}}`, "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	importers := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		for _, imp := range f[2:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	internal := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		p, name := f[0], f[1]
		if !strings.HasPrefix(p, "smsdispatcher/internal/") {
			continue
		}
		internal++
		if slices.Contains(linked, p) {
			continue
		}
		switch {
		case name == "main":
			t.Errorf("%s: a program under internal/: a tool belongs under tools/cmd/", p)
		case len(importers[p]) > 0:
			t.Errorf("%s: the dispatcher does not link it, yet %v import it outside tests: a tool's package belongs under tools/", p, importers[p])
		}
	}
	if internal < 5 {
		t.Fatalf("go list found %d packages under internal/", internal)
	}
}
