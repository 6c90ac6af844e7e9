// Package damage writes a corpus of damaged run directories, the way
// careless users, dying ranks, full disks and hostile files leave them, so
// that tests can put every reading command through all of them. It is not
// hand-picked: each kind of damage is applied at offsets and values the
// generator chooses from a seed.
package damage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/commprof/commprof/trace"
)

// Case is one damaged run directory and how every command that reads a
// run must treat it.
type Case struct {
	Name string // what was done, e.g. "cut rank 1 at byte 212"
	Dir  string
	Want Outcome
	// Says are what the messages about the damage must contain: the file
	// and what is wrong with it. A Warned case's warnings hold each of
	// them; a Refused case's error does; any warning a Survives case gets
	// does.
	Says []string
	// SeenBy says which commands can see the damage; the others must
	// read the run, warned or not.
	SeenBy Readers
}

// Readers are the commands that read a run, by what they read of it.
type Readers int

const (
	AllReaders     Readers = iota
	SummaryReaders         // those that summarize the run (stats, report, diff, predict, serve)
	EventReaders           // those that decode every column of every event (dump, export)
)

// Outcome is how a command that reads a run must treat a case.
type Outcome int

const (
	// Clean: read as a whole, without a warning (odd values a run can
	// hold are not damage).
	Clean Outcome = iota
	// Warned: read, with a warning that says what is wrong, and where;
	// the rest of the run is read.
	Warned
	// Refused: not read, with an error (exit 1) that says why.
	Refused
	// Survives: read, with or without a warning: the damage may fall
	// where no check can tell it from a real value (a flipped bit in a
	// duration), or in a column some commands do not decode.
	Survives
)

func (o Outcome) String() string {
	return [...]string{"clean", "warned", "refused", "survives"}[o]
}

// Markers: values a generated stream holds in exactly one row each, so
// that the uncompressed stream can be patched in that row's column. Each
// is a value a run can hold, so that only the patched column is wrong.
const (
	markDur   = int64(0x3151_5151_5151_5151) // under 2^62 ns
	markBytes = int64(0x6262_6262_6262_6262)
	markStart = int64(0x0737_3737_3737_3737)
)

