package redisserver

import (
	"os/exec"
	"syscall"
)

// SetParentDeathSignal makes the kernel send SIGTERM to cmd when this
// process dies, even by SIGKILL, which no deferred stop survives.
func SetParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
