package collectives

import (
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// TestJobFromEnvTransport: COMMPROF_TRANSPORT and COMMPROF_SHM_SPIN are
// read into the join's configuration, and a value that means nothing
// is an error that names the variable.
func TestJobFromEnvTransport(t *testing.T) {
	for _, tc := range []struct {
		transport, spin string
		want            TransportMode
		wantSpin        time.Duration
		err             string
	}{
		{want: TransportAuto},
		{transport: "auto", want: TransportAuto},
		{transport: "SHM", want: TransportShm},
		{transport: "tcp", want: TransportTCP},
		{transport: "infiniband", err: `COMMPROF_TRANSPORT="infiniband"`},
		{spin: "20us", wantSpin: 20 * time.Microsecond},
		{spin: "off", wantSpin: -1},
		{spin: "0", wantSpin: -1},
		{spin: "-5ms", err: `COMMPROF_SHM_SPIN="-5ms"`},
		{spin: "briefly", err: `COMMPROF_SHM_SPIN="briefly"`},
	} {
		env := map[string]string{envnames.Rank: "0", envnames.Size: "2", envnames.Coord: "127.0.0.1:1", envnames.Secret: "s",
			envnames.Transport: tc.transport, envnames.ShmSpin: tc.spin}
		job, ok, err := JobFromEnv(func(k string) string { return env[k] })
		if !ok {
			t.Fatal("the commprof launcher's variables were not recognised")
		}
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%+v: error %v, want one naming %s", tc, err, tc.err)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc, err)
		case job.Transport != tc.want || job.Shm.Spin != tc.wantSpin:
			t.Errorf("%+v: transport %v, spin %v", tc, job.Transport, job.Shm.Spin)
		}
	}
}
