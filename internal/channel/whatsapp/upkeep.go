package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/appstate"
	"go.mau.fi/whatsmeow/proto/waE2E"

	"github.com/bridged-app/bridged/internal/channel"
)

// kvStore is the small key-value table bridged keeps in whatsmeow's store
// (bridged_kv); tests use a map.
type kvStore interface {
	getKV(ctx context.Context, key string) (string, error) // "" when unset
	setKV(ctx context.Context, key, value string) error
	deleteKV(ctx context.Context, key string) error
	listKV(ctx context.Context, prefix string) (map[string]string, error)
}

func (s *deviceStore) getKV(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM bridged_kv WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	return v, nil
}

// memKV is a kvStore in memory, for a client without a device store.
type memKV struct {
	mu sync.Mutex
	m  map[string]string
}

func (m *memKV) getKV(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[key], nil
}

func (m *memKV) setKV(_ context.Context, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[string]string)
	}
	m.m[key] = value
	return nil
}

func (m *memKV) deleteKV(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	return nil
}

func (m *memKV) listKV(_ context.Context, prefix string) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string)
	for k, v := range m.m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out, nil
}

// upkeep is what the client tracks about the account's health while it is
// connected: app-state collections out of sync (appstate.go) and when the
// phone was last seen (liveness.go).
type upkeep struct {
	kv kvStore

	mu         sync.Mutex
	broken     map[appstate.WAPatchName]brokenState // collections out of sync, until each syncs again
	healing    map[appstate.WAPatchName]bool        // a re-fetch is running
	phoneSeen  time.Time                            // zero: never seen (or unknown)
	phoneSaved time.Time                            // phoneSeen as last written to kv
	pingAt     time.Time                            // last liveness ping
	loaded     bool                                 // phoneSeen and pingAt read from kv
}

// brokenState is an app-state collection out of sync: why, and since when.
type brokenState struct {
	why   string
	since time.Time
}

func newUpkeep() *upkeep {
	return &upkeep{
		kv:      &memKV{},
		broken:  make(map[appstate.WAPatchName]brokenState),
		healing: make(map[appstate.WAPatchName]bool),
	}
}

// readTime reads a time stored as RFC 3339 under key; zero when unset or
// unreadable.
func readTime(ctx context.Context, kv kvStore, key string) (time.Time, error) {
	v, err := kv.getKV(ctx, key)
	if err != nil || v == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse %s %q: %w", key, v, err)
	}
	return t, nil
}

func writeTime(ctx context.Context, kv kvStore, key string, t time.Time) error {
	return kv.setKV(ctx, key, t.UTC().Format(time.RFC3339))
}

// upkeepConditions are the account's conditions while the connection
// itself may be fine: the app state out of sync, the phone not seen for
// PhoneWarnAfter. Each shows in Status's health and is told to the owner
// once (through the alerts' conditions, like a restriction).
func (c *Client) upkeepConditions() []channel.Condition {
	var out []channel.Condition
	if cond, ok := c.appStateCondition(); ok {
		out = append(out, cond)
	}
	if cond, ok := c.phoneCondition(); ok {
		out = append(out, cond)
	}
	return out
}

// background runs fn on its own goroutine, which Close waits for; nothing
// starts once the client is closed.
func (c *Client) background(fn func()) {
	if c.base.Err() != nil {
		return
	}
	c.spawn(fn)
}

// upkeepClient is the part of *whatsmeow.Client the upkeep uses besides
// waClient's.
type upkeepClient interface {
	// FetchAppState fetches a collection; fullSync drops the local copy
	// first.
	FetchAppState(ctx context.Context, name appstate.WAPatchName, fullSync, onlyIfNotSynced bool) error
	// SendPeerMessage sends a message to the account's own devices.
	SendPeerMessage(ctx context.Context, msg *waE2E.Message) (whatsmeow.SendResponse, error)
	// LatestAppStateKeyID is the newest app-state key's id, nil when none.
	LatestAppStateKeyID(ctx context.Context) ([]byte, error)
}

var _ upkeepClient = realClient{}

func (r realClient) LatestAppStateKeyID(ctx context.Context) ([]byte, error) {
	id, err := r.Store.AppStateKeys.GetLatestAppStateSyncKeyID(ctx)
	if err != nil {
		return nil, fmt.Errorf("read newest app state key: %w", err)
	}
	return id, nil
}

// noUpkeep answers for a waClient without upkeepClient's calls.
type noUpkeep struct{}

var errNoUpkeep = errors.New("not supported by this client")

func (noUpkeep) FetchAppState(context.Context, appstate.WAPatchName, bool, bool) error {
	return errNoUpkeep
}

func (noUpkeep) SendPeerMessage(context.Context, *waE2E.Message) (whatsmeow.SendResponse, error) {
	return whatsmeow.SendResponse{}, errNoUpkeep
}

func (noUpkeep) LatestAppStateKeyID(context.Context) ([]byte, error) { return nil, nil }

func (c *Client) upkeepWA() upkeepClient {
	if u, ok := c.wa.(upkeepClient); ok {
		return u
	}
	return noUpkeep{}
}
