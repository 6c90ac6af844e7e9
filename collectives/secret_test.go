package collectives

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

// The user's secret file is made on first use, private to the user, and
// read back the same afterwards.
func TestUserSecretFile(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	s, path, err := UserSecret()
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(cfg, "commprof", "secret") || len(s) != 64 {
		t.Fatalf("secret %q in %s", s, path)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the secret file: %v, mode %v; want 0600", err, st.Mode())
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the secret's directory: %v, mode %v; want 0700", err, st.Mode())
	}
	again, _, err := UserSecret()
	if err != nil || again != s {
		t.Fatalf("read again: %q, %v; want %q", again, err, s)
	}
}

// A secret file others can read is refused, not used.
func TestUserSecretReadableByOthers(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	path := filepath.Join(cfg, "commprof", "secret")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("ab", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	s, _, err := UserSecret()
	if err == nil || !strings.Contains(err.Error(), "can be read by others") || !strings.Contains(err.Error(), "chmod 600") || s != "" {
		t.Fatalf("a 0644 secret file: %q, %v", s, err)
	}
	_, ok, err := JobFromEnv(mapEnv(map[string]string{"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}))
	if !ok || err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a job beside a 0644 secret file: %v", err)
	}
}

// Ranks on one host starting at once all make the file: one is kept, and
// every rank reads that one.
func TestUserSecretMadeByManyAtOnce(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	const n = 16
	secrets := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			secrets[i], _, errs[i] = UserSecret()
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || secrets[i] != secrets[0] || secrets[0] == "" {
			t.Fatalf("rank %d read %q (%v), rank 0 %q", i, secrets[i], errs[i], secrets[0])
		}
	}
	ents, _ := os.ReadDir(filepath.Join(cfg, "commprof"))
	if len(ents) != 1 || ents[0].Name() != "secret" {
		t.Errorf("the secret's directory holds %v", ents)
	}
}

// Without a home to keep the file in (none, or one where it cannot be
// made), a job of several ranks gets no empty secret: it stops, saying how
// to give it one. A rank alone needs none.
func TestNoSecretWithoutAHome(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]map[string]string{
		"no home":           {"HOME": "", "XDG_CONFIG_HOME": ""},
		"an unwritable one": {"XDG_CONFIG_HOME": filepath.Join(file, "config")}, // under a file: nothing can be made there, even by root
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			if s, _, err := UserSecret(); err == nil || s != "" || !strings.Contains(err.Error(), "no job secret") || !strings.Contains(err.Error(), envnames.Secret) {
				t.Fatalf("UserSecret: %q, %v", s, err)
			}
			launcher := map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4", envnames.Coord: "127.0.0.1:1"}
			if _, ok, err := JobFromEnv(mapEnv(launcher)); !ok || err == nil || !strings.Contains(err.Error(), "rank 1 of 4 without "+envnames.Secret) {
				t.Fatalf("a rank of 4: %v", err)
			}
			launcher[envnames.Secret] = "given"
			if job, _, err := JobFromEnv(mapEnv(launcher)); err != nil || job.Secret != "given" || job.SecretFrom != envnames.Secret {
				t.Fatalf("a rank of 4 given %s: %+v, %v", envnames.Secret, job, err)
			}
			alone := map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1"}
			if _, _, err := JobFromEnv(mapEnv(alone)); err != nil {
				t.Fatalf("a rank alone: %v", err)
			}
		})
	}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
