package status

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
)

// TestAccountOfAState builds the report of a fixed state: the rate in
// force is the lowest of the target, the override and a learned rate the
// account uses; an account pause says why; a process quiet for more than
// AliveWithin is silent; sends count by age.
func TestAccountOfAState(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sent := make([]int, seconds)
	sent[seconds-1], sent[seconds-5], sent[0] = 2, 3, 4
	st := accountState{
		Now:         t0,
		Override:    &overrideState{TargetRPS: 60, Left: time.Minute},
		Learned:     admission.Learned{RPS: 40, Mode: "settled", Low: 40, High: 50},
		PenaltyLeft: 90 * time.Second, PenaltyWhy: "account:suspended",
		Processes: []listed{
			{ID: "b", State: "fallback host-b v1", LastBeat: t0.Add(-AliveWithin - time.Second)},
			{ID: "a", State: "ok host-a v1", LastBeat: t0.Add(-time.Second)},
			{ID: "c", State: "garbled", LastBeat: t0},
		},
		Sent:    map[admission.Class][]int{admission.OTP: sent, admission.Marketing: make([]int, seconds)},
		Classes: []admission.Class{admission.OTP, admission.Marketing},
	}
	s := Setup{Account: config.Account{Name: "main", Provider: "generic", RateUnit: "message", Classes: []admission.Class{admission.OTP},
		ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70, Adaptive: admission.Adaptive{Enabled: true}}}
	a := accountOf(s, st)
	if a.InForceRPS != 40 || a.Override == nil || *a.Override.LeftSeconds != 60 || a.Learned == nil {
		t.Errorf("rates: in force %g, override %+v, learned %+v; want 40 from the learned rate", a.InForceRPS, a.Override, a.Learned)
	}
	if p := a.Penalty; p == nil || p.Reason != "account" || p.Detail != "suspended" || p.LeftSeconds != 90 {
		t.Errorf("penalty %+v, want an account pause of 90 s, suspended", p)
	}
	if o := a.Sent["otp"]; o.Last1s != 2 || o.Last10s != 5 || o.Last60s != 9 {
		t.Errorf("otp sent %+v, want 2, 5, 9", o)
	}
	want := []Process{
		{ID: "a", Host: "host-a", Version: "v1", Mode: "ok", LastBeat: 1, Alive: true},
		{ID: "b", Host: "host-b", Version: "v1", Mode: "silent", LastBeat: (AliveWithin + time.Second).Seconds()},
		{ID: "c", Mode: "unknown", Alive: true},
	}
	for i, p := range a.Processes {
		if i >= len(want) || !reflect.DeepEqual(p, want[i]) {
			t.Errorf("processes %+v, want %+v", a.Processes, want)
			break
		}
	}

	s.Adaptive.Enabled = false
	if a := accountOf(s, st); a.InForceRPS != 60 {
		t.Errorf("in force %g with the learned rate inert, want the override's 60", a.InForceRPS)
	}
}

