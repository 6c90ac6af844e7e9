package interpose

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// powercap makes a sysfs-shaped powercap directory: zones name -> (name,
// energy_uj, max_energy_range_uj), as Linux lays them out (packages
// intel-rapl:N, their domains intel-rapl:N:M, and the control type
// intel-rapl with no counter).
func powercap(t *testing.T, zones map[string][3]string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "intel-rapl"), 0o755); err != nil {
		t.Fatal(err)
	}
	for z, f := range zones {
		dir := filepath.Join(root, z)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"name", "energy_uj", "max_energy_range_uj"} {
			if f[i] == "" {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(f[i]+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func setEnergy(t *testing.T, root, zone string, uj uint64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, zone, "energy_uj"), []byte(strconv.FormatUint(uj, 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func energyOf(es []Energy) map[string]uint64 {
	m := map[string]uint64{}
	for _, e := range es {
		m[e.Name] = e.MicroJoules
	}
	return m
}

// TestRAPL reads two packages with their DRAM domains (and core and
// psys zones, which are left out) across a wrap-around of one counter:
// each domain's energy is the sum over packages of what the counters
// advanced, the wrap counted as the range's rest plus the new reading.
func TestRAPL(t *testing.T) {
	const rng = 262143328850
	root := powercap(t, map[string][3]string{
		"intel-rapl:0":      {"package-0", "1000", strconv.Itoa(rng)},
		"intel-rapl:0:0":    {"core", "500", strconv.Itoa(rng)},
		"intel-rapl:0:1":    {"dram", "200", strconv.Itoa(rng)},
		"intel-rapl:1":      {"package-1", strconv.Itoa(rng - 100), strconv.Itoa(rng)},
		"intel-rapl:1:0":    {"dram", "300", strconv.Itoa(rng)},
		"intel-rapl-mmio:0": {"package-0", "7", strconv.Itoa(rng)},
		"intel-rapl:2":      {"psys", "5", strconv.Itoa(rng)},
	})
	r, err := OpenRAPL(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := energyOf(r.Read()); got[SampleEnergyPk] != 0 || got[SampleEnergyDR] != 0 {
		t.Fatalf("first read %v, want 0: energy counts from the opening", got)
	}
	setEnergy(t, root, "intel-rapl:0", 1000+5_000_000)
	setEnergy(t, root, "intel-rapl:0:0", 999_999_999) // core: inside the package, not added
	setEnergy(t, root, "intel-rapl:0:1", 200+1_000_000)
	setEnergy(t, root, "intel-rapl:1", 400) // wrapped: 100 to the range's end, then 400
	setEnergy(t, root, "intel-rapl:1:0", 300+2_000_000)
	got := energyOf(r.Read())
	if got[SampleEnergyPk] != 5_000_000+100+400 || got[SampleEnergyDR] != 3_000_000 {
		t.Errorf("after a wrap-around: %v, want package %d and dram %d", got, 5_000_500, 3_000_000)
	}
	// A counter that cannot be read this time keeps its total.
	if err := os.Remove(filepath.Join(root, "intel-rapl:1", "energy_uj")); err != nil {
		t.Fatal(err)
	}
	setEnergy(t, root, "intel-rapl:0", 1000+6_000_000)
	if got := energyOf(r.Read()); got[SampleEnergyPk] != 6_000_500 {
		t.Errorf("with one counter gone: %v, want package %d", got, 6_000_500)
	}
}

// TestRAPLUnavailable: no powercap directory, one without RAPL zones,
// zones whose counters only root may read, and a counter that is not a
// number are each "no energy counters", with why.
func TestRAPLUnavailable(t *testing.T) {
	denied := powercap(t, map[string][3]string{"intel-rapl:0": {"package-0", "1000", "100000"}})
	if err := os.Chmod(filepath.Join(denied, "intel-rapl:0", "energy_uj"), 0o000); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, root, why string
		root0           bool // the case is only one as an unprivileged user
	}{
		{"missing", filepath.Join(t.TempDir(), "none"), "no ", false},
		{"empty", powercap(t, nil), "no RAPL package or DRAM domain", false},
		{"other zones", powercap(t, map[string][3]string{"intel-rapl:0": {"psys", "1", "2"}}), "no RAPL package", false},
		{"garbage", powercap(t, map[string][3]string{"intel-rapl:0": {"package-0", "lots", "2"}}), "no RAPL package", false},
		{"permission", denied, "root", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := os.ReadFile
			if c.root0 && os.Geteuid() == 0 {
				// Root reads files whatever their mode: refuse the
				// counter as the kernel refuses it to other users.
				read = func(p string) ([]byte, error) {
					if filepath.Base(p) == "energy_uj" {
						return nil, &os.PathError{Op: "open", Path: p, Err: os.ErrPermission}
					}
					return os.ReadFile(p)
				}
			}
			r, err := openRAPL(c.root, read)
			if err == nil || r != nil || !errors.Is(err, ErrNoEnergy) || !strings.Contains(err.Error(), c.why) {
				t.Errorf("OpenRAPL: %v, %v; want ErrNoEnergy saying %q", r, err, c.why)
			}
		})
	}
}
