//go:build nodemo

package main

import (
	"context"
	"errors"
	"io"
)

// runDemo stands in for the demo in a build with -tags nodemo (the
// Dockerfile's): such a binary has no in-process Pub/Sub, Redis or provider
// simulator to run it on.
func runDemo(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("demo: this binary was built without the demo (-tags nodemo); run it from the source: go run ./cmd/dispatcher demo")
}
