package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"

	"smsdispatcher/config/policy"
	"smsdispatcher/deferral"
	"smsdispatcher/internal/redistest"
)

// opensLater is a window that opens an hour after it is first asked.
type opensLater struct{}

func (opensLater) Next(_, _ string, t time.Time) time.Time { return t.Add(time.Hour) }

// TestDeferredListReleaseDrop: `deferred list` shows each deferred
// message without its number, `release --dry-run` and `drop --dry-run`
// change nothing, `release --id` makes one due now and marks it sent
// when it comes back, `drop` removes the rest; `message` and `status`
// show the deferral.
func TestDeferredListReleaseDrop(t *testing.T) {
	class := "w" + strings.ToLower(strings.NewReplacer("_", "-").Replace(redistest.UniqueAccount(t)))
	class = class[:min(len(class), 32)]
	dir := t.TempDir()
	file := filepath.Join(dir, "accounts.yaml")
	if err := os.WriteFile(file, []byte("classes:\n  - name: otp\n  - name: "+class+"\n    send_hours: \"08:00-21:00\"\n"+
		"accounts:\n  - name: "+class+"\n    provider: generic\n    generic: {url: https://a.example, token: t1}\n    classes: [otp, "+class+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	t.Setenv("PUBSUB_EMULATOR_HOST", ps.Addr)
	if _, err := ps.GServer.CreateTopic(context.Background(), &pb.Topic{Name: "projects/proj/topics/sms-status"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REDIS_URL": "redis://" + redistest.Addr(t), "ACCOUNTS_FILE": file, "PUBSUB_PROJECT_ID": "proj"}
	old := environ
	environ = func(k string) string { return env[k] }
	t.Cleanup(func() { environ = old })

	ctx := context.Background()
	store := deferral.New(redistest.Client(t), nil, nil)
	for _, id := range []string{"promo-1", "promo-2"} {
		m := deferral.Message{Class: class, ID: id, To: "+33612345678", Data: []byte(`{"id":"` + id + `","to":"+33612345678","body":"sale"}`)}
		if j, err := store.Judge(ctx, m, policy.Sending{Window: opensLater{}}); err != nil || j.Verdict != deferral.Deferred {
			t.Fatalf("defer %s: %+v %v", id, j, err)
		}
	}
	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, args, &out, &errb); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errb.String())
		}
		return out.String()
	}
	list := cli("deferred", "list")
	if strings.Count(list, "\n") != 2 || !strings.Contains(list, class+" promo-1 due ") || strings.Contains(list, "+336") {
		t.Errorf("list:\n%s\nwant two lines naming the class and id, never the number", list)
	}
	if out := cli("deferred", "release", "--dry-run"); strings.Count(out, "would release") != 2 {
		t.Errorf("release --dry-run:\n%s", out)
	}
	if out := cli("deferred", "drop", "--dry-run", "--id", "promo-2"); !strings.HasPrefix(out, "would drop "+class+" promo-2") {
		t.Errorf("drop --dry-run --id:\n%s", out)
	}
	if _, total, _ := store.List(ctx, class, 0, 10); total != 2 {
		t.Fatalf("a dry run changed the store: %d left", total)
	}
	if out := cli("message", "promo-1"); !strings.Contains(out, "deferred (window): class "+class+", since ") || !strings.Contains(out, ", due ") {
		t.Errorf("message promo-1:\n%s", out)
	}
	if out := cli("message", "promo-1", "--json"); !strings.Contains(out, `"deferrals":[{"class":"`+class+`","reason":"window"`) || !strings.Contains(out, `"state":"deferred"`) {
		t.Errorf("message promo-1 --json:\n%s", out)
	}
	if out := cli("status"); !strings.Contains(out, "deferred "+class+": 2, overdue by 15m0s: 0; next releases") {
		t.Errorf("status:\n%s", out)
	}
	if out := cli("deferred", "release", "--id", "promo-1"); !strings.HasPrefix(out, "released "+class+" promo-1") {
		t.Errorf("release --id:\n%s", out)
	}
	// Released early: when it comes back, it is sent whatever its window.
	m := deferral.Message{Class: class, ID: "promo-1", To: "+33612345678", Data: []byte(`{}`)}
	if j, err := store.Judge(ctx, m, policy.Sending{Window: opensLater{}}); err != nil || j.Verdict != deferral.Send {
		t.Errorf("a message released early came back and was judged %+v (%v), want send", j, err)
	}
	if n := len(ps.Messages()); n != 0 {
		t.Errorf("%d status events before the drop, want none (a dry run, a release)", n)
	}
	if out := cli("deferred", "drop"); !strings.Contains(out, "dropped "+class+" promo-2") {
		t.Errorf("drop:\n%s", out)
	}
	if _, total, _ := store.List(ctx, class, 0, 10); total != 0 {
		t.Errorf("%d left after the drop, want none", total)
	}
	// The drop's final status events (promo-1, released early, was still
	// stored: no releaser ran): their producers learn their end.
	events := ps.Messages()
	dropped := map[string]bool{}
	for _, m := range events {
		var ev map[string]string
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev["status"] != "dropped" || ev["reason"] != "operator" ||
			ev["class"] != class || m.Attributes["status"] != "dropped" || m.Attributes["id"] != ev["id"] {
			t.Errorf("a drop's status event: %s %v (%v), want dropped by the operator", m.Data, m.Attributes, err)
		}
		dropped[ev["id"]] = true
	}
	if len(events) != 2 || !dropped["promo-1"] || !dropped["promo-2"] {
		t.Errorf("%d status events after the drop, for %v; want one each for promo-1 and promo-2", len(events), dropped)
	}
	// After their end, message still says they were deferred, and how it
	// ended (the trace); promo-1's release came back and was sent.
	var js struct {
		Deferrals []struct {
			Class, State, Reason string
			DeferredAt           time.Time `json:"deferred_at"`
			EndedAt              time.Time `json:"ended_at"`
		} `json:"deferrals"`
	}
	if err := json.Unmarshal([]byte(cli("message", "promo-2", "--json")), &js); err != nil || len(js.Deferrals) != 1 ||
		js.Deferrals[0].State != "dropped" || js.Deferrals[0].Class != class || js.Deferrals[0].Reason != "window" ||
		js.Deferrals[0].DeferredAt.IsZero() || js.Deferrals[0].EndedAt.IsZero() {
		t.Errorf("message promo-2 --json after its drop: %+v (%v), want its deferral, dropped", js, err)
	}
	if out := cli("message", "promo-2"); !strings.Contains(out, "deferred (window): class "+class+", since ") || !strings.Contains(out, "; dropped at ") {
		t.Errorf("message promo-2 after its drop:\n%s", out)
	}
}
