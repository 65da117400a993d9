package loadharness

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// accountsDefault is --accounts unless given.
const accountsDefault = "1,10,50"

// checkAccounts checks the accounts scenario's settings of c (set: the
// flags given): --accounts applies to it alone, and its rows last
// accountsDuration unless --duration says.
func checkAccounts(c *Config, set map[string]bool) error {
	if !c.accountsRun {
		if set["accounts"] {
			return fmt.Errorf("--accounts applies to --scenario %s", scenAccounts)
		}
		return nil
	}
	sizes, err := parseInts(c.accountsList)
	if err != nil {
		return fmt.Errorf("--accounts: %w", err)
	}
	for _, n := range sizes {
		if n < 1 || n > 500 {
			return fmt.Errorf("--accounts: each size must be 1 to 500, got %d", n)
		}
	}
	c.accounts = sizes
	if !set["duration"] {
		c.duration = accountsDuration
	}
	if c.duration < 2*time.Second {
		return errors.New("--duration must be at least 2s with --scenario " + scenAccounts)
	}
	return nil
}

// writeAccountsTable writes the accounts rows, and what each column is.
func writeAccountsTable(w io.Writer, cfg *Config, rows []*accountsRow) error {
	fmt.Fprintf(w, "scenario accounts: %v per row, one dispatcher process, OTP %g/s spread over the accounts' prefixes\n", cfg.duration, accountsOTPRate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "accounts\tsent\tRSS MiB\tgoroutines\tRedis conns\theartbeats/s\tcalls/s not for a message\tstatus ms\tverdict\t")
	verdict := accountsJudge(rows)
	for i, r := range rows {
		v := "ok"
		if f := verdict[i]; len(f) > 0 {
			v = "FAIL: " + strings.Join(f, "; ")
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%d\t%d\t%.2f\t%.2f\t%.1f\t%s\t\n", r.Accounts, r.Sent, float64(r.RSS)/(1<<20), r.Goroutines, r.RedisConns, r.Beats, r.Own, r.StatusMs, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %d accounts, calls not for a message by script: %s\n", r.Accounts, orNothing(r.OwnOps))
	}
	fmt.Fprintf(w, "RSS: the process's resident memory (VmRSS) at the run's end; goroutines and Redis conns (the client's pool) then too.\n"+
		"heartbeats/s, calls/s not for a message: the process's heartbeat calls, and all its script calls other than a message's (the heartbeats,\n"+
		"an idle account's health), a second over the run's second half. status ms: `dispatcher status`'s read of every account (status.Read),\n"+
		"median of %d. Criteria: heartbeats/s ≤ %g, calls/s not for a message ≤ %g (and one more of each the window may catch), RSS and Redis conns\n"+
		"of the largest size ≤ %gx and %gx the smallest's.\n",
		accountsStatusReads, accountsMaxBeats, accountsMaxOwn, accountsMaxRSS, accountsMaxConns)
	return nil
}

func orNothing(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// accountsJudge returns each row's failures against the criteria.
func accountsJudge(rows []*accountsRow) [][]string {
	out := make([][]string, len(rows))
	if len(rows) == 0 {
		return out
	}
	small := rows[0]
	for _, r := range rows {
		if r.Accounts < small.Accounts {
			small = r
		}
	}
	for i, r := range rows {
		if most := accountsLimit(accountsMaxBeats, r.Window); r.Beats > most {
			out[i] = append(out[i], fmt.Sprintf("%.2f heartbeat calls/s, above %.2f", r.Beats, most))
		}
		if most := accountsLimit(accountsMaxOwn, r.Window); r.Own > most {
			out[i] = append(out[i], fmt.Sprintf("%.2f calls/s not for a message, above %.2f", r.Own, most))
		}
		if r.RSS > int64(accountsMaxRSS*float64(small.RSS)) {
			out[i] = append(out[i], fmt.Sprintf("RSS %.1f MiB, above %gx the %.1f MiB of %d accounts", float64(r.RSS)/(1<<20), accountsMaxRSS, float64(small.RSS)/(1<<20), small.Accounts))
		}
		if float64(r.RedisConns) > accountsMaxConns*float64(max(small.RedisConns, 1)) {
			out[i] = append(out[i], fmt.Sprintf("%d Redis connections, above %gx the %d of %d accounts", r.RedisConns, accountsMaxConns, small.RedisConns, small.Accounts))
		}
	}
	return out
}

// accountsLimit is the most calls a second of a kind made perSecond times
// a second that a window of the given seconds may count: one more of it
// may fall inside, and half of one for a ticker's jitter.
func accountsLimit(perSecond, window float64) float64 {
	return perSecond * (1 + 1.5/max(window, 0.5))
}

// accountsVerdict fails the run when a row missed a criterion.
func accountsVerdict(rows []*accountsRow) error {
	var failed []string
	for i, f := range accountsJudge(rows) {
		if len(f) > 0 {
			failed = append(failed, fmt.Sprintf("accounts %d: %s", rows[i].Accounts, strings.Join(f, "; ")))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", errScenarioFailed, strings.Join(failed, "; "))
	}
	return nil
}
