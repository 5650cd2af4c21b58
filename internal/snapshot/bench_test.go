package snapshot

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/store"
)

// storeBytes is the size of every object kept.
func storeBytes(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// BenchmarkSnapshot: a group folder of 10,000 files (200 MB, 100
// directories of 100 files of 20 KB). The first snapshot reads it all;
// then a turn that changed nothing (its begin and end snapshots) and the
// end snapshot of a turn that changed three files, with the storage it
// added. Wants: the three files under 100 ms and 1 MB, nothing changed
// under 10 ms (BRIDGED_BENCH_SNAPSHOT_FILES makes the folder smaller).
func BenchmarkSnapshot(b *testing.B) {
	files := 10_000
	if v := os.Getenv("BRIDGED_BENCH_SNAPSHOT_FILES"); v != "" {
		fmt.Sscan(v, &files)
	}
	const size = 20 << 10
	for range b.N {
		f := newFixture(b, Config{})
		buf := make([]byte, size)
		for i := range files {
			_, _ = rand.Read(buf)
			p := f.groupPath(fmt.Sprintf("d%03d/f%05d.bin", i/100, i))
			if i%100 == 0 {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(p, buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		// The files were written more than racyWindow before the
		// snapshots (a folder's files mostly are): their hashes are cached.
		f.s.cfg.Now = func() time.Time { return time.Now().Add(time.Minute) }
		ctx, dir := f.ctx, f.s.cfg.Dir
		start := Start{Folder: f.folder, Kind: store.ChangeTurn}

		t0 := time.Now()
		if _, err := f.s.Begin(ctx, start); err != nil {
			b.Fatal(err)
		}
		first := time.Since(t0)
		if err := f.s.End(ctx, Finish{Folder: f.folder}); err != nil {
			b.Fatal(err)
		}

		var idle []time.Duration
		for range 9 {
			t0 = time.Now()
			if _, err := f.s.Begin(ctx, start); err != nil {
				b.Fatal(err)
			}
			if err := f.s.End(ctx, Finish{Folder: f.folder}); err != nil {
				b.Fatal(err)
			}
			idle = append(idle, time.Since(t0))
		}
		slices.Sort(idle)

		if _, err := f.s.Begin(ctx, start); err != nil {
			b.Fatal(err)
		}
		before := storeBytes(b, dir)
		for _, i := range []int{17, files / 2, files - 1} {
			_, _ = rand.Read(buf)
			if err := os.WriteFile(f.groupPath(fmt.Sprintf("d%03d/f%05d.bin", i/100, i)), buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		t0 = time.Now()
		if err := f.s.End(ctx, Finish{Folder: f.folder}); err != nil {
			b.Fatal(err)
		}
		three := time.Since(t0)
		added := storeBytes(b, dir) - before

		fmt.Printf("snapshot: %d files (%d MB): first snapshot %.0f ms; a turn that changed nothing adds %.2f ms (median of 9, want < 10); "+
			"a turn's end snapshot with 3 files changed %.2f ms (want < 100), %.0f KB new storage (want < 1024)\n",
			files, files*size>>20, ms(first), ms(idle[4]), ms(three), float64(added)/1024)
		b.ReportMetric(ms(idle[4]), "ms-unchanged-turn")
		b.ReportMetric(ms(three), "ms-3-changed")
		b.ReportMetric(float64(added)/1024, "KB-3-changed")
		if added > 1<<20 {
			b.Errorf("three changed files added %d bytes; want under 1 MB", added)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
