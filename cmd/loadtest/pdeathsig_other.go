//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing off Linux: there, a SIGKILL of loadtest
// leaves its redis-server running (SIGINT and SIGTERM still stop it).
func setParentDeathSignal(*exec.Cmd) {}
