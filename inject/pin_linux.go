package inject

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinProcess pins every thread of this process to cpu; threads started
// later inherit it from the thread that starts them.
func pinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return unix.SchedSetaffinity(0, &set)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return err
		}
	}
	return nil
}
