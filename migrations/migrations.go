// Package migrations holds the numbered SQL files that build bridged's
// database schema, embedded so the binary carries them.
//
// Each file is named NNNN_description.sql, numbered from 0001 without gaps,
// and is applied once, in its own transaction, by internal/store. A file that
// has shipped is never edited: a schema change is a new file.
package migrations

import "embed"

// FS holds every *.sql migration file.
//
//go:embed *.sql
var FS embed.FS
