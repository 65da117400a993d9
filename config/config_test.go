package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDefaultsFollowTheProviderAndTheRates: RATE_UNIT's default is segment
// for the providers that count parts (Twilio, Vonage) and message for the
// generic API; MAX_SEGMENTS's, with rates in segments, is 6 or the most
// the rates leave room for under CONTRACT_RPS, so that the defaults
// compose. A value given wins, and is checked as given.
func TestDefaultsFollowTheProviderAndTheRates(t *testing.T) {
	tests := []struct {
		env         map[string]string
		args        []string
		unit        string
		maxSegments int
		err         string // the variable the error names
	}{
		{nil, nil, "message", 6, ""},
		{map[string]string{"RATE_UNIT": "segment"}, nil, "segment", 4, ""}, // 90 × 1.02 + 5 + 4 - 1 = 99.8
		{map[string]string{"SMS_PROVIDER": "twilio"}, nil, "segment", 4, ""},
		{map[string]string{"SMS_PROVIDER": "vonage"}, nil, "segment", 4, ""},
		{map[string]string{"SMS_PROVIDER": "twilio", "RATE_UNIT": "message"}, nil, "message", 6, ""},
		{map[string]string{"SMS_PROVIDER": "vonage"}, []string{"--rate-unit", "message"}, "message", 6, ""},
		{nil, []string{"--provider", "twilio"}, "segment", 4, ""},
		{map[string]string{"SMS_PROVIDER": "twilio", "TARGET_RPS": "50", "MARKETING_RPS": "40"}, nil, "segment", 6, ""}, // room for more: 6
		{map[string]string{"SMS_PROVIDER": "twilio", "TARGET_RPS": "93", "MARKETING_RPS": "40"}, nil, "segment", 1, ""}, // 94.86 + 5: room for 1
		{map[string]string{"SMS_PROVIDER": "twilio", "MAX_SEGMENTS": "3"}, nil, "segment", 3, ""},
		{map[string]string{"SMS_PROVIDER": "twilio", "MAX_SEGMENTS": "6"}, nil, "", 0, "MAX_SEGMENTS"}, // given: checked as given
		{map[string]string{"RATE_UNIT": "segment", "MAX_SEGMENTS": "0"}, nil, "", 0, "MAX_SEGMENTS"},
		{map[string]string{"SMS_PROVIDER": "twilio", "TARGET_RPS": "96"}, nil, "", 0, "TARGET_RPS"}, // no room even for messages
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.env, tt.args), func(t *testing.T) {
			c, err := loadConfig(tt.env, tt.args...)
			if tt.err != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Env != tt.err {
					t.Fatalf("err %v, want a configuration error naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.RateUnit != tt.unit || c.MaxSegments != tt.maxSegments {
				t.Fatalf("RATE_UNIT %s, MAX_SEGMENTS %d; want %s, %d", c.RateUnit, c.MaxSegments, tt.unit, tt.maxSegments)
			}
		})
	}

	// An account of the file takes the same defaults from its own
	// provider and rates.
	base, err := loadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	twilio := func(name, extra string) string {
		return "  - name: " + name + "\n    provider: twilio\n    twilio: {account_sid: AC1, auth_token: x, from: \"+15550000001\"}\n    classes: [marketing]\n" + extra
	}
	path := writeFile(t, "accounts.yaml", "accounts:\n"+okOTP+twilio("tw", "")+strings.Replace(twilio("tw2", "    rate_unit: message\n"), "AC1", "AC2", 1))
	setups, err := accountsOf(base.Process, path)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		unit        string
		maxSegments int
	}{{"message", 6}, {"segment", 4}, {"message", 6}} {
		if c := setups[i]; c.RateUnit != want.unit || c.MaxSegments != want.maxSegments {
			t.Errorf("account %s: rate_unit %s, max_segments %d; want %s, %d", c.Name, c.RateUnit, c.MaxSegments, want.unit, want.maxSegments)
		}
	}
}
