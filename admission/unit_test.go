package admission

import (
	"smsdispatcher/ledger"

	"errors"
	"testing"
	"time"
)

// reply is an admission script reply as go-redis returns it.
func reply(allowed, wait, reason, next, attempts int64, detail string) []any {
	return []any{allowed, wait, reason, next, attempts, detail, "", int64(0), int64(0), int64(0), int64(0)}
}

// replyWith is v with its element i set to x.
func replyWith(v []any, i int, x any) []any {
	v[i] = x
	return v
}

func TestParseReply(t *testing.T) {
	tests := []struct {
		name  string
		reply []any
		want  Decision
		err   bool
	}{
		{"allowed", reply(1, 0, 0, 0, 0, ""), Decision{Allowed: true, Source: SourceRedis}, false},
		{"allowed, a slot booked ahead", reply(1, 2500, 0, 9000, 2, ""), Decision{Allowed: true, RetryAfter: 2500 * time.Microsecond, Next: 9 * time.Millisecond, Attempts: 2, Source: SourceRedis}, false},
		{"penalty", reply(0, 5000, 1, 0, 0, ""), Decision{RetryAfter: 5 * time.Millisecond, Source: SourcePenalty, Reason: ReasonPenalty}, false},
		{"global", reply(0, 11112, 2, 0, 0, ""), Decision{RetryAfter: 11112 * time.Microsecond, Source: SourceRedis, Reason: ReasonGlobal}, false},
		{"marketing", reply(0, 7, 3, 0, 0, ""), Decision{RetryAfter: 7 * time.Microsecond, Source: SourceRedis, Reason: ReasonCeiling}, false},
		{"account", reply(0, 7, 5, 0, 0, "account:401"), Decision{RetryAfter: 7 * time.Microsecond, Source: SourcePenalty, Reason: ReasonAccount, Why: "account:401"}, false},
		{"held", reply(0, 0, 6, 0, 1, "held"), Decision{Source: SourceRedis, Reason: ReasonRecord, Record: ledger.Record{State: ledger.Held}, Attempts: 1}, false},
		{"sent", reply(0, 0, 6, 0, 0, "sent:SM1"), Decision{Source: SourceRedis, Reason: ReasonRecord, Record: ledger.Record{State: ledger.Finished, ProviderID: "SM1"}}, false},
		{"refused", reply(0, 0, 6, 0, 0, "refused:bad number"), Decision{Source: SourceRedis, Reason: ReasonRecord, Record: ledger.Record{State: ledger.Refused, RejectReason: "bad number"}}, false},
		{"unknown record", reply(0, 0, 6, 0, 0, "claimed?"), Decision{}, true},
		{"account without why", reply(0, 7, 5, 0, 0, ""), Decision{}, true},
		{"detail with a rate denial", reply(0, 7, 2, 0, 0, "x"), Decision{}, true},
		{"short", []any{int64(1)}, Decision{}, true},
		{"three elements", []any{int64(1), int64(0), int64(0)}, Decision{}, true},
		{"one element short", reply(1, 0, 0, 0, 0, "")[:replyLen-1], Decision{}, true},
		{"string element", replyWith(reply(1, 0, 0, 0, 0, ""), replyAllowed, "1"), Decision{}, true},
		{"nil element", replyWith(reply(1, 0, 0, 0, 0, ""), replyWait, nil), Decision{}, true},
		{"sender by number", replyWith(reply(1, 0, 0, 0, 0, ""), replySender, int64(2)), Decision{}, true},
		{"unknown reason", reply(0, 10, 12, 0, 0, ""), Decision{}, true},
		{"route skipped", reply(0, 900, 9, 0, 0, ""), Decision{RetryAfter: 900 * time.Microsecond, Source: SourceRedis, Reason: ReasonRouteSkipped}, false},
		{"sender", reply(0, 10, 7, 0, 0, ""), Decision{RetryAfter: 10 * time.Microsecond, Source: SourceRedis, Reason: ReasonSender}, false},
		{"degraded", reply(0, 900, 8, 0, 0, ""), Decision{RetryAfter: 900 * time.Microsecond, Source: SourceRedis, Reason: ReasonDegraded}, false},
		{"a probe", append(reply(1, 0, 0, 0, 0, "")[:9], int64(2), int64(0)), Decision{Allowed: true, Source: SourceRedis, Health: Degraded}, false},
		{"unknown health", append(reply(1, 0, 0, 0, 0, "")[:9], int64(3)), Decision{}, true},
		{"a sender with a denial", append(reply(0, 10, 2, 0, 0, "")[:6], "+15550000001", int64(0), int64(0), int64(0)), Decision{}, true},
		{"denial without wait", reply(0, 0, 2, 0, 0, ""), Decision{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDecision(tt.reply)
			if tt.err {
				if !errors.Is(err, ErrBadReply) {
					t.Fatalf("parseReply(%v) err = %v, want ErrBadReply", tt.reply, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseReply(%v) = %+v, %v; want %+v", tt.reply, got, err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string // "" means valid
	}{
		{"zero means defaults", Config{}, ""},
		{"marketing above target", Config{TargetRPS: 50, MarketingRPS: 60}, "MarketingRPS"},
		{"marketing defaults above a low target", Config{TargetRPS: 50}, "MarketingRPS"},
		{"negative target", Config{TargetRPS: -1}, "TargetRPS"},
		{"burst under one", Config{Burst: -1}, "Burst"},
		{"no senders", Config{MaxSenders: -3}, "MaxSenders"},
		{"brace in account", Config{Account: "a}b"}, "Account"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			var ce *ConfigError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &ce) || ce.Field != tt.field):
				t.Fatalf("Validate() = %v, want a ConfigError on %s", err, tt.field)
			}
		})
	}
}

func TestFallbackStartsJitteredAndSpacesOneAtATime(t *testing.T) {
	f := newFallback(Config{TargetRPS: 90, MarketingRPS: 70, MaxSenders: 23}.withDefaults())
	iv := f.global.interval // 23/90 s
	f.enterAt(t0, 0.5)
	if d := f.decideClass(t0, OTP); d.Allowed || d.RetryAfter != iv/2 {
		t.Fatalf("at the start of fallback: %+v, want a wait of half an interval (%v)", d, iv/2)
	}
	t1 := t0.Add(iv / 2)
	if d := f.decideClass(t1, OTP); !d.Allowed {
		t.Fatalf("at the jittered start: %+v, want allowed", d)
	}
	if d := f.decideClass(t1, OTP); d.Allowed || d.RetryAfter != iv {
		t.Fatalf("right after: %+v, want a wait of one interval (%v)", d, iv)
	}
	t2 := t1.Add(time.Hour) // idle time banks nothing: one at a time
	if !f.decideClass(t2, OTP).Allowed || f.decideClass(t2, OTP).Allowed {
		t.Fatalf("after an idle hour, want exactly one allowed")
	}
}

func TestFallbackMarketingTakesBothOrNeither(t *testing.T) {
	f := newFallback(Config{TargetRPS: 90, MarketingRPS: 70, MaxSenders: 23}.withDefaults())
	if !f.decideClass(t0, Marketing).Allowed {
		t.Fatal("first marketing: want allowed")
	}
	gTAT, mTAT := f.global.tat, f.levels[0].tat
	t1 := t0.Add(f.global.interval) // global has room, marketing does not
	d := f.decideClass(t1, Marketing)
	if d.Allowed || d.Reason != ReasonCeiling {
		t.Fatalf("marketing over its fallback cap: %+v, want denied by marketing", d)
	}
	if f.global.tat != gTAT || f.levels[0].tat != mTAT {
		t.Fatal("a denied marketing decision moved a TAT")
	}
	if !f.decideClass(t1, OTP).Allowed {
		t.Fatal("OTP while marketing is capped: want allowed")
	}
}
