package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// doctorColumns are the columns the doctor reads of each stream.
var doctorColumns = []string{trace.ColKind, trace.ColName, trace.ColSeq, trace.ColComm, trace.ColBytes, trace.ColDType, trace.ColRoot}

// DoctorInput reads what analyze.Diagnose needs of the run in dir: its
// manifest, its ranks' in-flight files and the collectives of their
// streams. A run with neither streams nor in-flight files is an error;
// problems reading some of them are returned beside the input.
func DoctorInput(ctx context.Context, dir string) (analyze.DoctorInput, []error, error) {
	in := analyze.DoctorInput{Calls: map[int][]analyze.DoctorCall{}, Streams: map[int]bool{}, ExitStatus: map[int]int{}}
	if st, err := os.Stat(dir); err != nil {
		return in, nil, fmt.Errorf("reading run %s: %w", dir, err)
	} else if !st.IsDir() {
		return in, nil, fmt.Errorf("reading run %s: not a directory", dir)
	}
	var problems []error
	m, err := trace.ReadManifest(dir)
	switch {
	case err == nil:
		in.Status, in.Error, in.World = m.Status, m.Error, m.WorldSize
		in.Imported = m.Source != nil && m.Source.Format != "" && m.Source.Format != "pmpi"
		for _, r := range m.Ranks {
			if r.ExitStatus != nil {
				in.ExitStatus[r.Rank] = *r.ExitStatus
			}
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		problems = append(problems, err)
	}
	fl, ps := trace.ReadInFlightDir(dir)
	in.InFlight = fl
	problems = append(problems, ps...)

	var mu sync.Mutex
	err = Events(ctx, dir, doctorColumns, func(_, rank int) func(*trace.Batch) {
		mu.Lock()
		in.Streams[rank] = true
		mu.Unlock()
		var calls []analyze.DoctorCall
		return func(b *trace.Batch) {
			for i := 0; i < b.Len; i++ {
				if b.Kind[i] != trace.KindCollective {
					continue
				}
				calls = append(calls, analyze.DoctorCall{Comm: b.Comms[b.Comm[i]], Seq: b.Seq[i], Op: b.Names[b.Name[i]],
					Bytes: b.Bytes[i], DType: b.DTypes[b.DType[i]], Root: int(b.Root[i])})
			}
			mu.Lock()
			in.Calls[rank] = calls
			mu.Unlock()
		}
	})
	if err != nil {
		if len(fl) == 0 {
			return in, problems, err
		}
		problems = append(problems, err)
	}
	return in, problems, nil
}
