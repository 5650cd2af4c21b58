package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestInsertMessageRedelivery(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "120363@g.us", "family")
	m := Message{Chat: "120363@g.us", ExternalID: "ABC", Sender: "alice@s.whatsapp.net", SenderName: "Alice", Text: "@Andy hi", SentAt: t0}

	id1, ins1, err := db.Messages.Insert(ctx, m)
	if err != nil || !ins1 || id1 == 0 {
		t.Fatalf("first delivery: id %d, inserted %v, err %v; want a new id", id1, ins1, err)
	}
	m.Text = "edited on the way"
	id2, ins2, err := db.Messages.Insert(ctx, m)
	if err != nil || ins2 || id2 != id1 {
		t.Fatalf("redelivery: id %d, inserted %v, err %v; want id %d, inserted false", id2, ins2, err, id1)
	}
	ms, err := db.Messages.After(ctx, "120363@g.us", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Text != "@Andy hi" {
		t.Fatalf("stored messages %+v; want the first delivery once", ms)
	}
	got := ms[0]
	want := Message{ID: id1, Chat: "120363@g.us", ExternalID: "ABC", Sender: "alice@s.whatsapp.net", SenderName: "Alice", Text: "@Andy hi", SentAt: t0}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
}

// Messages in the same second, or with an earlier timestamp than one already
// stored (offline sync), are all after the cursor, in arrival order.
func TestMessagesAfterArrivalOrder(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:main", "main")
	first, _, err := db.Messages.Insert(ctx, Message{Chat: "local:main", ExternalID: "0", Text: "before", SentAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	texts := []struct {
		id string
		at time.Time
	}{
		{"a", t0.Add(time.Second)},
		{"b", t0.Add(time.Second)},         // same second as a
		{"c", t0.Add(-time.Hour)},          // late, older timestamp
		{"d", t0.Add(time.Second + 500e6)}, // sub-second
	}
	for _, x := range texts {
		if _, _, err := db.Messages.Insert(ctx, Message{Chat: "local:main", ExternalID: x.id, Text: "msg " + x.id, SentAt: x.at}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := db.Messages.After(ctx, "local:main", first, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.ExternalID)
	}
	if fmt.Sprint(got) != "[a b c d]" {
		t.Errorf("MessagesAfter(cursor) = %v; want [a b c d]", got)
	}
	limited, _ := db.Messages.After(ctx, "local:main", first, 2)
	if len(limited) != 2 || limited[0].ExternalID != "a" {
		t.Errorf("MessagesAfter limit 2 = %v; want the first two, a and b", limited)
	}
	if latest, _ := db.Messages.LatestID(ctx, "local:main"); latest != ms[3].ID {
		t.Errorf("LatestMessageID = %d; want %d", latest, ms[3].ID)
	}
	if latest, _ := db.Messages.LatestID(ctx, "local:other"); latest != 0 {
		t.Errorf("LatestMessageID of an empty chat = %d; want 0", latest)
	}
}

func TestUnregisteredChatStoresNoText(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	chat := ChatID("999@g.us")
	if err := db.Chats.Upsert(ctx, Chat{ID: chat, Name: "Book club", Channel: "whatsapp", IsGroup: true}); err != nil {
		t.Fatal(err)
	}
	id, inserted, err := db.Messages.Insert(ctx, Message{Chat: chat, ExternalID: "X1", Sender: "bob", Text: "secret plans", SentAt: t0})
	if err != nil || inserted || id != 0 {
		t.Fatalf("InsertMessage in an unregistered chat: id %d, inserted %v, err %v; want 0, false, nil", id, inserted, err)
	}
	if n := count(t, db, "messages", ""); n != 0 {
		t.Errorf("%d messages stored; want 0", n)
	}
	if n := count(t, db, "messages", "text LIKE '%secret%'"); n != 0 {
		t.Errorf("the text was stored")
	}
	c, err := db.Chats.Get(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "Book club" || !c.IsGroup || !c.LastActivity.Equal(t0) {
		t.Errorf("chat metadata %+v; want name kept, is-group, last activity %s", c, t0)
	}

	// Once registered, the same chat's messages are stored.
	addGroup(t, db, chat, "book-club")
	if _, inserted, err := db.Messages.Insert(ctx, Message{Chat: chat, ExternalID: "X2", Text: "now stored", SentAt: t0}); err != nil || !inserted {
		t.Fatalf("after registering: inserted %v, err %v; want stored", inserted, err)
	}
}

func TestInsertMessageRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:main", "main")
	tests := []struct {
		name    string
		m       Message
		wantErr bool
	}{
		{"no chat", Message{ExternalID: "1", Text: "x"}, true},
		{"no external id", Message{Chat: "local:main", Text: "x"}, true},
		{"blank text", Message{Chat: "local:main", ExternalID: "2", Text: " \n "}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, inserted, err := db.Messages.Insert(ctx, tt.m)
			if (err != nil) != tt.wantErr || inserted || id != 0 {
				t.Errorf("InsertMessage = %d, %v, %v; want 0, false, error %v", id, inserted, err, tt.wantErr)
			}
		})
	}
	if n := count(t, db, "messages", ""); n != 0 {
		t.Errorf("%d messages stored; want 0", n)
	}
}

func TestUpsertChatWithoutTime(t *testing.T) {
	ctx := context.Background()
	db := openTest(t) // its clock reads t0
	earlier := t0.Add(-48 * time.Hour)
	if err := db.Chats.Upsert(ctx, Chat{ID: "old@g.us", Name: "Old", LastActivity: earlier}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Chat{{ID: "new@g.us", Name: "New"}, {ID: "old@g.us", Name: "Old"}} {
		if err := db.Chats.Upsert(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		id   ChatID
		want time.Time
	}{
		{"new@g.us", t0},      // first seen now, not in 1970
		{"old@g.us", earlier}, // a known time is kept
	}
	for _, tt := range tests {
		c, err := db.Chats.Get(ctx, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if !c.LastActivity.Equal(tt.want) {
			t.Errorf("%s last activity: got %s; want %s", tt.id, c.LastActivity, tt.want)
		}
	}
}

func TestUpsertChatKeepsKnownMetadata(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	id := ChatID("1@g.us")
	steps := []Chat{
		{ID: id, Name: "Family", Channel: "whatsapp", IsGroup: true, LastActivity: t0},
		{ID: id, LastActivity: t0.Add(-time.Hour)}, // older, nameless
	}
	for _, c := range steps {
		if err := db.Chats.Upsert(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Chats.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := Chat{ID: id, Name: "Family", Channel: "whatsapp", IsGroup: true, LastActivity: t0}
	if got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
	if err := db.Chats.Upsert(ctx, Chat{ID: id, Name: "Family 2"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Chats.Get(ctx, id); got.Name != "Family 2" {
		t.Errorf("renamed chat name %q; want %q", got.Name, "Family 2")
	}
	if _, err := db.Chats.Get(ctx, "nope"); !errorsIsNotFound(err) {
		t.Errorf("GetChat(unknown) = %v; want ErrNotFound", err)
	}
	chats, _ := db.Chats.List(ctx)
	if len(chats) != 1 {
		t.Errorf("ListChats = %d chats; want 1", len(chats))
	}
}

func TestPendingMessages(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "local:main", "main")
	for i := range 5 {
		if _, _, err := db.Messages.Insert(ctx, Message{Chat: "local:main", ExternalID: fmt.Sprint("in", i), Text: fmt.Sprint("m", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// bridged's own message in between: not pending.
	it, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "local:main", Text: "a reply", Origin: OriginReply, Group: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox.MarkSent(ctx, it.ID, "", t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Messages.Insert(ctx, Message{Chat: "local:main", ExternalID: "in5", Text: "m5"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		limit   int
		want    string
		omitted int
	}{
		{0, "[m0 m1 m2 m3 m4 m5]", 0},
		{10, "[m0 m1 m2 m3 m4 m5]", 0},
		{3, "[m3 m4 m5]", 3},
		{1, "[m5]", 5},
	}
	for _, tt := range tests {
		ms, omitted, err := db.Messages.Pending(ctx, "local:main", 0, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.Text)
		}
		if fmt.Sprint(got) != tt.want || omitted != tt.omitted {
			t.Errorf("PendingMessages limit %d = %v, %d omitted; want %s, %d", tt.limit, got, omitted, tt.want, tt.omitted)
		}
	}
	// Messages.After shows both directions.
	all, _ := db.Messages.After(ctx, "local:main", 0, 0)
	if len(all) != 7 || !all[5].IsBot || !all[5].FromMe || all[5].Text != "a reply" || all[5].ExternalID != it.ExternalID {
		t.Errorf("MessagesAfter = %+v; want 7 messages with the sent reply sixth, IsBot", all)
	}
}

// A message echoed back with an id the outbox chose is bridged's own.
func TestEchoOfOwnMessageIsBot(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	addGroup(t, db, "1@g.us", "family")
	it, err := db.Outbox.Enqueue(ctx, OutboxItem{Chat: "1@g.us", Text: "Andy: hello", Origin: OriginReply})
	if err != nil {
		t.Fatal(err)
	}
	_, inserted, err := db.Messages.Insert(ctx, Message{Chat: "1@g.us", ExternalID: it.ExternalID, Text: "Andy: hello", FromMe: true})
	if err != nil || !inserted {
		t.Fatalf("InsertMessage(echo) inserted %v, err %v", inserted, err)
	}
	// A person whose text merely looks like the bot's is not.
	if _, _, err := db.Messages.Insert(ctx, Message{Chat: "1@g.us", ExternalID: "HUMAN", Text: "andy: not the bot"}); err != nil {
		t.Fatal(err)
	}
	ms, _ := db.Messages.After(ctx, "1@g.us", 0, 0)
	if len(ms) != 2 || !ms[0].IsBot || ms[1].IsBot {
		t.Errorf("messages %+v; want the echo IsBot and the human's not", ms)
	}
}

// A message and its chat's metadata take one write of the chat's row.
func TestInsertMessageInWritesTheChatOnce(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	addGroup(t, db, "c1", "one")
	for _, q := range []string{
		`CREATE TEMP TABLE chat_writes (n INTEGER)`,
		`CREATE TEMP TRIGGER chat_ins AFTER INSERT ON chats BEGIN INSERT INTO chat_writes VALUES (1); END`,
		`CREATE TEMP TRIGGER chat_upd AFTER UPDATE ON chats BEGIN INSERT INTO chat_writes VALUES (1); END`,
	} {
		if _, err := db.write.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	err := db.Tx(ctx, func(tx *Tx) error {
		_, _, err := tx.Messages.InsertIn(ctx, Chat{ID: "c1", Name: "Family", Channel: "whatsapp", IsGroup: true},
			Message{Chat: "c1", ExternalID: "e1", Sender: "u", Text: "hi"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM chat_writes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("chat row writes for one message = %d; want 1", n)
	}
	c, err := db.Chats.Get(ctx, "c1")
	if err != nil || c.Name != "Family" || c.Channel != "whatsapp" || !c.IsGroup || !c.LastActivity.Equal(t0) {
		t.Fatalf("chat = %+v, %v; want its metadata and the message's time", c, err)
	}
	err = db.Tx(ctx, func(tx *Tx) error {
		_, _, err := tx.Messages.InsertIn(ctx, Chat{ID: "c2"}, Message{Chat: "c1", ExternalID: "e2", Text: "x"})
		return err
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("metadata of another chat = %v; want ErrInvalid", err)
	}
}
