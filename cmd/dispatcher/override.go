package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config"
	"smsdispatcher/internal/operator"
)

// runOverride is `dispatcher override`: lower the account's rates for every
// pod at once, without a redeploy (an incident lever), pin or reset the
// rate it learned, and end a 429 penalty. It can only lower: a value above
// the configured TARGET_RPS / MARKETING_RPS has no effect. It prints the
// account's learned rate after what it did.
func runOverride(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("override", stderr)
	load := config.Flags(fs, config.Redis|config.Accounts, environ)
	name := fs.String("on", "", "the account to act on, by name (needed when ACCOUNTS_FILE lists several)")
	target := fs.Float64("set-target-rps", 0, fmt.Sprintf("lower TARGET_RPS to this for every pod (at least %v)", admission.MinRPS))
	marketing := fs.Float64("set-marketing-rps", 0, fmt.Sprintf("lower the last class's ceiling (MARKETING_RPS with the default classes) to this for every pod (at least %v)", admission.MinRPS))
	ttl := fs.Duration("ttl", time.Hour, "the override ends by itself after this (0: until cleared)")
	clear := fs.Bool("clear", false, "remove the override")
	pin := fs.Float64("pin-learned-rps", 0, "hold the account's learned rate at this (at most its target) until --reset-learned")
	reset := fs.Bool("reset-learned", false, "forget the learned rate: the target holds until the next 429 starts a new search")
	show := fs.Bool("show", false, "only print the learned rate")
	clearPenalty := fs.Bool("clear-penalty", false, "end a live 429 penalty (never an account pause): every pod sends again within a second, one message per interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Refused before anything is read or written: a rate below the
	// minimum would not lower the account's rate, and a negative --ttl
	// would make the override permanent.
	change := operator.Override{TargetRPS: *target, MarketingRPS: *marketing, TTL: *ttl, Clear: *clear}
	check := change
	check.Clear = *clear || (*target == 0 && *marketing == 0) // no rate given: only --ttl to check
	if err := operator.CheckOverride(check, [3]string{"--set-target-rps", "--set-marketing-rps", "--ttl"}); err != nil {
		return fmt.Errorf("override: %w", err)
	}
	overriding := *clear || *target > 0 || *marketing > 0
	cfg, err := load()
	if err != nil {
		return err
	}
	rdb, routing, err := operatorRedis(cfg, "the override lives in the limiter's Redis", operatorTimeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if *reset && *pin > 0 {
		return fmt.Errorf("override: give --pin-learned-rps or --reset-learned, not both")
	}
	if !overriding && *pin <= 0 && !*reset && !*show && !*clearPenalty {
		return fmt.Errorf("override: give --set-target-rps and/or --set-marketing-rps, --clear, --clear-penalty, --pin-learned-rps, --reset-learned or --show")
	}
	setup, err := pickAccount(routing.Accounts, *name)
	if err != nil {
		return err
	}
	lim, err := operator.Limiter(rdb, cfg, setup, operatorTimeout, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	c := setup
	if *clearPenalty {
		ended, err := lim.ClearPenalty(ctx)
		if err != nil {
			return err
		}
		if ended {
			fmt.Fprintf(stdout, "%s: 429 penalty ended: every pod sends again within a second\n", c.Name)
		} else {
			fmt.Fprintf(stdout, "%s: no 429 penalty was live (an account pause is not ended by --clear-penalty)\n", c.Name)
		}
	}
	if overriding {
		did, err := operator.ChangeOverride(ctx, lim, c, change)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, did)
	}
	var st admission.Learned
	switch {
	case *reset:
		st, err = lim.PinLearned(ctx, 0)
	case *pin > 0:
		st, err = lim.PinLearned(ctx, *pin)
	default:
		st, err = lim.Learned(ctx)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s\n", c.Name, describeLearned(st, c.TargetRPS, setup.Adaptive.Enabled))
	return nil
}

// pickAccount returns the account named name, or the only one.
func pickAccount(setups []config.Account, name string) (config.Account, error) {
	var names []string
	for _, s := range setups {
		if s.Name == name || (name == "" && len(setups) == 1) {
			return s, nil
		}
		names = append(names, s.Name)
	}
	if name == "" {
		return config.Account{}, fmt.Errorf("override: several accounts (%s): name one with --on", strings.Join(names, ", "))
	}
	return config.Account{}, fmt.Errorf("override: no account %q (accounts: %s)", name, strings.Join(names, ", "))
}

// describeLearned says what the learned rate is, for an operator.
func describeLearned(st admission.Learned, target float64, adaptive bool) string {
	switch {
	case st.RPS == 0 && !adaptive:
		return fmt.Sprintf("learned rate: none (the account does not learn); target %g/s", target)
	case st.RPS == 0:
		return fmt.Sprintf("learned rate: none; the target %g/s holds until a 429", target)
	case st.Mode == "pinned":
		return fmt.Sprintf("learned rate: %g/s pinned (target %g/s) until --reset-learned", st.RPS, target)
	}
	s := fmt.Sprintf("learned rate: %g/s %s (target %g/s; last good %g/s, last throttled %g/s)", st.RPS, st.Mode, target, st.Low, st.High)
	if !st.Next.IsZero() {
		s += fmt.Sprintf("; next step up not before %s", st.Next.UTC().Format(time.RFC3339))
	}
	return s
}
