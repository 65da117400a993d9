package loadharness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"smsdispatcher/internal/redistest"
)

// TestScenarioAccountsMeasuresEachProcess: the accounts scenario at 1 and 3
// accounts for 4 s each (the calls counted over the last 2, which hold a
// beat at least: a window of 1 s may fall between two), a process each
// (this test binary, started again by TestMain): every figure is read,
// and the process's heartbeats are counted among its calls not for a
// message.
func TestScenarioAccountsMeasuresEachProcess(t *testing.T) {
	cfg, err := ParseMatrix([]string{"--scenario", "accounts", "--accounts", "1,3", "--duration", "4s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := runAccountsRows(context.Background(), cfg, "redis://"+redistest.Addr(t), tlog{t})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := writeAccountsTable(&table, cfg, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())
	if len(rows) != 2 || rows[0].Accounts != 1 || rows[1].Accounts != 3 {
		t.Fatalf("rows %+v, want one of 1 account and one of 3", rows)
	}
	for _, r := range rows {
		if r.Sent == 0 || r.RSS == 0 || r.Goroutines == 0 || r.RedisConns == 0 || r.StatusMs <= 0 {
			t.Errorf("%d accounts: a figure unread: %+v", r.Accounts, *r)
		}
		if r.Beats <= 0 || r.Own < r.Beats || !strings.Contains(r.OwnOps, "heartbeat") {
			t.Errorf("%d accounts: heartbeats uncounted (%.2f/s of %.2f/s: %s)", r.Accounts, r.Beats, r.Own, r.OwnOps)
		}
	}
	// One beat a second whatever the accounts (the process-wide registry).
	if most := accountsLimit(accountsMaxBeats, rows[1].Window); rows[1].Beats > most {
		t.Errorf("3 accounts: %.2f heartbeat calls a second over %.1f s, want at most %.2f", rows[1].Beats, rows[1].Window, most)
	}
}

func TestAccountsVerdict(t *testing.T) {
	ok := []*accountsRow{
		{Accounts: 1, RSS: 30 << 20, RedisConns: 2, Beats: 1, Own: 1, Window: 5},
		{Accounts: 50, RSS: 50 << 20, RedisConns: 4, Beats: 1.2, Own: 2.5, Window: 5},
	}
	if err := accountsVerdict(ok); err != nil {
		t.Errorf("within every criterion: %v", err)
	}
	for name, bad := range map[string]*accountsRow{
		"beats":  {Accounts: 50, RSS: 30 << 20, RedisConns: 2, Beats: 50, Own: 50, Window: 5},
		"own":    {Accounts: 50, RSS: 30 << 20, RedisConns: 2, Beats: 1, Own: 3, Window: 5},
		"memory": {Accounts: 50, RSS: 61 << 20, RedisConns: 2, Beats: 1, Own: 1, Window: 5},
		"conns":  {Accounts: 50, RSS: 30 << 20, RedisConns: 50, Beats: 1, Own: 1, Window: 5},
	} {
		err := accountsVerdict([]*accountsRow{ok[0], bad})
		if !errors.Is(err, errScenarioFailed) {
			t.Errorf("%s: %v, want errScenarioFailed", name, err)
		}
	}
}

func TestParseFlagsAccounts(t *testing.T) {
	for _, args := range [][]string{
		{"--accounts", "1,2"},
		{"--scenario", "senders", "--accounts", "1,2"},
		{"--scenario", "accounts", "--accounts", "0"},
		{"--scenario", "accounts", "--duration", "1s"},
	} {
		if _, err := ParseMatrix(args, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	cfg, err := ParseMatrix([]string{"--scenario", "accounts"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.accounts) != 3 || cfg.accounts[2] != 50 || cfg.duration != accountsDuration {
		t.Errorf("defaults: accounts %v, duration %v", cfg.accounts, cfg.duration)
	}
}
