package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/dispatch"
)

// TestLogRoutes logs a line per class and prefix, "*" for every other
// destination, with the accounts' names in order.
func TestLogRoutes(t *testing.T) {
	setups := []config.Account{
		{Name: "jp", Classes: []admission.Class{admission.OTP}, Destinations: []string{"+81"}},
		{Name: "world", Classes: []admission.Class{admission.OTP, admission.Marketing}},
	}
	var out bytes.Buffer
	s := &Server{logger: slog.New(slog.NewTextHandler(&out, nil)),
		accounts: []Account{{Setup: setups[0]}, {Setup: setups[1]}},
		table:    dispatch.NewTable(config.Served(setups), config.Destinations(setups), dispatch.RouteLongestPrefix)}
	s.logRoutes()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		_, attrs, _ := strings.Cut(line, "msg=route ")
		got = append(got, attrs)
	}
	want := []string{
		"class=otp prefix=+81 accounts=\"[jp world]\" mode=longest_prefix",
		"class=otp prefix=* accounts=[world] mode=longest_prefix",
		"class=marketing prefix=+81 accounts=[world] mode=longest_prefix",
		"class=marketing prefix=* accounts=[world] mode=longest_prefix",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