// TestTheHealthInTheReport: a degraded account reports when it became
// so, the run that made it so and its probes, in JSON and in one text
// line; a run of failures that has not degraded it is healthy, with its
// line; a healthy account with none has no line, and since null.
func TestTheHealthInTheReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Setup{Account: config.Account{Name: "primary", Provider: "twilio", RateUnit: "message", Classes: []admission.Class{admission.OTP}}}
	for _, tt := range []struct {
		name     string
		health   healthState
		wantJSON string
		wantLine string // "" for none
	}{
		{"degraded", healthState{Health: admission.Degraded, Since: t0.Add(-90 * time.Second).Local(), Failures: 5, ProbesOK: 1},
			`{"state":"degraded","since":"2025-12-31T23:58:30Z","failures_in_a_row":5,"probes_ok":1}`,
			"  health          degraded for 1m30s (since 23:58:30 UTC), after 5 failures in a row: probes only, 1 succeeded in a row\n"},
		{"a run of failures", healthState{Health: admission.Failing, Failures: 2},
			`{"state":"healthy","since":null,"failures_in_a_row":2,"probes_ok":0}`,
			"  health          healthy, 2 failures in a row counted\n"},
		{"healthy", healthState{},
			`{"state":"healthy","since":null,"failures_in_a_row":0,"probes_ok":0}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := accountState{Now: t0, Health: tt.health, Sent: map[admission.Class][]int{admission.OTP: make([]int, seconds), admission.Marketing: make([]int, seconds)},
				Classes: []admission.Class{admission.OTP, admission.Marketing}}
			r := Report{Time: t0, Accounts: []Account{accountOf(s, st)}}
			b, err := json.Marshal(r.Accounts[0].Health)
			if err != nil || string(b) != tt.wantJSON {
				t.Errorf("json %s (%v), want %s", b, err, tt.wantJSON)
			}
			var out bytes.Buffer
			r.WriteText(&out)
			var got string
			for _, l := range strings.SplitAfter(out.String(), "\n") {
				if strings.HasPrefix(l, "  health") {
					got += l
				}
			}
			if got != tt.wantLine {
				t.Errorf("text's health line %q, want %q in\n%s", got, tt.wantLine, out.String())
			}
		})
	}
}

// TestAHeartbeatsStateReadsBack: the state Heartbeats writes is the one
// Read parses, a host with spaces included.
func TestAHeartbeatsStateReadsBack(t *testing.T) {
	mode, host, version, ok := parseState(state("penalty", "my host", "1.2.3"))
	if !ok || mode != "penalty" || host != "my_host" || version != "1.2.3" {
		t.Fatalf("read back %q %q %q %v", mode, host, version, ok)
	}
}

// TestWatchWithoutATerminal prints one line an account a second, and
// JSON objects with asJSON, until ctx ends.
func TestWatchWithoutATerminal(t *testing.T) {
	synctest.Test(t, testWatchWithoutATerminal)
}

func testWatchWithoutATerminal(t *testing.T) {
	r := Report{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Accounts: []Account{{Name: "main", InForceRPS: 90, Classes: []string{"otp", "marketing"},
		Sent: map[string]*Sent{"otp": {Last1s: 3}, "marketing": {}}, Penalty: &Penalty{Reason: "429", LeftSeconds: 1.5},
		Processes: []Process{{Alive: true, Mode: "ok"}, {Mode: "silent"}}, Health: Health{State: "degraded"}}}}
	var out bytes.Buffer
	reads := 0
	var stop context.CancelFunc
	read := func() (Report, error) {
		if reads++; reads == 2 {
			stop()
		}
		return r, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop = cancel
	if err := Watch(ctx, &out, false, false, read); err != nil {
		t.Fatal(err)
	}
	const line = "2026-01-01T00:00:00Z account=main otp=3 marketing=0 in_force=90/s penalty=429:1.5s in_flight=0 processes=1 not_deciding_with_redis=1 health=degraded\n"
	if out.String() != line {
		t.Errorf("watch printed %q, want %q", out.String(), line)
	}
	out.Reset()
	ctx, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	stop, reads = cancel2, 0
	if err := Watch(ctx, &out, true, false, read); err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Accounts[0].Name != "main" || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("watch --json printed %q (%v)", out.String(), err)
	}
}

// TestReportRoutes: the report's routes are the routing table by account
// name, "*" for every other destination, a row without accounts for a
// destination of a class no account sends to; the text lists them and
// says so, and the JSON has them under routes.
func TestReportRoutes(t *testing.T) {
	routing := config.Routing{Route: dispatch.RouteLongestPrefix, Accounts: []config.Account{
		{Name: "jp", Classes: []admission.Class{admission.OTP}, Destinations: []string{"+81"}},
		{Name: "world", Classes: []admission.Class{admission.OTP, admission.Marketing}, Destinations: []string{"+1", "+44"}},
	}}
	r, err := Read(context.Background(), Redis{}, nil, routing, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{
		{"otp", "+1", []string{"world"}},
		{"otp", "+44", []string{"world"}},
		{"otp", "+81", []string{"jp"}},
		{"otp", "*", []string{}},
		{"marketing", "+1", []string{"world"}},
		{"marketing", "+44", []string{"world"}},
		{"marketing", "+81", []string{}},
		{"marketing", "*", []string{}},
	}
	if r.Route != "longest_prefix" || !reflect.DeepEqual(r.Routes, want) {
		t.Errorf("route %q, routes %v; want longest_prefix, %v", r.Route, r.Routes, want)
	}

	var text bytes.Buffer
	r.WriteText(&text)
	const wantText = `routes (longest_prefix): class, destination, accounts in order
  otp        +1   world
  otp        +44  world
  otp        +81  jp
  otp        *    none: dead-lettered (invalid: no_route)
  marketing  +1   world
  marketing  +44  world
  marketing  +81  none: dead-lettered (invalid: no_route)
  marketing  *    none: dead-lettered (invalid: no_route)
`
	if text.String() != wantText {
		t.Errorf("text\n%s\nwant\n%s", text.String(), wantText)
	}

	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Route  string `json:"route"`
		Routes []struct {
			Class, Prefix string
			Accounts      []string
		} `json:"routes"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Route != "longest_prefix" || len(got.Routes) != 8 ||
		got.Routes[2].Class != "otp" || got.Routes[2].Prefix != "+81" || !reflect.DeepEqual(got.Routes[2].Accounts, []string{"jp"}) ||
		got.Routes[3].Accounts == nil || !strings.Contains(string(b), `"routes":[{"class":"otp","prefix":"+1","accounts":["world"]}`) {
		t.Errorf("json %s (%v)", b, err)
	}
}

// TestTheDefaultClassesAreAlwaysReported: an account serving OTP alone
// still reports sent.marketing (zeros) and its watch line marketing=0, as
// before classes could be configured.
func TestTheDefaultClassesAreAlwaysReported(t *testing.T) {
	st := accountState{
		Now:     time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Sent:    map[admission.Class][]int{admission.OTP: make([]int, seconds)},
		Classes: []admission.Class{admission.OTP},
	}
	s := Setup{Account: config.Account{Name: "otp-only", Provider: "generic", RateUnit: "message", Classes: []admission.Class{admission.OTP},
		ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70}}
	a := accountOf(s, st)
	if m := a.Sent["marketing"]; m == nil || len(m.PerSecond) != seconds || m.Last60s != 0 {
		t.Errorf("sent.marketing %+v, want %d seconds of zeros", m, seconds)
	}
	if line := a.line(st.Now); !strings.Contains(line, " otp=0 marketing=0 ") {
		t.Errorf("watch line %q, want otp=0 marketing=0", line)
	}
}
