//go:build linux && !race

package collectives

// Without the race detector there is nothing to tell it (sockio_race.go).
func raceReleaseIO() {}

func raceAcquireIO() {}
