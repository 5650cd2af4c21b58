package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/bridged-app/bridged/migrations"
)

// readConns is the size of the read-only pool.
const readConns = 4

// DB is an open bridged database. It is safe for concurrent use.
type DB struct {
	Chats     *ChatQuery
	Messages  *MessageQuery
	Groups    *GroupQuery
	Sessions  *SessionQuery
	Tasks     *TaskQuery
	Outbox    *OutboxQuery
	Usage     *UsageQuery
	Turns     *TurnQuery
	Approvals *ApprovalQuery
	Notices   *NoticeQuery
	Budget    *BudgetQuery
	Requests  *RequestQuery
	Media     *MediaQuery
	Polls     *PollQuery
	Changes   *ChangeQuery

	write *sql.DB // one connection: every write, in IMMEDIATE transactions
	read  *sql.DB // query_only pool for plain reads
	log   zerolog.Logger
	now   func() time.Time
	spent spentCache // usage.go: each group's ledger total since a time, kept current
	// registry is the registered groups in memory (registry.go), dropped
	// when a transaction that changed one commits.
	registry registry
}

// Tx is a write transaction opened by DB.Tx. Its query fields hold the same
// typed queries as DB's, run inside the transaction, and the writes that
// only make sense as part of a larger one.
type Tx struct {
	// The queries by table are values, bound once per transaction
	// (bindTxQueries): a transaction allocates none of them.
	Chats     ChatTx
	Messages  MessageTx
	Groups    GroupTx
	Sessions  SessionTx
	Tasks     TaskTx
	Outbox    OutboxTx
	Usage     UsageTx
	Approvals ApprovalTx
	Requests  RequestTx
	Media     MediaTx
	Polls     PollTx

	stx *sql.Tx
	now func() time.Time
	// groupsChanged: the transaction registered, changed or removed a
	// group; the registry is dropped once it commits.
	groupsChanged bool
}

// querier is what reads and writes need: a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Open opens (creating it and its parent directory if needed) the database
// at path and applies any migration it lacks. It fails with an error wrapping
// ErrSchemaTooNew when the database was migrated by a newer bridged.
func Open(ctx context.Context, path string, log zerolog.Logger) (*DB, error) {
	return open(ctx, path, log, migrations.FS)
}

// OpenUpTo is Open with the migrations up to version only: the store as a
// bridged whose last migration was version left it. Tests of an upgrade
// build their old store with it (internal/store/storetest.Before).
func OpenUpTo(ctx context.Context, path string, version int, log zerolog.Logger) (*DB, error) {
	ms, err := loadMigrations(migrations.FS)
	if err != nil {
		return nil, err
	}
	if version < 1 || version > len(ms) {
		return nil, fmt.Errorf("open database %s up to migration %d: there are migrations 1 to %d", path, version, len(ms))
	}
	return open(ctx, path, log, upTo{migrations.FS, version})
}

// upTo is a migrations directory without the migrations after version.
type upTo struct {
	fs.FS
	version int
}

// Glob is fs.Glob on the directory, leaving out migrations after version.
func (u upTo) Glob(pattern string) ([]string, error) {
	names, err := fs.Glob(u.FS, pattern)
	var keep []string
	for _, n := range names {
		if m := migrationName.FindStringSubmatch(n); m != nil {
			if v, _ := strconv.Atoi(m[1]); v > u.version {
				continue
			}
		}
		keep = append(keep, n)
	}
	return keep, err
}

func open(ctx context.Context, path string, log zerolog.Logger, fsys fs.FS) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	if err := PrivateDB(abs); err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	db := &DB{log: log.With().Str("component", "store").Logger(), now: time.Now}
	bindQueries(db)

	db.write, err = sql.Open(driverName, dsn(abs, true))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	db.write.SetMaxOpenConns(1)
	db.write.SetMaxIdleConns(1)
	db.write.SetConnMaxIdleTime(0)
	db.write.SetConnMaxLifetime(0)
	if err := db.write.PingContext(ctx); err != nil {
		db.write.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	if err := db.migrate(ctx, fsys); err != nil {
		db.write.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}

	db.read, err = sql.Open(driverName, dsn(abs, false))
	if err != nil {
		db.write.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	db.read.SetMaxOpenConns(readConns)
	db.read.SetMaxIdleConns(readConns)
	if err := db.read.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", abs, err)
	}
	return db, nil
}

// dsn builds the connection string for the writer or for a reader.
func dsn(path string, writer bool) string {
	// SQLite decodes %XX in a file: URI path; '?' and '#' would end it.
	p := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if writer {
		return "file:" + p + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	}
	return "file:" + p + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=query_only(1)"
}

// Close closes the database. Calls in flight finish first.
func (db *DB) Close() error {
	var errs []error
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	errs = append(errs, db.write.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

// Tx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it if fn
// returns nil; otherwise, or if fn panics, it rolls back. fn's error is
// returned with its text unchanged, classed as ErrDiskFull when the disk
// was full (see classify). fn must use only tx: a write through db would
// wait for the connection tx holds until ctx ends.
func (db *DB) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	return classify(db.tx(ctx, fn))
}

func (db *DB) tx(ctx context.Context, fn func(tx *Tx) error) (err error) {
	stx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = stx.Rollback()
		}
	}()
	t := &Tx{stx: stx, now: db.now}
	bindTxQueries(t)
	if err := fn(t); err != nil {
		return err
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	committed = true
	if t.groupsChanged {
		db.registry.invalidate()
	}
	return nil
}

// txValue runs fn in its own transaction and returns its value.
func txValue[T any](ctx context.Context, db *DB, fn func(tx *Tx) (T, error)) (T, error) {
	var v T
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		v, err = fn(tx)
		return err
	})
	return v, err
}

// readTx runs fn in a read-only snapshot on the read pool.
func (db *DB) readTx(ctx context.Context, fn func(q querier) error) error {
	stx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer stx.Rollback() //nolint:errcheck // read-only: nothing to undo
	return fn(stx)
}

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// loadMigrations reads and orders the migration files in fsys. Versions must
// run from 1 without gaps.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []migration
	for _, n := range names {
		m := migrationName.FindStringSubmatch(n)
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name must look like 0001_description.sql", n)
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		ms = append(ms, migration{version: v, name: n, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration file %s: want version %04d next", m.name, i+1)
		}
	}
	return ms, nil
}

// migrate applies every migration newer than the database, each in its own
// transaction together with its schema_migrations row.
func (db *DB) migrate(ctx context.Context, fsys fs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	known := len(ms)
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	// One read tells which migrations are left: a store already at this
	// version (every start after the first) opens no transaction here.
	before, err := schemaVersion(ctx, db.write)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.version <= before {
			continue
		}
		err := db.Tx(ctx, func(tx *Tx) error {
			current, err := schemaVersion(ctx, tx.stx)
			if err != nil {
				return err
			}
			if current >= m.version {
				return nil
			}
			if _, err := tx.stx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := tx.stx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, toMS(db.now())); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			db.log.Debug().Int("version", m.version).Str("migration", m.name).Msg("applied migration")
			return nil
		})
		if err != nil {
			return err
		}
	}
	// A newer database has every migration this bridged knows, so the loop
	// above skipped them all; refuse it here.
	current, err := schemaVersion(ctx, db.write)
	if err != nil {
		return err
	}
	if current > known {
		return fmt.Errorf("%w: the database is at version %d, this bridged knows versions up to %d; upgrade bridged", ErrSchemaTooNew, current, known)
	}
	return nil
}

func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// SchemaVersion returns the database's schema version.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, db.read)
}

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner = interface{ Scan(...any) error }

// collect reads every row of rows with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
