package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"smsdispatcher/provider"
	"smsdispatcher/provider/providertest"
)

// TestAThrottleInA200BodyCountsAsA429: Vonage answers a throttle with HTTP
// 200 and status "1" in the body. The provider span and the request metric
// must still say 429, an acceptance must carry the provider's id, and no
// span shows the credentials.
func TestAThrottleInA200BodyCountsAsA429(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	tr, err := SetupTracing(ctx, func(string) string { return "" }, WithSpanExporter(spans))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(ctx)
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(ctx)

	sim := providertest.NewVonage(providertest.Config{Token: "secret-0123456789"}, "key")
	srv := httptest.NewServer(sim)
	defer srv.Close()
	v, err := provider.NewVonage(provider.VonageConfig{APIKey: "key", APISecret: provider.StaticSecret("secret-0123456789"), From: "TEST", BaseURL: srv.URL},
		provider.WithTransportWrapper(func(rt http.RoundTripper) http.RoundTripper { return tr.Transport(rt, m) }))
	if err != nil {
		t.Fatal(err)
	}
	defer v.CloseIdleConnections()

	sim.ThrottleNext(1, time.Second)
	msg := provider.Message{ID: "m-1", To: "+819012345678", Body: "Your code is 482913"}
	if _, err := v.Send(ctx, msg); err == nil {
		t.Fatal("the forced throttle was accepted")
	}
	rc, err := v.Send(ctx, msg)
	if err != nil || rc.ID == "" {
		t.Fatalf("second send: %+v, %v; want accepted with an id", rc, err)
	}

	got := spans.GetSpans().Snapshots()
	if len(got) != 2 {
		t.Fatalf("%d provider spans, want 2", len(got))
	}
	want := []map[string]string{
		{"http.response.status_code": "200", "error.type": "429", "sms.provider.outcome": "throttled", "sms.provider.error_code": "1"},
		{"http.response.status_code": "200", "sms.provider.outcome": "accepted", "sms.provider.message_id": rc.ID},
	}
	for i, s := range got {
		for k, v := range want[i] {
			if a, ok := attr(s, k); !ok || a.Emit() != v {
				t.Errorf("span %d: %s = %q (present %v), want %q", i, k, a.Emit(), ok, v)
			}
		}
	}
	if _, ok := attr(got[1], "error.type"); ok {
		t.Errorf("the accepted send's span has error.type")
	}
	// Vonage's credentials travel in the form: no span may show them, nor
	// the number or the body.
	for i, s := range got {
		for _, a := range s.Attributes() {
			if v := a.Value.Emit(); strings.Contains(v, "secret-0123") || strings.Contains(v, "9012345678") || strings.Contains(v, "482913") {
				t.Errorf("span %d: %s = %q shows a secret, the number or the body", i, a.Key, v)
			}
		}
	}

	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	var throttles, accepted bool
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "http_client_request_duration_seconds_count{") {
			continue
		}
		throttles = throttles || (strings.Contains(line, `sms_provider_status_class="429"`) && strings.HasSuffix(line, " 1"))
		accepted = accepted || (strings.Contains(line, `sms_provider_status_class="2xx"`) && strings.HasSuffix(line, " 1"))
	}
	if !throttles || !accepted {
		t.Fatalf("request metric: a 429 counted %v, a 2xx counted %v; want both once\n%s", throttles, accepted, body)
	}
}
