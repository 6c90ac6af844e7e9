//go:build linux && race

package collectives

import (
	"runtime"
	"unsafe"
)

// The race detector cannot see that bytes written into a socket happen
// before the same bytes are read out of it on the other side. The net
// package tells it through internal/poll, for its own reads; sockIO tells
// it here, in the same way: every write, raw or through the net package,
// releases ioSync, and every raw read acquires it. ioSync is only an
// address for the detector to key on.
var ioSync byte

func raceReleaseIO() { runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync)) }

func raceAcquireIO() { runtime.RaceAcquire(unsafe.Pointer(&ioSync)) }
