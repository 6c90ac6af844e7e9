//go:build !linux

package inject

import "errors"

func pinProcess(int) error { return errors.New("pinning to a core needs Linux") }
