package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/proto/waHistorySync"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"
)

// downloadFake parses with whatsmeow's own parser and answers
// DownloadHistorySync with the blob a test sets, as whatsmeow would after
// downloading and decompressing it.
type downloadFake struct {
	historyFake

	mu        sync.Mutex
	blob      *waHistorySync.HistorySync
	errs      []error // returned by successive downloads
	downloads int
	deleted   []string // direct paths deleted from the media servers
}

func (f *downloadFake) DownloadHistorySync(_ context.Context, notif *waE2E.HistorySyncNotification, synchronousStorage bool) (*waHistorySync.HistorySync, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.downloads++
	if !synchronousStorage {
		return nil, errors.New("whatsmeow's own storage must run before the blob is handled")
	}
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return f.blob, nil
}

func (f *downloadFake) DeleteMedia(_ context.Context, appInfo whatsmeow.MediaType, directPath string, _ []byte, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if appInfo == whatsmeow.MediaHistory {
		f.deleted = append(f.deleted, directPath)
	}
	return nil
}

func (f *downloadFake) counts() (downloads int, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.downloads, append([]string(nil), f.deleted...)
}

// historyNotice is the message whatsmeow dispatches for the phone's
// history-sync notification when ManualHistorySyncDownload is set.
func historyNotice(id string, size uint64) *events.Message {
	return msgEvent(types.MessageInfo{
		MessageSource: types.MessageSource{Chat: botPN, Sender: botPN, IsFromMe: true},
		ID:            id, Category: "peer", Timestamp: time.Now(),
	}, &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
		Type: waE2E.ProtocolMessage_HISTORY_SYNC_NOTIFICATION.Enum(),
		HistorySyncNotification: &waE2E.HistorySyncNotification{
			FileLength: proto.Uint64(size), DirectPath: proto.String("/v/t62.history/" + id),
			MediaKey: []byte("key"), FileEncSHA256: []byte("enc"), FileSHA256: []byte("sha"),
			SyncType: waE2E.HistorySyncType_RECENT.Enum(), ChunkOrder: proto.Uint32(1),
		},
	}})
}

func webMsgIn(chat types.JID, id string, sender types.JID, at time.Time, text string) *waHistorySync.HistorySyncMsg {
	m := webMsg(id, sender, at, text)
	m.Message.Key = &waCommon.MessageKey{RemoteJID: proto.String(chat.String()), FromMe: proto.Bool(false), ID: proto.String(id), Participant: proto.String(sender.String())}
	return m
}

func newHistoryClient(t *testing.T) (*testClient, *downloadFake) {
	t.Helper()
	tc := connectedClient(t, nil)
	f := &downloadFake{historyFake: historyFake{fakeWA: tc.wa, parser: &whatsmeow.Client{}}}
	tc.Client.wa = f
	return tc, f
}

func pendingHistories(t *testing.T, tc *testClient) map[string]string {
	t.Helper()
	all, err := tc.kv.listKV(context.Background(), kvHistory)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// The phone's notification is kept before it is acknowledged; the worker
// downloads the blob, stores the registered chats' messages as backlog,
// deletes the blob from the media servers and forgets the notification.
func TestHistorySyncDownloadedByBridged(t *testing.T) {
	ctx := context.Background()
	tc, f := newHistoryClient(t)
	old := time.Now().Add(-2 * time.Minute) // fresh: backlog all the same
	f.blob = &waHistorySync.HistorySync{SyncType: waHistorySync.HistorySync_RECENT.Enum(), Conversations: []*waHistorySync.Conversation{{
		ID: proto.String(familyChat.String()), Messages: []*waHistorySync.HistorySyncMsg{webMsgIn(familyChat, "H1", alicePN, old, "@Andy are you there?")},
	}}}

	if !tc.handleEvent(historyNotice("N1", 4096)) {
		t.Fatal("history notification not acknowledged")
	}
	if got := tc.rec.stored(); len(got) != 0 {
		t.Fatalf("stored %d messages at the notification; want none (the blob is not downloaded yet)", len(got))
	}
	if p := pendingHistories(t, tc); len(p) != 1 {
		t.Fatalf("pending history syncs: %v; want the notification kept", p)
	}
	tc.hist.downloadPending(ctx)
	got := tc.rec.stored()
	if len(got) != 1 || got[0].ExternalID != "H1" || !got[0].Backlog || !got[0].SentAt.Equal(old.Truncate(time.Second)) {
		t.Fatalf("stored %+v; want H1 with its own time, marked as backlog", got)
	}
	if p := pendingHistories(t, tc); len(p) != 0 {
		t.Errorf("pending after the download: %v; want none", p)
	}
	if _, deleted := f.counts(); len(deleted) != 1 || deleted[0] != "/v/t62.history/N1" {
		t.Errorf("deleted from the media servers: %q; want the blob", deleted)
	}
}

// A notification that cannot be kept is not acknowledged (WhatsApp
// redelivers it).
func TestHistorySyncNotificationNotKeptIsNotAcknowledged(t *testing.T) {
	tc, _ := newHistoryClient(t)
	tc.kv = &failingKV{}
	if tc.handleEvent(historyNotice("N1", 4096)) {
		t.Fatal("a notification that could not be kept was acknowledged")
	}
}

type failingKV struct{ memKV }

func (*failingKV) setKV(context.Context, string, string) error { return errors.New("disk full") }

func TestHistorySyncDownloadBounds(t *testing.T) {
	tests := []struct {
		name      string
		size      uint64
		errs      []error
		runs      int
		downloads int
		pending   int // notifications still kept afterwards
	}{
		{name: "too large", size: HistorySyncMaxBytes + 1, runs: 1, downloads: 0, pending: 0},
		{name: "a failure is tried again", size: 4096, errs: []error{errors.New("media conn: timeout")}, runs: 2, downloads: 2, pending: 0},
		{name: "given up after three failures", size: 4096, errs: []error{errors.New("e1"), errors.New("e2"), errors.New("e3")},
			runs: 3, downloads: historyAttempts, pending: 0},
		{name: "kept after two failures", size: 4096, errs: []error{errors.New("e1"), errors.New("e2")},
			runs: 2, downloads: 2, pending: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, f := newHistoryClient(t)
			f.blob = &waHistorySync.HistorySync{SyncType: waHistorySync.HistorySync_RECENT.Enum()}
			f.errs = tt.errs
			tc.handleEvent(historyNotice("N1", tt.size))
			for range tt.runs {
				tc.hist.downloadPending(context.Background())
			}
			if n, _ := f.counts(); n != tt.downloads {
				t.Errorf("downloads: %d; want %d", n, tt.downloads)
			}
			if p := pendingHistories(t, tc); len(p) != tt.pending {
				t.Errorf("pending: %d; want %d", len(p), tt.pending)
			}
		})
	}
}

