package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
	"smsdispatcher/nack"
)

// TestMetricsNameTheAccount: deliveries are counted by the account that
// sent them, and each account's gauges (the learned rate among them, the
// target while nothing is learned; its health) carry its name.
func TestMetricsNameTheAccount(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(dispatch.Event{Class: admission.OTP, Outcome: nack.Sent, Action: nack.Ack, Account: "bulk", Segments: 1})
	m.SetState(func() State {
		return State{Accounts: []AccountState{
			{Name: "otp", TargetRPS: 90, ContractRPS: 100, MarketingRPS: 90, Degraded: true},
			{Name: "bulk", TargetRPS: 90, ContractRPS: 100, MarketingRPS: 70, LearnedRPS: 58.3, Paused: true},
		}}
	})
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	body := string(b)
	for _, want := range []string{
		`sms_messages_total{sms_account="bulk",sms_action="ack",sms_class="otp",sms_outcome="sent"} 1`,
		`sms_learned_rate{sms_account="bulk"} 58.3`,
		`sms_learned_rate{sms_account="otp"} 90`,
		`sms_account_paused{sms_account="bulk"} 1`,
		`sms_account_paused{sms_account="otp"} 0`,
		`sms_account_health{sms_account="otp"} 1`,
		`sms_account_health{sms_account="bulk"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}

// TestAPanicIsCounted: a delivery whose handling panicked counts in
// sms_handler_panics_total, by class, besides its outcome.
func TestAPanicIsCounted(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(dispatch.Event{Class: admission.OTP, Outcome: nack.Panicked, Action: nack.Nack, Panicked: true})
	m.Observe(dispatch.Event{Class: admission.OTP, Outcome: nack.Sent, Action: nack.Ack})
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		`sms_handler_panics_total{sms_class="otp"} 1`,
		`sms_messages_total{sms_account="",sms_action="nack",sms_class="otp",sms_outcome="panicked"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in\n%s", want, b)
		}
	}
}

// TestNoRouteIsCountedByCountry: a delivery no account serves counts once
// in sms_no_route_total, by class and the destination's country code; one
// with a route counts nothing there.
func TestNoRouteIsCountedByCountry(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []dispatch.Event{
		{Class: admission.OTP, Outcome: nack.Invalid, Action: nack.DeadLetter, NoRoute: "999"},
		{Class: admission.OTP, Outcome: nack.Invalid, Action: nack.DeadLetter, NoRoute: "999"},
		{Class: admission.Marketing, Outcome: nack.Invalid, Action: nack.DeadLetter, NoRoute: "81"},
		{Class: admission.Marketing, Outcome: nack.Invalid, Action: nack.DeadLetter},
		{Class: admission.OTP, Outcome: nack.Sent, Action: nack.Ack, Account: "jp"},
	} {
		m.Observe(ev)
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	for _, want := range []string{
		`sms_no_route_total{country="999",sms_class="otp"} 2`,
		`sms_no_route_total{country="81",sms_class="marketing"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in\n%s", want, b)
		}
	}
	if n := strings.Count(string(b), "sms_no_route_total{"); n != 2 {
		t.Errorf("%d series of sms_no_route_total, want 2:\n%s", n, b)
	}
}

// TestHedgesAreCountedByHome: a hedged delivery counts once in
// sms_hedges_total, by the home it was hedged from, whichever account's
// acceptance counted; others count nothing there.
func TestHedgesAreCountedByHome(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []dispatch.Event{
		{Class: admission.OTP, Outcome: nack.Sent, Action: nack.Ack, Account: "backup", HedgedFrom: "primary"},
		{Class: admission.OTP, Outcome: nack.Sent, Action: nack.Ack, Account: "primary", HedgedFrom: "primary"},
		{Class: admission.OTP, Outcome: nack.Sent, Action: nack.Ack, Account: "primary"},
	} {
		m.Observe(ev)
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	if want := `sms_hedges_total{sms_account="primary"} 2`; !strings.Contains(string(b), want) {
		t.Errorf("no %s in\n%s", want, b)
	}
	if n := strings.Count(string(b), "sms_hedges_total{"); n != 1 {
		t.Errorf("%d series of sms_hedges_total, want 1:\n%s", n, b)
	}
}

// TestClassesInTheMetrics: each class's ceiling and reserve are a series
// of sms_configured_rate labelled with its name, today's series of the
// default classes (marketing's ceiling as sms_limit "marketing") kept;
// the messages waiting are counted by class; a denial says which limit
// (ceiling, reserve) denied it.
func TestClassesInTheMetrics(t *testing.T) {
	m, err := NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	const transactional = admission.Class("transactional")
	m.SetState(func() State {
		return State{OTPWaiting: 2, Waiting: map[admission.Class]int{admission.OTP: 2, transactional: 5, admission.Marketing: 40},
			Accounts: []AccountState{
				{Name: "main", ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70, Classes: []admission.ClassLimit{
					{Name: admission.OTP, Reserve: 20}, {Name: transactional, RPS: 30}, {Name: admission.Marketing, RPS: 60}}},
				{Name: "old", ContractRPS: 100, TargetRPS: 90, MarketingRPS: 70},
			}}
	})
	for _, reason := range []admission.Reason{admission.ReasonCeiling, admission.ReasonReserve} {
		m.Observe(dispatch.Event{Class: transactional, Outcome: nack.Expired, Action: nack.Nack, Account: "main",
			Decision: admission.Decision{Source: admission.SourceRedis, Reason: reason}})
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(w.Body)
	body := string(b)
	for _, want := range []string{
		`sms_configured_rate{sms_account="main",sms_class="otp",sms_limit="ceiling"} 90`,
		`sms_configured_rate{sms_account="main",sms_class="otp",sms_limit="reserve"} 20`,
		`sms_configured_rate{sms_account="main",sms_class="transactional",sms_limit="ceiling"} 30`,
		`sms_configured_rate{sms_account="main",sms_class="marketing",sms_limit="ceiling"} 60`,
		`sms_configured_rate{sms_account="main",sms_limit="marketing"} 60`,
		`sms_configured_rate{sms_account="old",sms_limit="contract"} 100`,
		`sms_configured_rate{sms_account="old",sms_limit="target"} 90`,
		`sms_configured_rate{sms_account="old",sms_limit="marketing"} 70`,
		`sms_configured_rate{sms_account="old",sms_class="otp",sms_limit="ceiling"} 90`,
		`sms_configured_rate{sms_account="old",sms_class="marketing",sms_limit="ceiling"} 70`,
		`sms_otp_waiting 2`,
		`sms_waiting{sms_class="transactional"} 5`,
		`sms_waiting{sms_class="marketing"} 40`,
		`sms_admission_decisions_total{sms_account="main",sms_admission_decision="denied",sms_admission_reason="ceiling",sms_admission_source="redis",sms_class="transactional"} 1`,
		`sms_admission_decisions_total{sms_account="main",sms_admission_decision="denied",sms_admission_reason="reserve",sms_admission_source="redis",sms_class="transactional"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	for _, unwanted := range []string{`sms_class="transactional",sms_limit="reserve"`, `sms_account="old",sms_class="otp",sms_limit="reserve"`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("a reserve of 0 has a series: %s in\n%s", unwanted, body)
		}
	}
}
