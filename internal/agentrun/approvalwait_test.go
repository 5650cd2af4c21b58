package agentrun

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// An approval_wait line is passed on only with the run's key: a line the
// runner did not write (another process of the container writing to its
// stdout) announces nothing.
func TestApprovalWaitNeedsTheRunsKey(t *testing.T) {
	x, db := newRunner(t)
	var got []string
	x.ApprovalWait = func(f store.Folder, toolUseID, tool string) { got = append(got, string(f)+" "+toolUseID+" "+tool) }
	grp, run := beginFam(t, x, db, 1)
	key := newApprovalKey()
	if len(key) != 32 || key == newApprovalKey() {
		t.Fatalf("key %q; want 128 random bits in hex", key)
	}
	tr := &turn{x: x, log: zerolog.Nop(), g: store.Group{Folder: "fam"}, grp: grp, run: run, origin: store.OriginReply, approvalKey: key}
	for _, k := range []string{"", "00000000000000000000000000000000", key[:31]} {
		tr.event(context.Background(), ipc.Event{Type: ipc.EventApprovalWait, ToolUseID: "toolu_1", Tool: "Bash", Key: k})
	}
	if len(got) != 0 {
		t.Fatalf("announced %q without the run's key", got)
	}
	tr.event(context.Background(), ipc.Event{Type: ipc.EventApprovalWait, ToolUseID: "toolu_1", Tool: "Bash", Key: key})
	if len(got) != 1 || got[0] != "fam toolu_1 Bash" {
		t.Fatalf("announced %q; want fam toolu_1 Bash", got)
	}
}
