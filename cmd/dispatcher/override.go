package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"smsdispatcher/admission"
)

// runOverride is `dispatcher override`: lower the account's rates for every
// pod at once, without a redeploy (an incident lever). It can only lower:
// a value above the configured TARGET_RPS / MARKETING_RPS has no effect.
func runOverride(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("override", stderr)
	load := configFlags(fs, environ)
	target := fs.Float64("set-target-rps", 0, "lower TARGET_RPS to this for every pod")
	marketing := fs.Float64("set-marketing-rps", 0, "lower MARKETING_RPS to this for every pod")
	ttl := fs.Duration("ttl", time.Hour, "the override ends by itself after this (0: until cleared)")
	clear := fs.Bool("clear", false, "remove the override")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if cfg.RedisURL == "" {
		return &configError{"REDIS_URL", "redis-url", "required: the override lives in the limiter's Redis"}
	}
	if !*clear && *target <= 0 && *marketing <= 0 {
		return fmt.Errorf("override: give --set-target-rps and/or --set-marketing-rps, or --clear")
	}
	const timeout = 5 * time.Second // an operator at a terminal, not a send waiting
	rdb, err := newRedisWithCA(cfg.RedisURL, cfg.RedisCA, timeout)
	if err != nil {
		return err
	}
	defer rdb.Close()
	lim, err := admission.New(rdb, admission.Config{
		Account: cfg.Account, TargetRPS: cfg.TargetRPS, MarketingRPS: cfg.MarketingRPS,
		Burst: cfg.Burst, MaxSenders: cfg.MaxSenders, RedisTimeout: timeout,
		Logger: slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		return err
	}
	if *clear {
		*target, *marketing = 0, 0
	}
	if err := lim.Override(ctx, *target, *marketing, *ttl); err != nil {
		return err
	}
	if *clear {
		fmt.Fprintln(stdout, "override cleared: configured rates apply")
	} else {
		fmt.Fprintf(stdout, "override set for %v: target %g/s, marketing %g/s (each only where below the configured %g and %g)\n",
			*ttl, *target, *marketing, cfg.TargetRPS, cfg.MarketingRPS)
	}
	return nil
}
