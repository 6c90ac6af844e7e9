package collectives

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

func TestJobFromEnvRawIO(t *testing.T) {
	cores := runtime.NumCPU()
	for _, tc := range []struct {
		name      string
		raw       string
		localSize int
		want      RawIO
		err       string
	}{
		{name: "a rank per core", localSize: cores, want: RawLarge},
		{name: "more ranks than cores", localSize: cores + 1, want: RawOn},
		{name: "local size unknown", localSize: 0, want: RawLarge},
		{name: "forced on", raw: "on", localSize: 1, want: RawOn},
		{name: "forced large", raw: "large", localSize: cores * 4, want: RawLarge},
		{name: "forced off", raw: "0", localSize: cores * 4, want: RawOff},
		{name: "forced off by name", raw: "Off", localSize: cores * 4, want: RawOff},
		{name: "nonsense", raw: "sometimes", localSize: 1, err: `COMMPROF_RAW_IO="sometimes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{envnames.Rank: "0", envnames.Size: "2", envnames.Coord: "127.0.0.1:1", envnames.RawIO: tc.raw}
			if tc.localSize > 0 {
				env[envnames.LocalSize] = strconv.Itoa(tc.localSize)
			}
			job, ok, err := JobFromEnv(func(k string) string { return env[k] })
			if !ok {
				t.Fatal("the commprof launcher's variables were not recognised")
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if job.TCP.RawIO != tc.want {
				t.Errorf("RawIO %v with %d local ranks on %d cores and %s=%q, want %v", job.TCP.RawIO, tc.localSize, cores, envnames.RawIO, tc.raw, tc.want)
			}
		})
	}
}

func TestJobFromEnvCongestion(t *testing.T) {
	for v, want := range map[string]string{"": "", "cubic": "cubic", "system": "system", "reno; rm -rf": "error", "averyveryverylongname": "error"} {
		env := map[string]string{envnames.Rank: "0", envnames.Size: "2", envnames.Coord: "127.0.0.1:1", envnames.TCPCongestion: v}
		job, _, err := JobFromEnv(func(k string) string { return env[k] })
		switch {
		case want == "error":
			if err == nil || !strings.Contains(err.Error(), envnames.TCPCongestion) {
				t.Errorf("%s=%q: %v, want an error naming the variable", envnames.TCPCongestion, v, err)
			}
		case err != nil || job.TCP.Congestion != want:
			t.Errorf("%s=%q: Congestion %q, %v", envnames.TCPCongestion, v, job.TCP.Congestion, err)
		}
	}
}
