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

// upkeepClient is the part of *whatsmeow.Client appState and liveness use besides
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

// upkeepOf is wa's app-state calls, or noUpkeep's answers.
func upkeepOf(wa waClient) upkeepClient {
	if u, ok := wa.(upkeepClient); ok {
		return u
	}
	return noUpkeep{}
}
