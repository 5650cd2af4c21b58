package store

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"
)

func TestOutboxExternalIDStable(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	it, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "1@g.us", Text: "hello", Origin: OriginReply, Group: "family"})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^3EB0[0-9A-F]{16}$`).MatchString(it.ExternalID) {
		t.Errorf("ExternalID %q; want 3EB0 and 16 upper-case hex digits", it.ExternalID)
	}
	if it.State != OutboxPending || it.ID == 0 || !it.CreatedAt.Equal(t0) {
		t.Errorf("enqueued %+v; want pending with an id, created %s", it, t0)
	}
	for i := range 3 {
		if err := db.Outbox.MarkAttempt(ctx, it.ID, "not connected"); err != nil {
			t.Fatal(err)
		}
		got, err := db.Outbox.Get(ctx, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ExternalID != it.ExternalID || got.Attempts != i+1 || got.LastError != "not connected" || got.State != OutboxPending {
			t.Errorf("after attempt %d: %+v; want same ExternalID %s, attempts %d, pending", i+1, got, it.ExternalID, i+1)
		}
	}
	pending, _ := db.Outbox.Pending(ctx, 0)
	if len(pending) != 1 || pending[0].ExternalID != it.ExternalID {
		t.Errorf("PendingOutbox = %+v; want the row with its original ExternalID", pending)
	}
	other, _ := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "1@g.us", Text: "second", Origin: OriginTool})
	if other.ExternalID == it.ExternalID {
		t.Errorf("two rows share ExternalID %s", it.ExternalID)
	}
}

func TestOutboxLifecycle(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	var ids []OutboxID
	for _, text := range []string{"one", "two", "three"} {
		it, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "local:main", Text: text, Origin: OriginNotice})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	pending, _ := db.Outbox.Pending(ctx, 2)
	if len(pending) != 2 || pending[0].Text != "one" || pending[1].Text != "two" {
		t.Fatalf("PendingOutbox(2) = %+v; want one, two", pending)
	}

	sentAt := t0.Add(time.Second)
	if err := db.Outbox.MarkSent(ctx, ids[0], "SERVER-ID", sentAt); err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox.MarkFailed(ctx, ids[1], "chat not found"); err != nil {
		t.Fatal(err)
	}
	// Sent wins over a late failure.
	if err := db.Outbox.MarkFailed(ctx, ids[0], "late"); err != nil {
		t.Fatal(err)
	}
	first, _ := db.Outbox.Get(ctx, ids[0])
	if first.State != OutboxSent || first.SentID != "SERVER-ID" || first.SentAt == nil || !first.SentAt.Equal(sentAt) || first.FailedAt != nil {
		t.Errorf("sent row %+v; want sent at %s as SERVER-ID", first, sentAt)
	}
	pending, _ = db.Outbox.Pending(ctx, 0)
	if len(pending) != 1 || pending[0].Text != "three" {
		t.Errorf("PendingOutbox after send and failure = %+v; want only three", pending)
	}

	fails, _ := db.Outbox.RecentFailures(ctx, t0.Add(-time.Hour), 10)
	if len(fails) != 1 || fails[0].ID != ids[1] || fails[0].LastError != "chat not found" || fails[0].Attempts != 1 {
		t.Errorf("RecentFailures = %+v; want row two, chat not found, 1 attempt", fails)
	}
	if fails, _ := db.Outbox.RecentFailures(ctx, t0.Add(time.Minute), 10); len(fails) != 0 {
		t.Errorf("RecentFailures since later = %d rows; want 0", len(fails))
	}

	for _, tt := range []struct {
		id   string
		want bool
	}{{first.ExternalID, true}, {"SERVER-ID", true}, {"SOMEONE-ELSE", false}, {"", false}} {
		if got, err := db.Outbox.IsOwn(ctx, "local:main", tt.id); err != nil || got != tt.want {
			t.Errorf("IsOwnMessage(%q) = %v, %v; want %v", tt.id, got, err, tt.want)
		}
	}
	if got, _ := db.Outbox.IsOwn(ctx, "local:other", first.ExternalID); got {
		t.Errorf("IsOwnMessage in another chat = true; want false")
	}

	for name, err := range map[string]error{
		"MarkSent":    db.Outbox.MarkSent(ctx, 999, "", t0),
		"MarkAttempt": db.Outbox.MarkAttempt(ctx, 999, "x"),
		"MarkFailed":  db.Outbox.MarkFailed(ctx, 999, "x"),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s(unknown) = %v; want ErrNotFound", name, err)
		}
	}
	if _, err := db.Outbox.Get(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetOutbox(unknown) = %v; want ErrNotFound", err)
	}
}

func TestEnqueueOutboxRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	for _, it := range []OutboxItem{
		{Text: "x", Origin: OriginReply},
		{Chat: "c", Text: "  ", Origin: OriginReply},
		{Chat: "c", Text: "x", Origin: "carrier-pigeon"},
	} {
		if _, err := db.Outbox.Enqueue(ctx, it); !errors.Is(err, ErrInvalid) {
			t.Errorf("EnqueueOutbox(%+v) = %v; want ErrInvalid", it, err)
		}
	}
	if n := count(t, db, "outbox", ""); n != 0 {
		t.Errorf("%d outbox rows; want 0", n)
	}
}

// A reply is committed together with the session and usage, or not at all.
func TestReplyTransaction(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	commit := func(text string, fail error) error {
		return db.Tx(ctx, func(tx *Tx) error {
			if _, err := tx.Outbox.Enqueue(ctx, OutboxItem{Chat: "local:main", Group: "main", Text: text, Origin: OriginReply}); err != nil {
				return err
			}
			if err := tx.Sessions.Set(ctx, Session{Folder: "main", SessionID: "s-" + text, LastUUID: "u-" + text}); err != nil {
				return err
			}
			if err := tx.Usage.Add(ctx, Usage{Folder: "main", SessionID: "s-" + text, CostUSD: 0.25, InputTokens: 10, OutputTokens: 5}); err != nil {
				return err
			}
			return fail
		})
	}
	if err := commit("one", nil); err != nil {
		t.Fatal(err)
	}
	if err := commit("two", errors.New("crash")); err == nil {
		t.Fatal("failing transaction returned nil")
	}
	s, _ := db.Sessions.Get(ctx, "main")
	if s.SessionID != "s-one" || s.LastUUID != "u-one" {
		t.Errorf("session %+v; want s-one/u-one", s)
	}
	if n := count(t, db, "outbox", ""); n != 1 {
		t.Errorf("%d outbox rows; want 1", n)
	}
	if cost, _ := db.Usage.ReportedCostSince(ctx, t0.Add(-time.Hour)); cost != 0.25 {
		t.Errorf("CostSince = %v; want 0.25", cost)
	}
	if cost, _ := db.Usage.ReportedCostSince(ctx, t0.Add(time.Hour)); cost != 0 {
		t.Errorf("CostSince(later) = %v; want 0", cost)
	}
}

func TestSessionsAndCursors(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if s, err := db.Sessions.Get(ctx, "main"); err != nil || s.SessionID != "" || s.Folder != "main" {
		t.Errorf("GetSession with none = %+v, %v; want empty", s, err)
	}
	if err := db.Sessions.Set(ctx, Session{Folder: "main", SessionID: "abc", LastUUID: "u1"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Sessions.Set(ctx, Session{Folder: "main", SessionID: "abc", LastUUID: "u2"}); err != nil {
		t.Fatal(err)
	}
	if s, _ := db.Sessions.Get(ctx, "main"); s.LastUUID != "u2" {
		t.Errorf("LastUUID %q; want u2", s.LastUUID)
	}
	if err := db.Sessions.Clear(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if s, _ := db.Sessions.Get(ctx, "main"); s.SessionID != "" {
		t.Errorf("after ClearSession: %+v; want no session", s)
	}

	if c, err := db.Sessions.Cursor(ctx, "main"); err != nil || c != 0 {
		t.Errorf("GetCursor with none = %d, %v; want 0", c, err)
	}
	for _, id := range []MessageID{10, 4} { // forward, then rolled back
		if err := db.Sessions.SetCursor(ctx, "main", id); err != nil {
			t.Fatal(err)
		}
		if c, _ := db.Sessions.Cursor(ctx, "main"); c != id {
			t.Errorf("GetCursor = %d; want %d", c, id)
		}
	}
	if err := db.Sessions.SetCursor(ctx, "main", -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetCursor(-1) = %v; want ErrInvalid", err)
	}
}

// A row keeps the name and size of the file it carries (set at enqueue or
// in the committing transaction), and Outbox.Files counts one group's files
// and their bytes since a time.
func TestOutboxFiles(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	now := t0
	db.now = func() time.Time { return now }
	enqueue := func(folder Folder, name string, size int64) OutboxItem {
		t.Helper()
		it, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "1@g.us", Text: "x", Origin: OriginTool, Group: folder, FileName: name, FileSize: size})
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	enqueue("family", "a.pdf", 100)
	enqueue("family", "", 0) // no file
	enqueue("work", "b.pdf", 1000)
	now = t0.Add(30 * time.Minute)
	it := enqueue("family", "", 0)
	if err := db.Tx(ctx, func(tx *Tx) error { return tx.Outbox.SetFile(ctx, it.ID, "c.png", 50) }); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Outbox.Get(ctx, it.ID); err != nil || got.FileName != "c.png" || got.FileSize != 50 {
		t.Errorf("row after SetOutboxFile: %q %d (%v); want c.png, 50", got.FileName, got.FileSize, err)
	}
	for _, c := range []struct {
		since time.Time
		files int
		bytes int64
	}{{t0, 2, 150}, {t0.Add(time.Minute), 1, 50}, {t0.Add(time.Hour), 0, 0}} {
		files, bytes, err := db.Outbox.Files(ctx, "family", c.since)
		if err != nil || files != c.files || bytes != c.bytes {
			t.Errorf("OutboxFiles(family, %s) = %d, %d, %v; want %d, %d", c.since.Format(time.TimeOnly), files, bytes, err, c.files, c.bytes)
		}
	}
	if _, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "1@g.us", Text: "x", Origin: OriginTool, FileName: "d", FileSize: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative file size: %v; want ErrInvalid", err)
	}
}
