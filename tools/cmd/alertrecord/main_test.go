package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"smsdispatcher/tools/internal/alertrecord"
)

func TestRecordFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--record-runs", "healthy"}, "--record-runs needs --record-alerts"},
		{[]string{"--record-alerts", t.TempDir(), "--quick"}, "flag provided but not defined: -quick"},
	} {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: got %v, want %q", tc.args, err, tc.err)
		}
	}
	c, err := parseFlags([]string{"--record-alerts", "dir", "--record-runs", "healthy,redis-down"}, &bytes.Buffer{})
	if err != nil || c.dir != "dir" || strings.Join(c.runs, ",") != "healthy,redis-down" {
		t.Fatalf("got %+v, %v", c, err)
	}
	for _, name := range c.runs {
		if !slices.Contains(alertrecord.Names(), name) {
			t.Errorf("no run %q", name)
		}
	}
}
