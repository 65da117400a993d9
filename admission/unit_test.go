package admission

import (
	"errors"
	"testing"
	"time"
)

func TestParseReply(t *testing.T) {
	tests := []struct {
		name  string
		reply []any
		want  Decision
		err   bool
	}{
		{"allowed", []any{int64(1), int64(0), int64(0)}, Decision{Allowed: true, Source: SourceRedis}, false},
		{"penalty", []any{int64(0), int64(5000), int64(1)}, Decision{RetryAfter: 5 * time.Millisecond, Source: SourcePenalty, Reason: ReasonPenalty}, false},
		{"global", []any{int64(0), int64(11112), int64(2)}, Decision{RetryAfter: 11112 * time.Microsecond, Source: SourceRedis, Reason: ReasonGlobal}, false},
		{"marketing", []any{int64(0), int64(7), int64(3)}, Decision{RetryAfter: 7 * time.Microsecond, Source: SourceRedis, Reason: ReasonMarketing}, false},
		{"short", []any{int64(1)}, Decision{}, true},
		{"string element", []any{"1", int64(0), int64(0)}, Decision{}, true},
		{"nil element", []any{int64(1), nil, int64(0)}, Decision{}, true},
		{"unknown reason", []any{int64(0), int64(10), int64(9)}, Decision{}, true},
		{"denial without wait", []any{int64(0), int64(0), int64(2)}, Decision{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseReply(tt.reply)
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
	if d := f.decideAt(t0, OTP); d.Allowed || d.RetryAfter != iv/2 {
		t.Fatalf("at the start of fallback: %+v, want a wait of half an interval (%v)", d, iv/2)
	}
	t1 := t0.Add(iv / 2)
	if d := f.decideAt(t1, OTP); !d.Allowed {
		t.Fatalf("at the jittered start: %+v, want allowed", d)
	}
	if d := f.decideAt(t1, OTP); d.Allowed || d.RetryAfter != iv {
		t.Fatalf("right after: %+v, want a wait of one interval (%v)", d, iv)
	}
	t2 := t1.Add(time.Hour) // idle time banks nothing: one at a time
	if !f.decideAt(t2, OTP).Allowed || f.decideAt(t2, OTP).Allowed {
		t.Fatalf("after an idle hour, want exactly one allowed")
	}
}

func TestFallbackMarketingTakesBothOrNeither(t *testing.T) {
	f := newFallback(Config{TargetRPS: 90, MarketingRPS: 70, MaxSenders: 23}.withDefaults())
	if !f.decideAt(t0, Marketing).Allowed {
		t.Fatal("first marketing: want allowed")
	}
	gTAT, mTAT := f.global.tat, f.marketing.tat
	t1 := t0.Add(f.global.interval) // global has room, marketing does not
	d := f.decideAt(t1, Marketing)
	if d.Allowed || d.Reason != ReasonMarketing {
		t.Fatalf("marketing over its fallback cap: %+v, want denied by marketing", d)
	}
	if f.global.tat != gTAT || f.marketing.tat != mTAT {
		t.Fatal("a denied marketing decision moved a TAT")
	}
	if !f.decideAt(t1, OTP).Allowed {
		t.Fatal("OTP while marketing is capped: want allowed")
	}
}
