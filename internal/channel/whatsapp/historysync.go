package whatsapp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/proto/waHistorySync"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/bridged-app/bridged/internal/channel"
)

// Manual history-sync download. whatsmeow downloads history blobs itself
// unless told not to; bridged tells it not to (ManualHistorySyncDownload)
// and does it as mautrix-whatsapp does: the phone's notification (a
// protocol message from the account's own phone) is written to the device
// store before the message is acknowledged, and a worker downloads the
// blob (DownloadHistorySync, which also lets whatsmeow keep what it needs:
// LID mappings, push names, message secrets), takes what bridged keeps of
// it (handleHistorySync), deletes the blob from WhatsApp's media servers and
// forgets the notification. A download that fails is tried again after the
// next connection, at most historyAttempts times.
//
// Bounds: a blob announced larger than HistorySyncMaxBytes is not
// downloaded; of a blob, at most HistorySyncMaxChats registered chats,
// HistorySyncMaxPerChat messages of each and HistorySyncMaxMessages in all
// are stored; everything else is left. What is stored is context only: it
// is marked as backlog and never starts a turn, whatever its age.
const (
	// HistorySyncMaxBytes bounds the announced size of a blob bridged
	// downloads (compressed, as WhatsApp sends it).
	HistorySyncMaxBytes = 32 << 20
	// HistorySyncMaxChats bounds the registered chats stored from one blob.
	HistorySyncMaxChats = 50
	// HistorySyncMaxMessages bounds the messages stored from one blob.
	HistorySyncMaxMessages = 1000
	// historyAttempts bounds the downloads of one notification.
	historyAttempts = 3
	// historyDownloadTimeout bounds one download.
	historyDownloadTimeout = 2 * time.Minute
	// kvHistory prefixes a pending notification's key in bridged_kv.
	kvHistory = "history_sync/"
)

// historyDownloader is the part of *whatsmeow.Client the manual download
// uses.
type historyDownloader interface {
	DownloadHistorySync(ctx context.Context, notif *waE2E.HistorySyncNotification, synchronousStorage bool) (*waHistorySync.HistorySync, error)
	DeleteMedia(ctx context.Context, appInfo whatsmeow.MediaType, directPath string, encFileHash []byte, encHandle string) error
}

var _ historyDownloader = realClient{}

// history owns history sync: the notifications kept in bridged_kv until
// their blobs are downloaded, and what of a blob is stored as backlog
// (backlog.go).
type history struct {
	*core
	conn *connection
	in   *inbound
	wake chan struct{} // a history sync was queued, or a connection began
}

// pendingHistory is a notification waiting for its download, as kept in
// bridged_kv.
type pendingHistory struct {
	At       time.Time `json:"at"`       // when it arrived
	Attempts int       `json:"attempts"` // failed downloads so far
	Notif    string    `json:"notif"`    // the notification, protobuf in base64
}

// historyNotification is the phone's history-sync notification evt
// carries, nil for any other message.
func historyNotification(evt *events.Message) *waE2E.HistorySyncNotification {
	if !evt.Info.IsFromMe {
		return nil
	}
	return evt.Message.GetProtocolMessage().GetHistorySyncNotification()
}

// queue keeps notif (of message id) for the worker. It reports
// false when it could not be kept: the message is then not acknowledged
// and WhatsApp delivers it again.
func (c *history) queue(ctx context.Context, id string, notif *waE2E.HistorySyncNotification) bool {
	log := c.log.With().Str("message_id", id).Str("type", notif.GetSyncType().String()).Uint32("chunk", notif.GetChunkOrder()).Logger()
	b, err := proto.Marshal(notif)
	if err == nil {
		var v []byte
		v, err = json.Marshal(pendingHistory{At: c.now().UTC(), Notif: base64.StdEncoding.EncodeToString(b)})
		if err == nil {
			err = c.kv.setKV(ctx, kvHistory+id, string(v))
		}
	}
	if err != nil {
		log.Error().Err(err).Msg("cannot keep the history sync notification; not acknowledging, WhatsApp will redeliver")
		return false
	}
	log.Info().Uint64("bytes", notif.GetFileLength()).Msg("history sync announced; downloading it")
	signal(c.wake)
	return true
}

