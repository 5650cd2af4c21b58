package testcover

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const childEnv = "TESTCOVER_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(0) // an instrumented binary writes its counters on exit
	}
	os.Exit(m.Run())
}

// A child run with Env says nothing on stderr and, when the test counts
// coverage, leaves its counters where the test keeps its own.
func TestChildWritesCountersQuietly(t *testing.T) {
	env := Env(t)
	if testing.CoverMode() == "" {
		if env != nil || BuildFlags() != nil {
			t.Fatalf("without -cover: Env %v, BuildFlags %v; want none", env, BuildFlags())
		}
		t.Skip("run with -cover to check the child's counters")
	}
	if len(env) != 1 || !strings.HasPrefix(env[0], "GOCOVERDIR=") {
		t.Fatalf("Env = %v; want one GOCOVERDIR", env)
	}
	dir := strings.TrimPrefix(env[0], "GOCOVERDIR=")
	before, _ := filepath.Glob(filepath.Join(dir, "covcounters.*"))
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{childEnv + "=1", "PATH=" + os.Getenv("PATH")}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() != 0 {
		t.Fatalf("child: %v, stderr %q; want a quiet exit 0", err, stderr.String())
	}
	after, _ := filepath.Glob(filepath.Join(dir, "covcounters.*"))
	if len(after) <= len(before) {
		t.Errorf("%d counter files in %s after the child, %d before; want one more", len(after), dir, len(before))
	}
	if got := BuildFlags(); len(got) != 2 || got[0] != "-cover" || got[1] != "-covermode="+testing.CoverMode() {
		t.Errorf("BuildFlags() = %v; want -cover -covermode=%s", got, testing.CoverMode())
	}
}
