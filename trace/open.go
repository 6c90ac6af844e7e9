package trace

import (
	"fmt"
	"os"
	"syscall"
)

// openRegular opens path for reading if it is a regular file, following
// symbolic links. It opens without blocking and then asks the open file
// what it is, so that a FIFO (whose open would wait for a writer
// forever) or a device put in the file's place between a check and the
// open is refused, never read.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrNotTrace, path, st.Mode().Type())
	}
	return f, st, nil
}
