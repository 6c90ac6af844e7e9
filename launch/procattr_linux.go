package launch

import "syscall"

// rankAttr starts a rank in its own process group (a Ctrl-C in the
// terminal reaches the launcher, which then stops the ranks in order),
// and sends it SIGTERM if the launcher dies without stopping it (killed
// with SIGKILL, say), so that no rank outlives its job. Linux sends that
// signal when the thread that started the rank exits: Run keeps its
// goroutine on one thread until every rank has been reaped.
func rankAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