// Corpus writes the damaged runs under dst and returns them. seed picks
// the offsets and values.
func Corpus(dst string, seed uint64) ([]Case, error) {
	g := &gen{dst: dst, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	good, err := g.goodRun()
	if err != nil {
		return nil, err
	}
	g.add("good", good, nil, Clean)
	g.streamCuts(good)
	g.bitFlips(good)
	g.values(good[trace.ManifestFile])
	g.manifests(good)
	g.files(good)
	g.farRanks(good)
	return g.cases, g.err
}

type gen struct {
	dst   string
	rng   *rand.Rand
	cases []Case
	n     int
	err   error
}

// files of a run: name -> content.
type run map[string][]byte

// add writes run r, changed by f, as a case that commands must treat as
// want says, with messages that contain says.
func (g *gen) add(name string, r run, f func(dir string) error, want Outcome, says ...string) {
	if g.err != nil {
		return
	}
	g.n++
	dir := filepath.Join(g.dst, fmt.Sprintf("case-%03d", g.n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		g.err = err
		return
	}
	for n, b := range r {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			g.err = err
			return
		}
	}
	if f != nil {
		if err := f(dir); err != nil {
			g.err = fmt.Errorf("damage %q: %w", name, err)
			return
		}
	}
	g.cases = append(g.cases, Case{Name: name, Dir: dir, Want: want, Says: says})
}

func clone(r run) run {
	out := run{}
	for k, v := range r {
		out[k] = bytes.Clone(v)
	}
	return out
}

// events are a small training-like run: every kind, messages between
// ranks, steps, marks; row 7 of rank 1 carries the markers.
func events(rank, world int) []trace.Event {
	var evs []trace.Event
	t := int64(1000)
	for step := range 4 {
		st := t
		evs = append(evs, trace.Event{Rank: int32(rank), Kind: trace.KindCompute, Name: "forward", Start: t, Dur: 500, Peer: -1, Seq: -1, Step: int32(step), Root: -1, Chunk: -1, Comm: "world"})
		t += 600
		seq := int64(step)
		evs = append(evs, trace.Event{Rank: int32(rank), Kind: trace.KindCollective, Name: "allreduce", Start: t, Dur: 800, Bytes: 4096, Peer: -1, Seq: seq, Step: int32(step), Algo: "ring", DType: "float32", Root: -1, Chunk: -1, Comm: "world"})
		for c := range 2 {
			peer := int32((rank + 1) % world)
			from := int32((rank + world - 1) % world)
			evs = append(evs,
				trace.Event{Rank: int32(rank), Kind: trace.KindSend, Name: "allreduce", Start: t + int64(c)*300, Dur: 100, Bytes: 2048, Peer: peer, Seq: seq, Step: int32(step), Algo: "ring", DType: "float32", Root: -1, Chunk: int32(c), Comm: "world"},
				trace.Event{Rank: int32(rank), Kind: trace.KindRecv, Name: "allreduce", Start: t + int64(c)*300, Dur: 150, Wait: 20, Bytes: 2048, Peer: from, Seq: seq, Step: int32(step), Algo: "ring", DType: "float32", Root: -1, Chunk: int32(c), Comm: "world"})
		}
		t += 900
		evs = append(evs, trace.Event{Rank: int32(rank), Kind: trace.KindStep, Name: "step", Start: st, Dur: t - st, Peer: -1, Seq: -1, Step: int32(step), Root: -1, Chunk: -1})
	}
	evs = append(evs, trace.Event{Rank: int32(rank), Kind: trace.KindMark, Name: "test_accuracy", Start: t, Value: 0.9, Peer: -1, Seq: -1, Step: 3, Root: -1, Chunk: -1})
	return evs
}

// stream encodes events as rank's stream of a world, uncompressed so that
// its values can be patched in place.
func stream(rank, world int, evs []trace.Event) ([]byte, error) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.RankInfo{Rank: rank, WorldSize: world, Host: "damaged", PID: 1}, trace.WriterOptions{Codec: trace.None})
	if err != nil {
		return nil, err
	}
	// Two batches, so that cuts fall between and inside them.
	half := len(evs) / 2
	if err := w.Write(evs[:half]); err != nil {
		return nil, err
	}
	if err := w.Write(evs[half:]); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

const world = 3

func (g *gen) goodRun() (run, error) {
	r := run{}
	for rank := range world {
		b, err := stream(rank, world, events(rank, world))
		if err != nil {
			return nil, err
		}
		r[trace.RankFile(rank)] = b
	}
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, Name: "damaged", WorldSize: world, Status: trace.StatusComplete,
		Codec: trace.None, Config: map[string]string{"batch_size": "8"}, Metrics: trace.Metrics{"test_accuracy": 0.9}}
	for rank := range world {
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: rank, Host: "damaged", File: trace.RankFile(rank)})
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	r[trace.ManifestFile] = b
	return r, nil
}

// streamCuts cuts a stream at the start, inside its schema, at a random
// point, and one byte short of its end.
func (g *gen) streamCuts(good run) {
	name := trace.RankFile(1)
	n := len(good[name])
	for _, at := range []int{0, 6, 300, g.rng.IntN(n), n / 2, n - 9, n - 1} {
		r := clone(good)
		r[name] = r[name][:at]
		g.add(fmt.Sprintf("rank 1 cut at byte %d of %d", at, n), r, nil, Warned, name, "was cut")
	}
}

// bitFlips flips bytes and overwrites ranges at random places.
func (g *gen) bitFlips(good run) {
	for i := range 12 {
		r := clone(good)
		name := trace.RankFile(g.rng.IntN(world))
		b := r[name]
		at := g.rng.IntN(len(b))
		what := ""
		switch i % 3 {
		case 0:
			b[at] ^= byte(1 << g.rng.IntN(8))
			what = "a bit flipped"
		case 1:
			end := min(len(b), at+64)
			for j := at; j < end; j++ {
				b[j] = 0xff
			}
			what = "64 bytes of 0xff"
		case 2:
			end := min(len(b), at+16)
			for j := at; j < end; j++ {
				b[j] = byte(g.rng.IntN(256))
			}
			what = "16 random bytes"
		}
		g.add(fmt.Sprintf("%s: %s at byte %d", name, what, at), r, nil, Survives, name)
	}
}

