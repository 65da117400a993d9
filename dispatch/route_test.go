package dispatch

import (
	"reflect"
	"testing"

	"smsdispatcher/admission"
)

// TestTableRoutes: each mode's route for overlapping prefixes (+1 and
// +1415), an account without destinations, and a destination no account
// serving the class serves.
func TestTableRoutes(t *testing.T) {
	otp, mkt := admission.OTP, admission.Marketing
	both := []admission.Class{otp, mkt}
	served := [][]admission.Class{
		both,                  // 0 world: every destination
		{otp},                 // 1 us: +1
		both,                  // 2 sf: +1415
		{otp},                 // 3 jp: +81
		{mkt},                 // 4 jpmkt: +81, +8190
		{otp, mkt},            // 5 uk: +44
		{admission.Marketing}, // 6 eu: +33, +44
	}
	destinations := [][]string{nil, {"+1"}, {"+1415"}, {"+81"}, {"+81", "+8190"}, {"+44"}, {"+33", "+44"}}
	tests := []struct {
		class       admission.Class
		to          string
		first, long []int
	}{
		{otp, "+14155550100", []int{0, 1, 2}, []int{2, 1, 0}},
		{otp, "+12125550100", []int{0, 1}, []int{1, 0}},
		{mkt, "+14155550100", []int{0, 2}, []int{2, 0}},
		{otp, "+819012345678", []int{0, 3}, []int{3, 0}},
		{mkt, "+819012345678", []int{0, 4}, []int{4, 0}},
		{mkt, "+818012345678", []int{0, 4}, []int{4, 0}},
		{mkt, "+447700900123", []int{0, 5, 6}, []int{5, 6, 0}}, // equal prefixes: file order
		{otp, "+4915112345678", []int{0}, []int{0}},
		{otp, "+1", []int{0, 1}, []int{1, 0}},
		{otp, "", []int{0}, []int{0}},
	}
	first := NewTable(served, destinations, RouteFirst)
	long := NewTable(served, destinations, RouteLongestPrefix)
	for _, tt := range tests {
		if got := first.Route(tt.class, tt.to); !reflect.DeepEqual(got, tt.first) {
			t.Errorf("first: Route(%v, %q) = %v, want %v", tt.class, tt.to, got, tt.first)
		}
		if got := long.Route(tt.class, tt.to); !reflect.DeepEqual(got, tt.long) {
			t.Errorf("longest_prefix: Route(%v, %q) = %v, want %v", tt.class, tt.to, got, tt.long)
		}
	}
}

// TestTableNoRoute: with every account limited to destinations, a number
// none of them serves has no route, nor has a class no account serves.
func TestTableNoRoute(t *testing.T) {
	tab := NewTable([][]admission.Class{{admission.OTP}, {admission.OTP, admission.Marketing}}, [][]string{{"+81"}, {"+1"}}, RouteFirst)
	for _, tt := range []struct {
		class admission.Class
		to    string
		want  []int
	}{
		{admission.OTP, "+999123456", nil},
		{admission.Marketing, "+819012345678", nil},
		{admission.OTP, "+819012345678", []int{0}},
		{admission.Marketing, "+14155550100", []int{1}},
		{admission.Class("transactional"), "+14155550100", nil},
	} {
		if got := tab.Route(tt.class, tt.to); len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("Route(%v, %q) = %v, want %v", tt.class, tt.to, got, tt.want)
		}
	}
}

// TestTableWithoutDestinations is Route of old: every account serving the
// class, in order, whatever the number.
func TestTableWithoutDestinations(t *testing.T) {
	served := [][]admission.Class{{admission.Marketing}, {admission.OTP}, {admission.Marketing, admission.OTP}}
	for _, mode := range []RouteMode{RouteFirst, RouteLongestPrefix} {
		tab := NewTable(served, nil, mode)
		for _, c := range []admission.Class{admission.OTP, admission.Marketing} {
			if got, want := tab.Route(c, "+819012345678"), Route(served, c); !reflect.DeepEqual(got, want) {
				t.Errorf("%v: Route(%v) = %v, want %v", mode, c, got, want)
			}
		}
	}
}

// TestTableRows lists class × prefix, OTP first, the prefixes sorted and
// "" last, rows without accounts included.
func TestTableRows(t *testing.T) {
	tab := NewTable([][]admission.Class{{admission.OTP}, {admission.OTP, admission.Marketing}}, [][]string{{"+81"}, nil}, RouteLongestPrefix)
	want := []TableRow{
		{admission.OTP, "+81", []int{0, 1}},
		{admission.OTP, "", []int{1}},
		{admission.Marketing, "+81", []int{1}},
		{admission.Marketing, "", []int{1}},
	}
	if got := tab.Rows(); !reflect.DeepEqual(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	tab = NewTable([][]admission.Class{{admission.OTP}, {admission.Marketing}}, [][]string{{"+81"}, {"+1"}}, RouteFirst)
	if got := tab.Rows(); len(got) != 6 || got[0].Prefix != "+1" || len(got[0].Accounts) != 0 || got[2].Prefix != "" {
		t.Errorf("rows %v: want +1, +81 and \"\" for each class, otp's +1 without accounts", got)
	}
}

func TestParseRouteMode(t *testing.T) {
	for _, m := range []RouteMode{RouteFirst, RouteLongestPrefix} {
		if got, err := ParseRouteMode(m.String()); err != nil || got != m {
			t.Errorf("ParseRouteMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseRouteMode("longest"); err == nil {
		t.Error("ParseRouteMode(longest): no error")
	}
}

func TestCountryCode(t *testing.T) {
	for to, want := range map[string]string{
		"+819012345678":  "81",
		"+14155550100":   "1",
		"+447700900123":  "44",
		"+79161234567":   "7",
		"+4915112345678": "49",
		"+353861234567":  "353", // 35x: three digits
		"+8613812345678": "86",
		"+85212345678":   "852",
		"+971501234567":  "971",
		"+999123456":     "999",
		"+2348012345678": "234",
		"+201001234567":  "20",
		"+44":            "44",
		"+3":             "",
		"":               "",
		"+":              "",
		"819012345678":   "",
		"+81 90 1234":    "",
		"+81a":           "",
	} {
		if got := CountryCode(to); got != want {
			t.Errorf("CountryCode(%q) = %q, want %q", to, got, want)
		}
	}
}
