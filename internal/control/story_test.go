package control

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// The trigger step says why a message did (not) wake the agent, for each
// of the router's reasons, and a bad or unknown message is a clear error.
func TestStoryTriggerReasons(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	a := &Admin{DB: db, AssistantName: "Andy", Timezone: time.UTC}
	for _, g := range []GroupAdd{{Chat: "local:main", Name: "main", IsMain: true}, {Chat: "local:fam", Name: "fam", Folder: "fam"}} {
		if _, err := a.AddGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	put := func(m store.Message) int64 {
		t.Helper()
		m.ExternalID = strings.ReplaceAll(m.Text, " ", "-")
		id, ok, err := db.Messages.Insert(ctx, m)
		if err != nil || !ok {
			t.Fatalf("insert %q: %v %v", m.Text, ok, err)
		}
		return int64(id)
	}
	now := time.Now()
	tests := []struct {
		name string
		m    store.Message
		woke bool
		why  string
	}{
		{"trigger word", store.Message{Chat: "local:fam", Sender: "alice", Text: "@Andy hi"}, true, "starts with the trigger @Andy"},
		{"mention", store.Message{Chat: "local:fam", Sender: "alice", Text: "hey you", Mentioned: true}, true, "mentions the assistant"},
		{"no trigger", store.Message{Chat: "local:fam", Sender: "alice", Text: "just talk"}, false, "no trigger word"},
		{"late backlog", store.Message{Chat: "local:fam", Sender: "alice", Text: "@Andy old one", Late: true, SentAt: now.Add(-time.Hour)}, false, "late backlog"},
		{"sender not allowed", store.Message{Chat: "local:main", Sender: "local:mallory", Text: "do it", NotAllowed: true}, false, "sender not allowed"},
		{"main group", store.Message{Chat: "local:main", Sender: "bob", Text: "anything"}, true, "main group needs no trigger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := put(tt.m)
			st, err := a.Story(ctx, strconv.FormatInt(id, 10), "")
			if err != nil {
				t.Fatal(err)
			}
			if st.Woke != tt.woke || !strings.Contains(st.Why, tt.why) {
				t.Errorf("woke %v, why %q; want %v, %q", st.Woke, st.Why, tt.woke, tt.why)
			}
			if st.Message.StoredAt == nil || st.Steps[0].Step != "received" {
				t.Errorf("story %+v; want a stored time and received first", st)
			}
		})
	}
	if st, err := a.Story(ctx, "last", "fam"); err != nil || st.Message.Text != "@Andy old one" {
		t.Errorf("last of fam (by folder): %q, %v; want the late message", st.Message.Text, err)
	}
	if st, err := a.Story(ctx, "", ""); err != nil || st.Message.Text != "anything" {
		t.Errorf("last of any chat: %q, %v; want the newest message", st.Message.Text, err)
	}
	if _, err := a.Story(ctx, "1", "local:main"); !errors.Is(err, ErrInvalid) {
		t.Errorf("message 1 asked as main's: %v; want ErrInvalid (it is fam's)", err)
	}
	if _, err := a.Story(ctx, "9999", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("message 9999: %v; want ErrNotFound", err)
	}
	if _, err := a.Story(ctx, "x; DROP TABLE messages", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("a bad id: %v; want ErrInvalid", err)
	}
}
