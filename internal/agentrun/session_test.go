package agentrun

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// A run that read the session the owner then ended stores no session any
// more, whatever its container reports; a run started after the end reads
// none and keeps the session it begins.
func TestEndedSessionIsNotStoredAgain(t *testing.T) {
	x, db := newRunner(t)
	ctx := context.Background()
	if err := db.Sessions.Set(ctx, store.Session{Folder: "fam", SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	fam := store.Group{Folder: "fam", Chat: "local:fam"}
	grp, run := beginFam(t, x, db, 5)
	grp.Lock()
	sess := x.resumeSession(ctx, zerolog.Nop(), grp, run, "fam")
	grp.Unlock()
	if sess.SessionID != "s1" {
		t.Fatalf("the run resumes %q; want s1", sess.SessionID)
	}
	old := &turn{x: x, log: zerolog.Nop(), g: fam, grp: grp, run: run, sess: sess, origin: store.OriginReply}

	grp.Lock()
	applied, err := x.EndSession(ctx, grp, "fam")
	grp.Unlock()
	if err != nil || applied != AppliesAtTurnEnd {
		t.Fatalf("EndSession with a busy run = %v, %v; want %v", applied, err, AppliesAtTurnEnd)
	}
	old.handle(ctx, ipc.Event{Type: ipc.EventSession, SessionID: "s1-again", Fresh: true})
	if s, err := db.Sessions.Get(ctx, "fam"); err != nil || s.SessionID != "" {
		t.Fatalf("session after the ended run reported one: %+v, %v; want none", s, err)
	}

	grp.Lock()
	next := x.BeginMessages(grp, &fakeQueueRun{}, fam, 6)
	fresh := x.resumeSession(ctx, zerolog.Nop(), grp, next, "fam")
	grp.Unlock()
	if fresh.SessionID != "" {
		t.Fatalf("the next run resumes %q; want no session", fresh.SessionID)
	}
	(&turn{x: x, log: zerolog.Nop(), g: fam, grp: grp, run: next, sess: fresh, origin: store.OriginReply}).
		handle(ctx, ipc.Event{Type: ipc.EventSession, SessionID: "s2"})
	old.handle(ctx, ipc.Event{Type: ipc.EventSession, SessionID: "s1-late", Fresh: true})
	if s, err := db.Sessions.Get(ctx, "fam"); err != nil || s.SessionID != "s2" {
		t.Errorf("session after the next run began one: %+v, %v; want s2", s, err)
	}
}
