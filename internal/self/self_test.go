package self

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary runs itself as the child: with SELF_HELPER set, it
// prints and exits as told.
func TestMain(m *testing.M) {
	switch os.Getenv("SELF_HELPER") {
	case "fail":
		fmt.Println("starting")
		fmt.Fprintln(os.Stderr, "commprof: the thing that went wrong")
		fmt.Println("   ")
		os.Exit(3)
	case "hang":
		fmt.Println("waiting")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "":
		os.Exit(m.Run())
	}
	os.Exit(0)
}

func TestRunSaysWhyTheChildFailed(t *testing.T) {
	t.Setenv("SELF_HELPER", "fail")
	var out strings.Builder
	err := Run(context.Background(), nil, &out)
	if err == nil || err.Error() != "exit status 3: commprof: the thing that went wrong" {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(out.String(), "starting\n") {
		t.Errorf("output %q", out.String())
	}
}

func TestRunInterruptsTheChildWhenCancelled(t *testing.T) {
	t.Setenv("SELF_HELPER", "hang")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := Run(ctx, nil, &strings.Builder{}); err == nil {
		t.Fatal("a cancelled run that waits a minute: no error")
	}
}
