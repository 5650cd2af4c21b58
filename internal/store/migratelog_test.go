package store

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A first start's log does not open with a line per migration: they are
// logged at debug.
func TestMigrationsLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level zerolog.Level
		want  bool
	}{{zerolog.InfoLevel, false}, {zerolog.DebugLevel, true}} {
		var buf bytes.Buffer
		db, err := Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), zerolog.New(&buf).Level(tc.level))
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		if got := strings.Contains(buf.String(), "applied migration"); got != tc.want {
			t.Errorf("level %s: log %q; want applied migrations logged %v", tc.level, buf.String(), tc.want)
		}
	}
}
