package guard

import (
	"testing"
	"time"

	"smsdispatcher/config/policy"
)

// Each rule's decision for a number at fixed instants.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	live := func(r, reason string) map[string]Block {
		return map[string]Block{r: {Range: r, Reason: reason, Until: now.Add(time.Minute)}}
	}
	ended := map[string]Block{"447700": {Range: "447700", Reason: ReasonPrefixRate, Until: now}}
	allow := &policy.Guard{Countries: []string{"+44", "+1"}, AllowPrefixes: []string{"+4477009"}}
	deny := &policy.Guard{DenyCountries: []string{"+7", "+882"}}
	for _, tt := range []struct {
		name   string
		g      *policy.Guard
		blocks map[string]Block
		to     string
		want   string
	}{
		{"no guard, no blocks", nil, nil, "+79161234567", ""},
		{"an allowed country", allow, nil, "+447700123456", ""},
		{"a country not allowed", allow, nil, "+819012345678", ReasonGeo},
		{"a one-digit code", allow, nil, "+15551234567", ""},
		{"a denied country", deny, nil, "+79161234567", ReasonGeo},
		{"a denied three-digit code", deny, nil, "+88216123456", ReasonGeo},
		{"a country not denied", deny, nil, "+819012345678", ""},
		{"a blocked range", deny, live("447700", ReasonPrefixRate), "+447700123456", ReasonPrefixRate},
		{"a number outside the blocked range", deny, live("447700", ReasonPrefixRate), "+447701123456", ""},
		{"a shorter range blocks its longer numbers", deny, live("44770", ReasonConversion), "+447709123456", ReasonConversion},
		{"a block that has ended", deny, ended, "+447700123456", ""},
		{"an allowed prefix passes an automatic block", allow, live("447700", ReasonPrefixRate), "+447700912345", ""},
		{"an allowed prefix's neighbour is blocked", allow, live("447700", ReasonPrefixRate), "+447700812345", ReasonPrefixRate},
		{"an operator's block holds an allowed prefix too", allow, live("447700", ReasonOperator), "+447700912345", ReasonOperator},
		{"geo before a block", allow, live("81", ReasonOperator), "+819012345678", ReasonGeo},
		{"an operator's block of an unguarded class", nil, live("81", ReasonOperator), "+819012345678", ReasonOperator},
	} {
		if got := decide(tt.g, tt.blocks, tt.to, now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestRange(t *testing.T) {
	for _, tt := range []struct {
		to     string
		digits int
		want   string
	}{
		{"+447700900123", 6, "447700"},
		{"+447700900123", 12, "447700900123"},
		{"+447700900123", 13, ""},
		{"447700900123", 6, ""},
		{"+44", 0, ""},
	} {
		if got := Range(tt.to, tt.digits); got != tt.want {
			t.Errorf("Range(%q, %d) = %q, want %q", tt.to, tt.digits, got, tt.want)
		}
	}
}

// What a send counts in: each rule's range, none for an allowed prefix.
func TestCounted(t *testing.T) {
	g := &policy.Guard{AllowPrefixes: []string{"+4477009"},
		MaxPerPrefix:  policy.PrefixRate{Digits: 6, Count: 10, Per: time.Minute, BlockFor: time.Hour},
		MinConversion: policy.Conversion{Digits: 5, MinSends: 5, Ratio: 0.2, Per: time.Hour, Grace: time.Minute, BlockFor: time.Hour}}
	if rate, conv := counted(g, "+447700812345"); rate != "447700" || conv != "44770" {
		t.Errorf("counted: %q %q, want 447700 44770", rate, conv)
	}
	if rate, conv := counted(g, "+447700912345"); rate != "" || conv != "" {
		t.Errorf("an allowed prefix counted in %q %q, want none", rate, conv)
	}
	if rate, conv := counted(&policy.Guard{DenyCountries: []string{"+7"}}, "+447700812345"); rate != "" || conv != "" {
		t.Errorf("geo alone counted in %q %q, want none", rate, conv)
	}
}