// A blob stores at most HistorySyncMaxChats registered chats and
// HistorySyncMaxMessages messages.
func TestHistorySyncBoundsPerBlob(t *testing.T) {
	tests := []struct {
		name          string
		chats, perOne int
		wantChats     int
		wantMessages  int
	}{
		{name: "chats", chats: HistorySyncMaxChats + 5, perOne: 1, wantChats: HistorySyncMaxChats, wantMessages: HistorySyncMaxChats},
		{name: "messages", chats: 40, perOne: 30, wantChats: 34, wantMessages: HistorySyncMaxMessages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, _ := newHistoryClient(t)
			at := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
			blob := &waHistorySync.HistorySync{SyncType: waHistorySync.HistorySync_RECENT.Enum()}
			for i := range tt.chats {
				chat := types.NewJID(fmt.Sprintf("1203630000001%05d", i), types.GroupServer)
				tc.rec.registered[chat.String()] = true
				conv := &waHistorySync.Conversation{ID: proto.String(chat.String())}
				for j := range tt.perOne {
					conv.Messages = append(conv.Messages, webMsgIn(chat, fmt.Sprintf("M%d-%d", i, j), alicePN, at.Add(time.Duration(j)*time.Minute), "hi"))
				}
				blob.Conversations = append(blob.Conversations, conv)
			}
			tc.handleEvent(&events.HistorySync{Data: blob})
			got := tc.rec.stored()
			chats := map[string]bool{}
			for _, m := range got {
				chats[m.Chat] = true
				if !m.Backlog {
					t.Fatalf("%s not marked as backlog", m.ExternalID)
				}
			}
			if len(got) != tt.wantMessages || len(chats) != tt.wantChats {
				t.Errorf("stored %d messages of %d chats; want %d of %d", len(got), len(chats), tt.wantMessages, tt.wantChats)
			}
		})
	}
}

// The worker downloads a queued notification at once while connected, and
// one queued while disconnected after the next connection.
func TestHistorySyncWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tc, f := newHistoryClient(t)
		f.blob = &waHistorySync.HistorySync{SyncType: waHistorySync.HistorySync_RECENT.Enum()}
		tc.spawn(func() { tc.hist.loop(tc.base) })
		tc.handleEvent(historyNotice("N1", 4096))
		synctest.Wait()
		if n, _ := f.counts(); n != 1 {
			t.Fatalf("downloads while connected: %d; want 1", n)
		}
		tc.handleEvent(&events.Disconnected{})
		tc.handleEvent(historyNotice("N2", 4096))
		synctest.Wait()
		if n, _ := f.counts(); n != 1 {
			t.Fatalf("downloads while disconnected: %d; want still 1", n)
		}
		tc.handleEvent(&events.Connected{})
		synctest.Wait()
		if n, _ := f.counts(); n != 2 {
			t.Fatalf("downloads after the connection: %d; want 2", n)
		}
		_ = tc.Close()
	})
}
