package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	bstore "github.com/bridged-app/bridged/internal/store"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	waLog "go.mau.fi/whatsmeow/util/log"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// versionFetchTimeout bounds the start-up fetch of WhatsApp web's version.
const versionFetchTimeout = 10 * time.Second

// deviceStore is whatsmeow's SQL store plus the handle bridged uses for its
// own small key-value table in the same file.
type deviceStore struct {
	db        *sql.DB
	container *sqlstore.Container
}

// openStore opens (creating if needed) whatsmeow's device store at path. One
// connection: SQLite has one writer, and whatsmeow runs its transactions
// through the context, so nothing waits on a second connection.
func openStore(ctx context.Context, path string, log zerolog.Logger) (*deviceStore, error) {
	if path == "" {
		return nil, errors.New("whatsapp store path is empty")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("whatsapp store path %q: must not contain '?' or '#'", path)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("whatsapp store path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create store directory: %w", err)
	}
	// Created 0600 first: SQLite gives the -wal and -shm the same mode.
	if err := bstore.PrivateDB(path); err != nil {
		return nil, fmt.Errorf("whatsapp store: %w", err)
	}
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)" +
		"&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open whatsapp store %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	container := sqlstore.NewWithDB(db, "sqlite", waLog.Zerolog(log.With().Str("component", "whatsapp-store").Logger()))
	if err := container.Upgrade(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("upgrade whatsapp store %s: %w", path, err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bridged_kv (
		key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("create bridged_kv in %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = db.Close()
		return nil, fmt.Errorf("restrict whatsapp store permissions: %w", err)
	}
	return &deviceStore{db: db, container: container}, nil
}

// Close closes the database.
func (s *deviceStore) Close() error {
	return s.container.Close()
}

const kvVersion = "wa_web_version"

// cachedVersion returns the last WhatsApp web version seen, or zero.
func (s *deviceStore) cachedVersion(ctx context.Context) (store.WAVersionContainer, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM bridged_kv WHERE key = ?`, kvVersion).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return store.WAVersionContainer{}, nil
	} else if err != nil {
		return store.WAVersionContainer{}, fmt.Errorf("read cached web version: %w", err)
	}
	parsed, err := store.ParseVersion(v)
	if err != nil {
		return store.WAVersionContainer{}, fmt.Errorf("parse cached web version: %w", err)
	}
	return parsed, nil
}

// saveVersion records v as the last WhatsApp web version seen.
func (s *deviceStore) saveVersion(ctx context.Context, v store.WAVersionContainer) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO bridged_kv (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, kvVersion, v.String())
	if err != nil {
		return fmt.Errorf("save web version: %w", err)
	}
	return nil
}

// versioner keeps whatsmeow's web version current: the last known version at
// once, the published one when it can be fetched.
type versioner struct {
	store *deviceStore // nil in tests: nothing cached
	fetch func(ctx context.Context) (store.WAVersionContainer, error)
	apply func(v store.WAVersionContainer)
	get   func() store.WAVersionContainer
	log   zerolog.Logger
}

func newVersioner(ds *deviceStore, log zerolog.Logger) *versioner {
	httpClient := &http.Client{Timeout: versionFetchTimeout}
	return &versioner{
		store: ds,
		fetch: func(ctx context.Context) (store.WAVersionContainer, error) {
			v, err := whatsmeow.GetLatestVersion(ctx, httpClient)
			if err != nil {
				return store.WAVersionContainer{}, err
			}
			return *v, nil
		},
		apply: store.SetWAVersion,
		get:   store.GetWAVersion,
		log:   log,
	}
}

// applyCached applies the cached version when it is newer than the one
// built into whatsmeow.
func (v *versioner) applyCached(ctx context.Context) {
	if v.store == nil {
		return
	}
	cached, err := v.store.cachedVersion(ctx)
	if err != nil {
		v.log.Warn().Err(err).Msg("cannot read cached WhatsApp web version")
		return
	}
	if !cached.IsZero() && v.get().LessThan(cached) {
		v.apply(cached)
		v.log.Info().Stringer("version", cached).Msg("using last known WhatsApp web version")
	}
}

// refresh fetches the published web version, applies and caches it, and
// reports whether it differs from the one in use. When WhatsApp cannot be
// reached the version in use stays.
func (v *versioner) refresh(ctx context.Context) (changed bool) {
	ctx, cancel := context.WithTimeout(ctx, versionFetchTimeout)
	defer cancel()
	latest, err := v.fetch(ctx)
	if err != nil || latest.IsZero() {
		v.log.Warn().Err(err).Stringer("version", v.get()).
			Msg("cannot fetch current WhatsApp web version; using last known one")
		return false
	}
	current := v.get()
	if latest != current {
		v.apply(latest)
		changed = true
		v.log.Info().Stringer("version", latest).Stringer("previous", current).Msg("applied current WhatsApp web version")
	}
	if v.store != nil {
		if err := v.store.saveVersion(ctx, latest); err != nil {
			v.log.Warn().Err(err).Msg("cannot cache WhatsApp web version")
		}
	}
	return changed
}
