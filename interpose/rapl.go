package interpose

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DefaultPowercap is where Linux exposes RAPL energy counters.
const DefaultPowercap = "/sys/class/powercap"

// RAPL reads a host's RAPL energy counters (Intel's, and AMD's through the
// same driver) from a powercap directory: each zone `intel-rapl:N` is a
// package, its subzones `intel-rapl:N:M` its core, uncore and DRAM
// domains; each has a `name`, an `energy_uj` counter and the
// `max_energy_range_uj` it wraps around at. RAPL keeps the package and
// DRAM domains (core and uncore are inside the package's) and sums each
// over the host's packages, counting from its first reading and across
// wrap-arounds. Not safe for concurrent use.
type RAPL struct {
	domains []*raplDomain
	read    func(string) ([]byte, error) // os.ReadFile; tests put a file's refusal in its place
}

type raplDomain struct {
	sample      string // SampleEnergyPk or SampleEnergyDR
	path        string // its energy_uj
	max         uint64 // max_energy_range_uj: the counter goes from max back to 0
	last, total uint64
}

// Energy is one domain's energy since the first reading, µJ.
type Energy struct {
	Name        string // the sample name: energy_pkg_uj or energy_dram_uj
	MicroJoules uint64
}

// ErrNoEnergy says a host exposes no energy counters commprof can read.
var ErrNoEnergy = errors.New("this host exposes no energy counters")

// OpenRAPL finds the RAPL package and DRAM domains under root (a
// powercap directory, DefaultPowercap on Linux) and takes their first
// reading. It returns an error wrapping ErrNoEnergy when there is none,
// saying why (no such directory, no RAPL zone, counters not readable
// without privileges).
func OpenRAPL(root string) (*RAPL, error) { return openRAPL(root, os.ReadFile) }

func openRAPL(root string, read func(string) ([]byte, error)) (*RAPL, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (no %s)", ErrNoEnergy, root)
		}
		return nil, fmt.Errorf("%w (%v)", ErrNoEnergy, err)
	}
	r := &RAPL{read: read}
	var denied error
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasPrefix(n, "intel-rapl:") {
			continue
		}
		dir := filepath.Join(root, n)
		b, err := read(filepath.Join(dir, "name"))
		if err != nil {
			continue
		}
		var sample string
		switch name := strings.TrimSpace(string(b)); {
		case strings.HasPrefix(name, "package"):
			sample = SampleEnergyPk
		case name == "dram":
			sample = SampleEnergyDR
		default:
			continue // core, uncore, psys: inside the package, or the whole platform
		}
		d := &raplDomain{sample: sample, path: filepath.Join(dir, "energy_uj")}
		if d.max, err = r.readUint(filepath.Join(dir, "max_energy_range_uj")); err != nil {
			d.max = 0 // without it, a wrap-around cannot be told apart from a reset: such a step counts 0
		}
		if d.last, err = r.readUint(d.path); err != nil {
			if errors.Is(err, os.ErrPermission) && denied == nil {
				denied = err
			}
			continue
		}
		r.domains = append(r.domains, d)
	}
	if len(r.domains) == 0 {
		if denied != nil {
			return nil, fmt.Errorf("%w readable: %v (RAPL counters need root or a readable energy_uj)", ErrNoEnergy, denied)
		}
		return nil, fmt.Errorf("%w (no RAPL package or DRAM domain under %s)", ErrNoEnergy, root)
	}
	return r, nil
}

// Read returns each kept domain's energy since OpenRAPL, summed over
// packages, package domain first. A counter that cannot be read this
// time keeps its last total.
func (r *RAPL) Read() []Energy {
	var pkg, dram uint64
	var havePkg, haveDRAM bool
	for _, d := range r.domains {
		if v, err := r.readUint(d.path); err == nil {
			switch {
			case v >= d.last:
				d.total += v - d.last
			case d.max > 0 && d.last <= d.max:
				// Wrapped around: up to max, then from 0.
				d.total += d.max - d.last + v
			}
			d.last = v
		}
		if d.sample == SampleEnergyPk {
			pkg += d.total
			havePkg = true
		} else {
			dram += d.total
			haveDRAM = true
		}
	}
	out := make([]Energy, 0, 2)
	if havePkg {
		out = append(out, Energy{SampleEnergyPk, pkg})
	}
	if haveDRAM {
		out = append(out, Energy{SampleEnergyDR, dram})
	}
	return out
}

func (r *RAPL) readUint(path string) (uint64, error) {
	b, err := r.read(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
