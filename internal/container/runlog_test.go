package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// The run's approval key (only the runner may know it) is never written to
// the run log.
func TestRunLogLeavesOutTheApprovalKey(t *testing.T) {
	dir := t.TempDir()
	rl := OpenRunLog(zerolog.Nop(), dir, time.Now())
	key := "0123456789abcdef0123456789abcdef"
	rl.Header(true, "messages", "", Spec{Group: "fam"}, ipc.RunInput{Prompt: "hi", Group: "fam", AssistantName: "Andy", ApprovalKey: key})
	rl.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "run-*.log"))
	if len(files) != 1 {
		t.Fatalf("run logs %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"prompt": "hi"`) || strings.Contains(string(b), key) {
		t.Errorf("run log:\n%s\nwant the input without the approval key", b)
	}
}