// values writes streams whose values a run cannot hold: each patched
// into the row that carries its column's marker.
func (g *gen) values(manifest []byte) {
	// Each value is one a run cannot hold, but for bytes' MaxInt64: a
	// run can say so, and readers must cope. The summary does not decode
	// the rank column (the stream's metadata says its rank), so only the
	// commands that decode every column see a bad one.
	patch := []struct {
		what   string
		mark   []byte
		values [][]byte
		want   Outcome
	}{
		{"peer", nil, [][]byte{le32(1_000_000_000), le32(-7), le32(world)}, Warned},
		{"rank", nil, [][]byte{le32(1_000_000_000), le32(2)}, Warned},
		{"dur_ns", le64(markDur), [][]byte{le64(-5), le64(math.MaxInt64), le64(math.MinInt64)}, Warned},
		{"bytes", le64(markBytes), [][]byte{le64(-1)}, Warned},
		{"bytes", le64(markBytes), [][]byte{le64(math.MaxInt64)}, Clean},
		{"start_ns", le64(markStart), [][]byte{le64(math.MaxInt64), le64(math.MinInt64)}, Warned},
	}
	for _, p := range patch {
		for _, v := range p.values {
			evs := events(1, world)
			m := &evs[7]
			m.Dur, m.Bytes, m.Start = markDur, markBytes, markStart
			// The rank and peer markers are written as valid values the
			// writer accepts, then patched: the writer refuses bad ones.
			b, err := stream(1, world, evs)
			if err != nil {
				g.err = err
				return
			}
			if p.what == "peer" || p.what == "rank" {
				// Row 7's rank is 1 and its peer 2 (a send); patch the
				// first of them after the row's own markers' batch start.
				// Row 3 is a recv: its peer sizes the traffic matrix.
				if b, err = patchInt32Column(b, p.what, 3, v); err != nil {
					g.err = err
					return
				}
			} else {
				i := bytes.Index(b, p.mark)
				if i < 0 || bytes.Count(b, p.mark) != 1 {
					g.err = fmt.Errorf("damage: marker of %s not found once", p.what)
					return
				}
				copy(b[i:], v)
			}
			// The damage must be there, and be what the case says: a
			// reader of every column finds that column wrong, or (a value
			// a run can hold) nothing.
			if err := check(b, p.what, p.want); err != nil {
				g.err = fmt.Errorf("damage: rank 1's %s patched to %d: %w", p.what, decode(v), err)
				return
			}
			r := run{trace.ManifestFile: manifest}
			for rank := range world {
				if rank == 1 {
					r[trace.RankFile(rank)] = b
					continue
				}
				sb, err := stream(rank, world, events(rank, world))
				if err != nil {
					g.err = err
					return
				}
				r[trace.RankFile(rank)] = sb
			}
			var says []string
			if p.want != Clean {
				says = []string{trace.RankFile(1), "column " + p.what}
			}
			g.add(fmt.Sprintf("rank 1's %s is %d in a row", p.what, decode(v)), r, nil, p.want, says...)
			if p.what == "rank" {
				g.seenBy(EventReaders)
			}
		}
	}
}

