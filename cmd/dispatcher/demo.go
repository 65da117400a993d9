//go:build !nodemo

// The demo (`dispatcher demo`, package demo) is left out of a build with
// -tags nodemo, as the Dockerfile's: the production image carries no
// in-process Pub/Sub, Redis or provider simulator (demo_off.go).

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/redis/go-redis/v9"

	"smsdispatcher/config"
	"smsdispatcher/console"
	"smsdispatcher/internal/demo"
)

// runDemo is `dispatcher demo`: the real pipeline on one machine.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	load := config.Flags(fs, config.All, environ)
	o := demo.Options{Getenv: environ, Version: version}
	var progress string
	fs.IntVar(&o.Instances, "instances", 3, "dispatcher instances (each with its own Redis client and limiter, as pods)")
	fs.IntVar(&o.Campaign, "campaign", 3000, "marketing messages published at the start")
	fs.Float64Var(&o.OTPRate, "otp-rate", 5, "OTP messages published per second while the campaign runs")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "give up after this long")
	fs.StringVar(&progress, "progress", "auto", "live progress line: auto (on a terminal), on, off")
	fs.BoolVar(&o.Traces, "traces", false, "print every span to stdout (OTEL_TRACES_EXPORTER=console); with --fail-5xx, re-sends show http.request.resend_count")
	fs.DurationVar(&o.Fail5xx, "fail-5xx", 0, "make the provider answer 503 for this long at the start, so that messages are re-sent")
	fs.IntVar(&o.CampaignSegments, "campaign-segments", 1, "segments of each campaign body (GSM-7); with --rate-unit segment the limiter counts them")
	withConsole := fs.Bool("console", false, "serve the console (docs/console.md) over the demo's stack while it runs, on CONSOLE_ADDR (default "+defaultConsoleAddr+"); its reads count in Redis's figures")
	fs.IntVar(&o.Classes, "classes", 2, fmt.Sprintf("classes: 2 (otp, marketing) or 3 (otp, transactional at %g/s, marketing; a report line per class)", demo.DefaultTransactionalRate))
	fs.BoolVar(&o.QuietHours, "quiet-hours", false, "give marketing send windows: a third of the campaign (French numbers) is deferred until France's window opens a minute or so after the start, then released and sent")
	fs.IntVar(&o.OptOuts, "opt-outs", 4, "recipients (sent every fifth OTP) who reply STOP once half the campaign is sent, half through each of two accounts (0: none, one account)")
	fs.BoolVar(&o.Guard, "guard", false, "give the first class (otp) docs/guard.md's pumping guard and verify about 80 % of its codes; the report says what it blocked and what its counting cost")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	if o.Instances < 1 || o.Campaign < 0 || o.OTPRate < 0 || o.CampaignSegments < 1 || o.CampaignSegments > 10 || (o.Classes != 2 && o.Classes != 3) || o.OptOuts < 0 {
		return fmt.Errorf("demo: --instances must be ≥ 1, --campaign, --otp-rate and --opt-outs ≥ 0, --campaign-segments 1-10, --classes 2 or 3")
	}
	o.Progress = progressWriter(progress, stdout)
	if *withConsole {
		o.Console = demoConsole(stdout, stderr)
	}
	r, err := demo.Run(ctx, cfg, o)
	if err != nil {
		return err
	}
	r.Print(stdout, cfg)
	if r.Throttled > 0 {
		return fmt.Errorf("demo: the provider answered 429 %d times", r.Throttled)
	}
	return nil
}

// progressWriter is where the progress line goes: stdout when mode is on,
// or auto and stdout is a terminal; nil (none) otherwise.
func progressWriter(mode string, stdout io.Writer) io.Writer {
	switch mode {
	case "on":
		return stdout
	case "off":
		return nil
	}
	if isTerminal(stdout) {
		return stdout
	}
	return nil
}

// demoConsole is demo.Options.Console of `dispatcher demo --console`: the
// console over the demo's stack, on CONSOLE_ADDR (loopback by default), its
// URL printed to stdout.
func demoConsole(stdout, stderr io.Writer) func(cfg config.Settings, rdb redis.UniversalClient, ps *pubsub.Client) (func(), error) {
	return func(cfg config.Settings, rdb redis.UniversalClient, ps *pubsub.Client) (func(), error) {
		addr, auth, err := consoleAccess()
		if err != nil {
			return nil, err
		}
		lists, stopLists, err := console.FeatureLists(cfg, rdb, ps)
		if err != nil {
			return nil, err
		}
		// Info: the audit lines are Info, and a newcomer's actions in the
		// demo's console are shown as an operator's would be.
		h, err := console.NewHandler(console.Options{Settings: cfg, Redis: rdb, PubSub: ps, Auth: auth, Lists: lists,
			Logger: slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		if err == nil {
			var served []net.Addr
			var stop stopper
			if served, stop, err = serveHTTP([]listening{{addr, "CONSOLE_ADDR", h}}); err == nil {
				fmt.Fprintf(stdout, "console: http://%s/ (while the demo runs)\n", served[0])
				return func() { stop.now(); h.Close(); stopLists() }, nil
			}
			h.Close()
		}
		stopLists()
		return nil, err
	}
}
