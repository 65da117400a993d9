// Package cli is the main of the repository's commands (cmd/dispatcher,
// tools/cmd/loadtest, tools/cmd/soak, tools/cmd/alertrecord): a context that
// an interrupt or SIGTERM ends, and the exit status of the command's error.
//
// Invariant: Main exits 0 when run returns nil, 2 when it returns
// flag.ErrHelp (the usage is already printed), and otherwise prints
// "name: error" to stderr and exits 1 — or, for an error that carries its
// own status (an ExitCoder in its chain, such as a configuration error),
// prints that error and exits with its status.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main runs run with the command line after the program's name, stdout and
// stderr, and exits with the status of its error. The context ends at the
// first interrupt or SIGTERM, so that run can stop what it started.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var coded ExitCoder
	switch {
	case err == nil:
	case errors.As(err, &coded):
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, coded)
		os.Exit(coded.ExitCode())
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// An ExitCoder is an error that says the process's exit status.
type ExitCoder interface {
	error
	ExitCode() int
}
