//go:build !linux

package launch

import "syscall"

// rankAttr starts a rank in its own process group: a Ctrl-C in the
// terminal reaches the launcher, which then stops the ranks in order.
func rankAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
