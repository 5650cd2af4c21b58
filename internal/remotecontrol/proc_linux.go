package remotecontrol

import "syscall"

// procAttr starts the CLI in a process group of its own (its children end
// with it) and has the kernel stop it if bridged dies without stopping it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
