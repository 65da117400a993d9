package demo

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/redistest"
)

// onPrivateRedis is the demo's configuration on a real Redis of the test's
// own (a unix socket), under an account name of its own.
func onPrivateRedis(t *testing.T) config.Settings {
	t.Helper()
	env := map[string]string{"REDIS_URL": "unix://" + redistest.Private(t), "SMS_ACCOUNT": redistest.UniqueAccount(t), "REDIS_TIMEOUT": "2s"}
	load := config.Flags(flag.NewFlagSet("demo", flag.ContinueOnError), config.All, func(k string) string { return env[k] })
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTheSTOPsAreHonouredOnBothAccounts runs the demo with four
// recipients who reply STOP mid-run, two through each account (each the
// home of two of them), on a real Redis: nothing is sent to them that was
// admitted more than the list's second after their STOP was answered,
// through either account, and the list stops their later messages on
// both accounts.
func TestTheSTOPsAreHonouredOnBothAccounts(t *testing.T) {
	cfg := onPrivateRedis(t)
	r, err := Run(context.Background(), cfg, Options{Instances: 2, Campaign: 600, OTPRate: 20, Timeout: 2 * time.Minute, OptOuts: 4})
	if err != nil {
		t.Fatal(err)
	}
	o := r.OptOut
	if o == nil || o.Err != "" || o.Recipients != 4 {
		t.Fatalf("the opt-outs: %+v; want 4 recipients, every STOP answered 200", o)
	}
	if o.SentAfter != 0 {
		t.Errorf("%d messages to them admitted over %v after their STOP were sent", o.SentAfter, optOutBound)
	}
	if o.SentBefore == 0 {
		t.Errorf("nothing was sent to them before their STOP: the run proves nothing")
	}
	for _, a := range []string{cfg.Account.Name, secondAccount(cfg.Account).Name} {
		if o.Through[a] != 2 || o.Stopped[a] == 0 {
			t.Errorf("account %s: %d STOPs through it, %d messages stopped on it; want 2 and some (through: %v, stopped: %v)", a, o.Through[a], o.Stopped[a], o.Through, o.Stopped)
		}
	}
}

// TestReportSaysWhatTheOptOutsWereSent: the report's opt-out lines name
// the replies and the stops by account, the sends after the STOP apart
// from those within the list's second; a run without opt-outs has none.
func TestReportSaysWhatTheOptOutsWereSent(t *testing.T) {
	r := Report{Instances: 2, Provider: "generic", RateUnit: "message", Sent: map[admission.Class]int{admission.OTP: 40}}
	var out bytes.Buffer
	r.Print(&out, config.Settings{})
	if strings.Contains(out.String(), "opt-outs") || strings.Contains(out.String(), "STOP") {
		t.Errorf("a run without opt-outs:\n%s", out.String())
	}
	r.OptOut = &OptOut{Recipients: 4, Through: map[string]int{"demo": 2, "demo-b": 2}, At: 21340 * time.Millisecond,
		SentBefore: 21, SentWithin: 1, Stopped: map[string]int{"demo-b": 12, "demo": 10}}
	out.Reset()
	r.Print(&out, config.Settings{})
	for _, want := range []string{
		"  opt-outs (STOP mid-run)          4 recipients, answered by 21.3s, through demo 2, demo-b 2\n",
		"  to them after their STOP         sent 0 (1 within the list's 1s), stopped by the list 22 (home demo 10, demo-b 12); sent before it 21\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
