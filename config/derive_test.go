package config

import (
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/dispatch"
)

func TestHomeIsTheFirstAccountServingTheClass(t *testing.T) {
	accounts := []Account{{Classes: []admission.Class{admission.OTP}}, {Classes: []admission.Class{admission.Marketing, admission.OTP}}}
	if h := Home(accounts, admission.OTP); h != 0 {
		t.Errorf("OTP's home %d, want 0", h)
	}
	if h := Home(accounts, admission.Marketing); h != 1 {
		t.Errorf("marketing's home %d, want 1", h)
	}
}

func TestUnit(t *testing.T) {
	if u := (Account{RateUnit: "segment"}).Unit(); u != dispatch.PerSegment {
		t.Errorf("segment: %v", u)
	}
	if u := (Account{RateUnit: "message"}).Unit(); u != dispatch.PerMessage {
		t.Errorf("message: %v", u)
	}
}

// TestOutstanding: a lane holds what its home sends within the class's
// max wait, in messages, marketing's shared among the senders, 10 at
// least.
func TestOutstanding(t *testing.T) {
	p := Process{OTPMaxWait: 2 * time.Second, MarketingMaxWait: 8 * time.Second, MaxSenders: 4}
	home := Account{TargetRPS: 90, MarketingRPS: 70}
	segments := Account{TargetRPS: 90, MarketingRPS: 70, RateUnit: "segment", MaxSegments: 4}
	tests := []struct {
		class admission.Class
		home  Account
		want  int
	}{
		{admission.OTP, home, 180},
		{admission.Marketing, home, 140},
		{admission.OTP, segments, 45},
		{admission.Marketing, segments, 35},
		{admission.Marketing, Account{TargetRPS: 1, MarketingRPS: 1}, 10},
	}
	for _, tt := range tests {
		if got := p.Outstanding(tt.class, tt.home); got != tt.want {
			t.Errorf("Outstanding(%v, %+v) = %d, want %d", tt.class, tt.home, got, tt.want)
		}
	}
}

// TestTopologyNamesTheStatusTopic: setup's topology holds STATUS_TOPIC
// and its inspect subscription.
func TestTopologyNamesTheStatusTopic(t *testing.T) {
	c, err := loadConfig(map[string]string{"STATUS_TOPIC": "dlr"})
	if err != nil {
		t.Fatal(err)
	}
	if top := c.Topology(); top.StatusTopic != "dlr" || top.StatusInspect != "sms-status-inspect" {
		t.Fatalf("topology's status topic %q and subscription %q, want dlr and sms-status-inspect", top.StatusTopic, top.StatusInspect)
	}
	if c, _ = loadConfig(nil); c.StatusTopic != "sms-status" {
		t.Fatalf("STATUS_TOPIC's default %q, want sms-status", c.StatusTopic)
	}
}

// TestMinDeliveredRatioReachesTheLimiter: MIN_DELIVERED_RATIO is the
// route skip's rule of the account's limiter, 0 turning it off (a
// negative ratio to admission, whose zero is its default).
func TestMinDeliveredRatioReachesTheLimiter(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  float64
	}{{"", 0.5}, {"0.8", 0.8}, {"0", -1}} {
		env := map[string]string{}
		if tt.value != "" {
			env["MIN_DELIVERED_RATIO"] = tt.value
		}
		c, err := loadConfig(env)
		if err != nil {
			t.Fatalf("MIN_DELIVERED_RATIO=%q: %v", tt.value, err)
		}
		if got := c.Limiter(c.Account).Route.MinDeliveredRatio; got != tt.want {
			t.Errorf("MIN_DELIVERED_RATIO=%q: the limiter's ratio is %v, want %v", tt.value, got, tt.want)
		}
	}
}
