package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"smsdispatcher/config"
	"smsdispatcher/internal/operator"
	"smsdispatcher/internal/topology"
	"smsdispatcher/provider"
	"smsdispatcher/suppress"
)

const suppressionsUsage = `usage: dispatcher suppressions add|remove|check|list|export|import [flags]

  add --reason R NUMBER...     put numbers (E.164) on the suppression list
  remove --reason R NUMBER...  take numbers off it
  check NUMBER                 say whether a number is on it, since when and why
  list                         print its entries, numbers masked (--show-numbers, --limit,
                               --cursor: go on where the last page stopped)
  export                       print every entry as JSON lines, numbers in clear (the restore file)
  import --file F              add the entries of JSON lines (--file, - for stdin); idempotent

Every change is published to SUPPRESSIONS_TOPIC.
Run 'dispatcher suppressions <command> -h' for the flags.
`

// runSuppressions is `dispatcher suppressions`: the operators' hands on
// the suppression list (docs/suppressions.md).
func runSuppressions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "add", "remove":
		return runSuppressionsChange(ctx, sub, args, stdout, stderr)
	case "check":
		return runSuppressionsCheck(ctx, args, stdout, stderr)
	case "list", "export":
		return runSuppressionsList(ctx, sub, args, stdout, stderr)
	case "import":
		return runSuppressionsImport(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, suppressionsUsage)
		return nil
	}
	fmt.Fprint(stderr, suppressionsUsage)
	if sub == "" {
		return errors.New("suppressions: give add, remove, check, list, export or import")
	}
	return fmt.Errorf("suppressions: unknown command %q", sub)
}

// listSettings declares the settings a suppressions command reads.
func listSettings(fs *flag.FlagSet) func() (config.Settings, error) {
	return config.Flags(fs, config.Pubsub|config.Topics|config.Redis|config.Accounts, environ)
}

// openList is the suppression list cfg's Redis keeps, and when mirrored,
// the mirror on SUPPRESSIONS_TOPIC; close closes both.
func openList(ctx context.Context, cfg config.Settings, mirrored bool) (store *suppress.Store, mirror *suppress.TopicMirror, close func(), err error) {
	rdb, _, err := operatorRedis(cfg, "the suppression list lives in the limiter's Redis", operatorTimeout)
	if err != nil {
		return nil, nil, nil, err
	}
	if !mirrored {
		return suppress.NewStore(rdb, "", nil), nil, func() { rdb.Close() }, nil
	}
	ps, err := topology.NewClient(ctx, cfg.ProjectID, "")
	if err != nil {
		rdb.Close()
		return nil, nil, nil, err
	}
	mirror = &suppress.TopicMirror{Publisher: ps.Publisher(cfg.SuppressionsTopic)}
	return suppress.NewStore(rdb, "", mirror), mirror, func() { mirror.Publisher.Stop(); ps.Close(); rdb.Close() }, nil
}

