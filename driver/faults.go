package driver

import (
	"os"

	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/envnames"
)

// FaultsOf parses --inject values and COMMPROF_INJECT.
func FaultsOf(specs []string) ([]inject.Fault, error) {
	var out []inject.Fault
	for _, s := range append([]string{os.Getenv(envnames.Inject)}, specs...) {
		fs, err := inject.Parse(s)
		if err != nil {
			if s == os.Getenv(envnames.Inject) {
				return nil, Usagef("%s: %v", envnames.Inject, err)
			}
			return nil, Usagef("--inject: %v", err)
		}
		out = append(out, fs...)
	}
	return out, nil
}
