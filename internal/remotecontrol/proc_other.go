//go:build !linux

package remotecontrol

import "syscall"

// procAttr starts the CLI in a process group of its own (its children end
// with it).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