// runSuppressionsChange is `suppressions add|remove NUMBER...`.
func runSuppressionsChange(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("suppressions "+action, stderr)
	load := listSettings(fs)
	reason := fs.String("reason", "", "why, kept with the entry (required)")
	account := fs.String("through", "", "the account the request came through, if any")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 || *reason == "" {
		return fmt.Errorf("suppressions %s: give the numbers (E.164) and --reason", action)
	}
	for _, n := range fs.Args() {
		if _, err := suppress.Key(n); err != nil {
			return fmt.Errorf("suppressions %s: %s: %w", action, provider.MaskNumber(n), err)
		}
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	store, mirror, done, err := openList(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer done()
	for _, n := range fs.Args() {
		changed, err := operator.ChangeSuppression(ctx, store, action, n, *account, *reason)
		if err != nil {
			return err
		}
		what := map[bool]string{true: "added", false: "already on the list"}
		if action == suppress.ActionRemove {
			what = map[bool]string{true: "removed", false: "not on the list"}
		}
		fmt.Fprintf(stdout, "%s: %s\n", provider.MaskNumber(n), what[changed])
	}
	if err := mirror.Wait(ctx); err != nil {
		return fmt.Errorf("suppressions %s: the list changed, but its publish to %s failed (run it again: it publishes again): %w", action, cfg.SuppressionsTopic, err)
	}
	return nil
}

// runSuppressionsCheck is `suppressions check NUMBER`.
func runSuppressionsCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("suppressions check", stderr)
	load := listSettings(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("suppressions check: give one number (E.164)")
	}
	n := fs.Arg(0)
	if _, err := suppress.Key(n); err != nil {
		return fmt.Errorf("suppressions check: %s: %w", provider.MaskNumber(n), err)
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	store, _, done, err := openList(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer done()
	e, ok, err := store.Get(ctx, n)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(stdout, "%s: not suppressed\n", provider.MaskNumber(n))
		return nil
	}
	fmt.Fprintf(stdout, "%s: suppressed since %s (%s)\n", provider.MaskNumber(n), e.At.Format(time.RFC3339), operator.DescribeEntry(e))
	return nil
}

// runSuppressionsList is `suppressions list` (a line each, numbers masked
// unless --show-numbers, at most --limit from --cursor, then the cursor
// the next page starts at) and `suppressions export` (JSON lines of every
// entry, numbers in clear), both reading the list in pages.
func runSuppressionsList(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("suppressions "+cmd, stderr)
	load := listSettings(fs)
	var show *bool
	var limit *int
	var from *string
	if cmd == "list" {
		show = fs.Bool("show-numbers", false, "print the numbers in clear")
		limit = fs.Int("limit", 100, "print at most this many entries (0: all)")
		from = fs.String("cursor", "", "start where the last page stopped: the cursor it printed")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var at suppress.Cursor
	if from != nil {
		var err error
		if at, err = suppress.ParseCursor(*from); err != nil {
			return fmt.Errorf("suppressions list: --cursor %q: %w", *from, err)
		}
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	store, _, done, err := openList(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer done()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if cmd == "export" {
		for e, err := range store.All(ctx) {
			if err != nil {
				return err
			}
			e.Action = ""
			out.Write(suppress.MirrorJSON(e))
			out.WriteByte('\n')
		}
		return nil
	}
	entries, next, more, err := store.Page(ctx, at, *limit)
	for _, e := range entries {
		n := provider.MaskNumber(e.Number)
		if *show {
			n = e.Number
		}
		fmt.Fprintf(out, "%s  %s  %s\n", n, e.At.Format(time.RFC3339), operator.DescribeEntry(e))
	}
	if err != nil || !more {
		return err
	}
	n, _ := store.Len(ctx)
	fmt.Fprintf(out, "… %d entries in all; the next page: --cursor %s (--limit 0 prints every one)\n", n, next)
	return nil
}

// runSuppressionsImport is `suppressions import --file F`: JSON lines of
// entries (an export's, or {"number": ...} alone), added unless on the
// list already; a line that is no entry of an E.164 number stops it
// before anything of its batch is added.
func runSuppressionsImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("suppressions import", stderr)
	load := listSettings(fs)
	file := fs.String("file", "-", "the JSON lines to import; - reads stdin")
	reason := fs.String("reason", "", "the reason of entries that have none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	in := io.Reader(os.Stdin)
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	store, mirror, done, err := openList(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	read, added, err := suppress.ReadLines(in, *reason, func(batch []suppress.Entry) (int, error) {
		n, err := store.Import(ctx, batch)
		if err != nil {
			return n, err
		}
		return n, mirror.Wait(ctx)
	})
	if err != nil {
		return fmt.Errorf("suppressions import: %w (imported %d so far; run it again: it publishes every line again)", err, added)
	}
	fmt.Fprintf(stdout, "read %d, added %d, already on the list %d, in %v\n", read, added, read-added, time.Since(start).Round(time.Millisecond))
	return nil
}
