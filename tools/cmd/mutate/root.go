package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
)

// productModule matches the module line of the product's go.mod.
var productModule = regexp.MustCompile(`(?m)^module\s+smsdispatcher\s*$`)

// productRoot returns the product module's root: the nearest directory at or
// above the working directory whose go.mod declares module smsdispatcher.
// The mutants' file paths and packages are relative to it, wherever in the
// tree (the tools module, the product's root) the check is started.
func productRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && productModule.Match(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of module smsdispatcher at or above the working directory: run inside the repository")
		}
		dir = parent
	}
}
