//go:build !linux

package redisserver

import "os/exec"

// SetParentDeathSignal does nothing off Linux: there, a SIGKILL of the parent
// leaves its children running (SIGINT and SIGTERM still stop them).
func SetParentDeathSignal(*exec.Cmd) {}
