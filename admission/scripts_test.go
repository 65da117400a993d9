package admission

import (
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"smsdispatcher/internal/redistest"
	"smsdispatcher/internal/scriptop"
	"smsdispatcher/ledger"
)

// TestScriptOpNamesEveryCallByItsScript: the Redis calls of a sent
// message, as a client sends them, are named by what they do, so that the
// Redis-calls-per-message figure says which operation costs what.
func TestScriptOpNamesEveryCallByItsScript(t *testing.T) {
	rdb := redistest.Client(t)
	rec := &redistest.Recorder{}
	rdb.AddHook(rec)
	cfg := testConfig(t)
	cfg.MaxInFlight = 10
	lim := newLimiter(t, rdb, cfg)
	claims := NewClaims(rdb, cfg.Account, 0, 0, 0, nil)
	ctx := context.Background()

	var d Decision
	steps := []struct {
		op  string
		run func() error
	}{
		{OpAdmit, func() (err error) {
			d, err = lim.Admit(ctx, OTP, 1, time.Second, Claim{ID: "login-1", Token: "a", Count: true})
			return err
		}},
		{OpFinish, func() error { return lim.Settle(ctx, d, ledger.RecordSent, ResultNone, ledger.Story{}) }},
		{OpClaim, func() error { _, err := claims.Claim(ctx, "login-2", "b", 0); return err }},
		{OpRelease, func() error { return claims.Release(ctx, "login-2", "b") }},
		{OpPenalty, func() error { return lim.ReportThrottled(ctx, time.Millisecond) }},
		{OpOverride, func() error { return lim.Override(ctx, 0, 0, 0) }},
		{OpHealth, func() error { _, err := lim.RefreshHealth(ctx, 0); return err }},
		{OpForget, func() error { _, _, err := claims.Forget(ctx, "login-1"); return err }},
		{ledger.OpReceipt, func() error { _, err := lim.ledger.Receipt(ctx, report("SM1", "delivered", "")); return err }},
		{ledger.OpStory, func() error { _, _, err := lim.ledger.Story(ctx, "login-1"); return err }},
		{ledger.OpDelivery, func() error { _, err := lim.ledger.DeliveryStats(ctx, time.Minute); return err }},
	}
	var want []string
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.op, err)
		}
		want = append(want, s.op)
	}
	var got []string
	for _, args := range rec.Commands() {
		// An EVALSHA answered NOSCRIPT is followed by its EVAL: one step.
		if op := scriptop.Of(args); op != scriptop.Other && (len(got) == 0 || got[len(got)-1] != op) {
			got = append(got, op)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ops %v, want %v", got, want)
		}
	}
	if op := scriptop.Of([]any{"eval", fullAdmitLua(t), "6"}); op != OpAdmit {
		t.Fatalf("EVAL of the admission script: %q, want %q", op, OpAdmit)
	}
	if op := scriptop.Of([]any{"get", "{sms:a}:penalty"}); op != scriptop.Other {
		t.Fatalf("GET: %q, want other", op)
	}
}

// TestScriptCallsFollowTheirHeaders: each call struct lists its script's
// KEYS and ARGV, in the order and with the meaning of the script's header,
// and keys() and argv() send them in that order.
func TestScriptCallsFollowTheirHeaders(t *testing.T) {
	header := regexp.MustCompile(`(?m)^-- ((?:KEYS|ARGV)\[(\d+)\]) -> (.*)$`)
	for _, tt := range []struct {
		script string
		call   interface {
			keys() []string
			argv() []any
		}
	}{
		{"admit", admitCall{}}, {"penalty.lua", penaltyCall{}}, {"resume.lua", resumeCall{}}, {"pause.lua", pauseCall{}}, {"override.lua", overrideCall{}},
		{"claim.lua", claimCall{}}, {"finish.lua", finishCall{}}, {"learned.lua", learnedCall{}}, {"forget.lua", forgetCall{}},
		{"health.lua", healthCall{}},
		{"pool.lua", poolCall{}},
	} {
		t.Run(tt.script, func(t *testing.T) {
			src, err := scriptFS.ReadFile(tt.script)
			switch tt.script {
			case "admit":
				src, err = admitContracts()
			case "finish.lua":
				src, err = []byte(finishParts.Contracts(scriptParts)), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := map[string]string{} // "KEYS[1]" -> its description
			for _, m := range header.FindAllStringSubmatch(string(src), -1) {
				lines[m[1]] = m[3]
			}
			// Give every field a value naming its slot, then read the
			// slots back from keys() and argv().
			v := reflect.New(reflect.TypeOf(tt.call)).Elem()
			var wantKeys, wantArgv []string
			for i := range v.NumField() {
				f := v.Type().Field(i)
				ref, desc, _ := strings.Cut(f.Tag.Get("lua"), " ")
				if strings.HasSuffix(ref, "..]") {
					// A list: the rest of ARGV, checked by its own test.
					if !strings.Contains(string(src), "-- "+ref+" -> "+desc) {
						t.Errorf("field %s says %s is %q; the header does not", f.Name, ref, desc)
					}
					continue
				}
				if got, ok := lines[ref]; !ok || !strings.HasPrefix(got, desc) {
					t.Errorf("field %s says %s is %q; the header says %q", f.Name, ref, desc, got)
				}
				delete(lines, ref)
				n, _ := strconv.Atoi(ref[5 : len(ref)-1])
				want := fmt.Sprint(n)
				switch f.Type.Kind() {
				case reflect.String:
					v.Field(i).SetString(want)
				case reflect.Int, reflect.Int64:
					v.Field(i).SetInt(int64(n))
				case reflect.Bool:
					v.Field(i).SetBool(true)
					want = "1"
				}
				if strings.HasPrefix(ref, "KEYS") {
					wantKeys = append(wantKeys, want)
				} else {
					wantArgv = append(wantArgv, want)
				}
			}
			for ref := range lines {
				t.Errorf("the header's %s has no field", ref)
			}
			call := v.Interface().(interface {
				keys() []string
				argv() []any
			})
			if got := call.keys(); fmt.Sprint(got) != fmt.Sprint(wantKeys) {
				t.Errorf("keys() = %v, want %v", got, wantKeys)
			}
			var gotArgv []string
			for _, a := range call.argv() {
				gotArgv = append(gotArgv, fmt.Sprint(a))
			}
			if fmt.Sprint(gotArgv) != fmt.Sprint(wantArgv) {
				t.Errorf("argv() = %v, want %v", gotArgv, wantArgv)
			}
		})
	}
}

// admitContracts returns the admission script's parts' files one after
// the other: each part's header gives the KEYS and ARGV it reads.
func admitContracts() ([]byte, error) {
	var all []byte
	for _, name := range append([]string{"prelude"}, partNames()...) {
		b, err := fs.ReadFile(partFiles, name+".lua")
		if err != nil {
			return nil, err
		}
		all = append(all, b...)
	}
	return all, nil
}

func partNames() []string {
	var names []string
	for _, p := range admitParts {
		names = append(names, p.name)
	}
	return names
}
