//go:build !receiptsmerge

package main

import (
	"context"
	"errors"
	"io"
)

// runMessage stands in for `dispatcher message` before the limiter keeps
// a message's story (message.go).
func runMessage(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("message: this build keeps no message stories")
}