// check reads a patched stream with every column decoded: it must stop at
// column col, or read to the end when want is Clean.
func check(b []byte, col string, want Outcome) error {
	dir, err := os.MkdirTemp("", "damage-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, trace.RankFile(1))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	_, _, err = trace.ReadFile(path)
	switch {
	case want == Clean && err != nil:
		return fmt.Errorf("the stream does not read: %w", err)
	case want != Clean && (err == nil || !strings.Contains(err.Error(), "column "+col+",")):
		return fmt.Errorf("a reader finds %v, not the column %s", err, col)
	}
	return nil
}

// patchInt32Column replaces row row's value of an int32 column in the
// first batch of an uncompressed stream. The batch's int32 columns are
// found by their known values: the rank column is all ones, and the peer
// column follows the events' peers.
func patchInt32Column(b []byte, col string, row int, v []byte) ([]byte, error) {
	evs := events(1, world)
	half := len(evs) / 2
	var want []byte
	for _, e := range evs[:half] {
		switch col {
		case "rank":
			want = append(want, le32(e.Rank)...)
		case "peer":
			want = append(want, le32(e.Peer)...)
		}
	}
	i := bytes.Index(b, want)
	if i < 0 {
		return nil, fmt.Errorf("damage: the %s column of rank 1's first batch is not in the stream (has the writer's layout changed?)", col)
	}
	copy(b[i+4*row:], v)
	return b, nil
}

// manifests damages run.json.
func (g *gen) manifests(good run) {
	bad := []struct {
		name string
		json string
		want Outcome
		says []string
	}{
		{"run.json empty", "", Refused, []string{"run.json", "not a run manifest"}},
		{"run.json is not JSON", "not json {", Refused, []string{"run.json", "not a run manifest"}},
		{"run.json of another format", `{"format_version": 2, "world_size": 3}`, Refused, []string{"run.json", "format version 2"}},
		{"run.json says 1e8 ranks", `{"format_version": 1, "world_size": 100000000}`, Refused, []string{"run.json", "world_size 100000000"}},
		{"run.json says 2^62 ranks", `{"format_version": 1, "world_size": 4611686018427387904}`, Refused, []string{"run.json", "world_size 4611686018427387904"}},
		{"run.json says -5 ranks", `{"format_version": 1, "world_size": -5}`, Refused, []string{"run.json", "world_size -5"}},
		{"run.json says 1 rank", `{"format_version": 1, "world_size": 1}`, Warned, []string{"stream of rank 2", "run.json says the world has 1 ranks"}},
		{"run.json says 65536 ranks", `{"format_version": 1, "world_size": 65536}`, Warned, []string{"65533 ranks (3-65535) have no stream"}},
		{"run.json says 2^20-1 ranks", `{"format_version": 1, "world_size": 1048575}`, Warned, []string{"1048572 ranks (3-1048574) have no stream"}},
		{"run.json says running", `{"format_version": 1, "world_size": 3, "status": "running"}`, Clean, nil},
		{"run.json with NaN-like nulls", `{"format_version": 1, "world_size": 3, "metrics": {"loss": null}}`, Clean, nil},
		{"run.json with a huge string", `{"format_version": 1, "world_size": 3, "name": "` + strings.Repeat("x", 1<<20) + `"}`, Clean, nil},
		{"run.json with bad clocks", `{"format_version": 1, "world_size": 3, "ranks": [{"rank": 1, "clock_offset_ns": 9223372036854775807, "clock_drift": 1e300}]}`,
			Warned, []string{"run.json", "rank 1's clock_offset_ns 9223372036854775807"}},
	}
	for _, c := range bad {
		r := clone(good)
		r[trace.ManifestFile] = []byte(c.json)
		g.add(c.name, r, nil, c.want, c.says...)
	}
	r := clone(good)
	delete(r, trace.ManifestFile)
	g.add("no run.json", r, nil, Warned, "has no run.json")
}

// farRanks writes runs whose rank numbers are far beyond how many ranks
// they have: tables sized by rank would grow with one value.
func (g *gen) farRanks(good run) {
	const big = trace.MaxWorldSize
	evs := events(1, world)
	evs = append(evs, trace.Event{Rank: 1, Kind: trace.KindRecv, Name: "allreduce", Start: 9000, Dur: 100, Bytes: 64, Peer: big - 1, Seq: 3, Step: 3,
		Algo: "ring", DType: "float32", Root: -1, Chunk: 0, Comm: "world"})
	b, err := stream(1, big, evs)
	if err != nil {
		g.err = err
		return
	}
	r := clone(good)
	r[trace.RankFile(1)] = b
	g.add("rank 1 hears from rank 2^20-1", r, nil, Warned, trace.RankFile(1), "column peer names rank 1048575", "left out of the traffic matrices")
	g.seenBy(SummaryReaders)

	far := big - 2
	r = run{trace.ManifestFile: []byte(`{"format_version": 1, "world_size": 1048575}`)}
	for _, rank := range []int{0, far} {
		b, err := stream(rank, big-1, events(rank, big-1))
		if err != nil {
			g.err = err
			return
		}
		r[trace.RankFile(rank)] = b
	}
	g.add("streams of ranks 0 and 2^20-2 alone", r, nil, Warned, trace.RankFile(far), "column rank is 1048574", "left out of the traffic matrices")
	g.seenBy(SummaryReaders)
}

// seenBy says that only some commands see the damage of the last case.
func (g *gen) seenBy(r Readers) {
	if n := len(g.cases); n > 0 {
		g.cases[n-1].SeenBy = r
	}
}

// files adds files that are not what their names say.
func (g *gen) files(good run) {
	r := clone(good)
	r["rank-000001.arrows"] = good[trace.RankFile(1)]
	g.add("two files for rank 1", r, nil, Warned, "rank-000001.arrows", "second stream of rank 1")
	r = clone(good)
	r["rank-99999999.arrows"] = good[trace.RankFile(1)]
	g.add("a file for rank 99999999", r, nil, Warned, "rank-99999999.arrows", "beyond the 1048576 ranks")
	r = clone(good)
	r[trace.RankFile(2)] = good[trace.RankFile(1)]
	g.add("rank 1's stream named rank 2's", r, nil, Warned, trace.RankFile(2), "holds rank 1's events")
	g.add("a FIFO named like rank 5's stream", clone(good), func(dir string) error {
		return syscall.Mkfifo(filepath.Join(dir, trace.RankFile(5)), 0o644)
	}, Warned, trace.RankFile(5), "not a regular file")
	g.add("a directory named like rank 6's stream", clone(good), func(dir string) error {
		return os.Mkdir(filepath.Join(dir, trace.RankFile(6)), 0o755)
	}, Warned, trace.RankFile(6), "not a regular file")
	r = clone(good)
	delete(r, trace.RankFile(1))
	g.add("rank 1's stream a symbolic link", r, func(dir string) error {
		elsewhere := filepath.Join(g.dst, "linked", filepath.Base(dir)+"-rank1")
		if err := os.MkdirAll(filepath.Dir(elsewhere), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(elsewhere, good[trace.RankFile(1)], 0o644); err != nil {
			return err
		}
		return os.Symlink(elsewhere, filepath.Join(dir, trace.RankFile(1)))
	}, Clean)
	r = clone(good)
	delete(r, trace.RankFile(1))
	g.add("rank 1's stream a symbolic link to a FIFO", r, func(dir string) error {
		fifo := filepath.Join(g.dst, "linked", filepath.Base(dir)+"-fifo")
		if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
			return err
		}
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			return err
		}
		return os.Symlink(fifo, filepath.Join(dir, trace.RankFile(1)))
	}, Warned, trace.RankFile(1), "not a regular file")
	r = clone(good)
	delete(r, trace.ManifestFile)
	g.add("run.json is a FIFO", r, func(dir string) error {
		return syscall.Mkfifo(filepath.Join(dir, trace.ManifestFile), 0o644)
	}, Refused, "run.json", "not a regular file")
	r = clone(good)
	r[trace.RankFile(0)] = []byte(`{"traceEvents": []}`)
	g.add("rank 0's stream is JSON", r, nil, Warned, trace.RankFile(0), "not a commprof trace")
	r = run{trace.ManifestFile: good[trace.ManifestFile]}
	g.add("no streams", r, nil, Refused, "holds no rank-NNNNN.arrows streams")
	r = clone(good)
	for rank := range world {
		r[trace.RankFile(rank)] = []byte(`{"traceEvents": []}`)
	}
	g.add("no stream is a trace", r, nil, Refused, "not a commprof trace")
}

func le32(v int32) []byte {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(v))
	return b[:]
}

func le64(v int64) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	return b[:]
}

func decode(b []byte) int64 {
	if len(b) == 4 {
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}
