package config

import (
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
)

// TestClassPolicies: each class's rules as Process.Policy computes them,
// once, from its place in the priority order (the first class's) and its
// name (otp's own), whatever the number of classes.
func TestClassPolicies(t *testing.T) {
	first := policy.Class{FailsOver: true, Hedged: true, HoldsGate: true, TargetOnly: true, RetriedSoon: true, MaxWait: time.Second, Suppressed: true}
	otpOwn := policy.Class{SendsWithoutRecord: true, SkipsFailingRoute: true, Resent: true, OverrideSparesAlone: true, Suppressed: true}
	otpFirst := first
	otpFirst.SendsWithoutRecord, otpFirst.SkipsFailingRoute, otpFirst.Resent, otpFirst.OverrideSparesAlone = true, true, true, true
	later := policy.Class{MaxWait: 8 * time.Second, Suppressed: true}
	otpLater := otpOwn
	otpLater.MaxWait = 8 * time.Second
	lanes := func(names ...admission.Class) []Class {
		var out []Class
		for _, n := range names {
			out = append(out, Class{Name: n, Topic: "sms-" + n.String(), Subscription: "sms-" + n.String() + "-dispatcher"})
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		lanes []Class
		want  map[admission.Class]policy.Class
	}{
		{"the defaults: otp then marketing", nil, map[admission.Class]policy.Class{
			"otp": otpFirst, "marketing": later, "transactional": later, // a class not configured: a later one's
		}},
		{"a custom first class", lanes("transactional", "marketing"), map[admission.Class]policy.Class{
			"transactional": first, "marketing": later, "otp": otpLater,
		}},
		{"three classes", lanes("otp", "transactional", "marketing"), map[admission.Class]policy.Class{
			"otp": otpFirst, "transactional": later, "marketing": later,
		}},
		{"otp after another", lanes("alerts", "otp"), map[admission.Class]policy.Class{
			"alerts": first, "otp": otpLater,
		}},
		{"a class the list does not stop", append(lanes("otp"), Class{Name: "login", Topic: "sms-login", Subscription: "sms-login-dispatcher", Unsuppressed: true}),
			map[admission.Class]policy.Class{"otp": otpFirst, "login": later.Unsuppressed()}},
	} {
		p := Process{Lanes: tt.lanes}
		for class, want := range tt.want {
			if got := p.Policy(class); got != want {
				t.Errorf("%s: %s's policy %+v, want %+v", tt.name, class, got, want)
			}
		}
	}
	// What the limiter and the dispatcher are handed is that policy.
	p := Process{Lanes: lanes("transactional", "marketing")}
	a := Account{Name: "a", TargetRPS: 90, Classes: []admission.Class{"transactional", "marketing"}}
	for _, k := range p.Limiter(a).Classes {
		if k.Policy != p.Policy(k.Name) {
			t.Errorf("the limiter's %s: policy %+v, want %+v", k.Name, k.Policy, p.Policy(k.Name))
		}
	}
}