// loop downloads the pending history blobs whenever one is queued
// and after each connection, until ctx ends.
func (c *history) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		if c.conn.state() == channel.StateConnected {
			c.downloadPending(ctx)
		}
	}
}

// downloadPending works through the pending notifications, oldest first.
func (c *history) downloadPending(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Any("panic", r).Msg("history sync download panicked")
		}
	}()
	dl, ok := c.wa.(historyDownloader)
	if !ok {
		return
	}
	kv := c.kv
	all, err := kv.listKV(ctx, kvHistory)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot read the pending history syncs")
		return
	}
	type item struct {
		key string
		p   pendingHistory
	}
	var items []item
	for key, v := range all {
		var p pendingHistory
		if err := json.Unmarshal([]byte(v), &p); err != nil {
			c.log.Warn().Str("key", key).Msg("unreadable pending history sync; dropped")
			_ = kv.deleteKV(ctx, key)
			continue
		}
		items = append(items, item{key, p})
	}
	slices.SortFunc(items, func(a, b item) int { return a.p.At.Compare(b.p.At) })
	for _, it := range items {
		if ctx.Err() != nil || c.conn.state() != channel.StateConnected {
			return
		}
		c.downloadOne(ctx, dl, it.key, it.p)
	}
}

// downloadOne downloads, stores and forgets one pending notification.
func (c *history) downloadOne(ctx context.Context, dl historyDownloader, key string, p pendingHistory) {
	kv := c.kv
	log := c.log.With().Str("message_id", strings.TrimPrefix(key, kvHistory)).Logger()
	raw, err := base64.StdEncoding.DecodeString(p.Notif)
	var notif waE2E.HistorySyncNotification
	if err == nil {
		err = proto.Unmarshal(raw, &notif)
	}
	if err != nil {
		log.Warn().Err(err).Msg("unreadable pending history sync; dropped")
		_ = kv.deleteKV(ctx, key)
		return
	}
	log = log.With().Str("type", notif.GetSyncType().String()).Uint32("chunk", notif.GetChunkOrder()).Logger()
	if size := historySize(&notif); size > HistorySyncMaxBytes {
		log.Warn().Uint64("bytes", size).Int("max_bytes", HistorySyncMaxBytes).Msg("history sync blob too large; not downloaded")
		_ = kv.deleteKV(ctx, key)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, historyDownloadTimeout)
	data, err := dl.DownloadHistorySync(dctx, &notif, true)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		p.Attempts++
		if p.Attempts >= historyAttempts {
			log.Warn().Err(err).Int("attempts", p.Attempts).Msg("cannot download a history sync; given up")
			_ = kv.deleteKV(ctx, key)
			return
		}
		log.Warn().Err(err).Int("attempts", p.Attempts).Msg("cannot download a history sync; trying again after the next connection")
		if v, err := json.Marshal(p); err == nil {
			_ = kv.setKV(ctx, key, string(v))
		}
		return
	}
	c.handleSync(ctx, c.sink, &events.HistorySync{Data: data, Notification: &notif})
	if err := kv.deleteKV(ctx, key); err != nil {
		log.Warn().Err(err).Msg("cannot forget a downloaded history sync; it is downloaded again (its messages are stored once)")
	}
	if notif.GetDirectPath() != "" {
		if err := dl.DeleteMedia(ctx, whatsmeow.MediaHistory, notif.GetDirectPath(), notif.GetFileEncSHA256(), notif.GetEncHandle()); err != nil {
			log.Debug().Err(err).Msg("cannot delete the history sync blob from WhatsApp's servers")
		}
	}
}

// historySize is the announced size of notif's blob.
func historySize(notif *waE2E.HistorySyncNotification) uint64 {
	if inline := notif.GetInitialHistBootstrapInlinePayload(); inline != nil {
		return uint64(len(inline))
	}
	return notif.GetFileLength()
}
