package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

// crashHome is the environment variable that makes the test binary a
// child that snapshots and undoes in the home it names until it is killed.
const crashHome = "BRIDGED_SNAPSHOT_CRASH_HOME"

func openCrashHome(t testing.TB, dir string) (*Service, *store.DB) {
	hm, err := home.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := hm.Layout().Prepare(); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), filepath.Join(dir, "store", "bridged.db"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Dir: hm.Layout().SnapshotsDir(), MaxFile: 64 << 10}, db, hm, zerolog.Nop()), db
}

// crashChild runs turns (files written, rewritten and removed, CLAUDE.md
// grown) and undoes them, forever.
func crashChild(t *testing.T, dir string) {
	s, _ := openCrashHome(t, dir)
	ctx := context.Background()
	group := filepath.Join(dir, "groups", "fam")
	// An fsync of the folder between two writes of an undo widens the
	// window a kill lands in.
	s.betweenWrites = func() { _ = syncFile(group) }
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var last store.ChangeID
	for i := 0; ; i++ {
		if i%3 == 2 && last != 0 {
			_, _ = s.Undo(ctx, "fam", last, UndoOptions{Force: true})
			continue
		}
		id, err := s.Begin(ctx, Start{Folder: "fam", Kind: store.ChangeTurn})
		if err != nil {
			t.Fatal(err)
		}
		for range 1 + r.IntN(20) {
			p := filepath.Join(group, fmt.Sprintf("d%d/f%d", r.IntN(5), r.IntN(40)))
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			if r.IntN(5) == 0 {
				_ = os.Remove(p)
				continue
			}
			b := make([]byte, r.IntN(100<<10)) // some over MaxFile
			for k := range b {
				b[k] = byte(r.IntN(256))
			}
			_ = os.WriteFile(p, b, 0o644)
		}
		f, _ := os.OpenFile(filepath.Join(group, "CLAUDE.md"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fmt.Fprintf(f, "line %d\n", i)
		f.Close()
		if err := s.End(ctx, Finish{Folder: "fam"}); err != nil {
			t.Fatal(err)
		}
		last = id
	}
}

// kill -9 at random points of snapshots and undos, 20 times: after each
// restart every object is whole (its content is its name's hash), every
// change is ended and names only objects that are there, and an undo cut
// off was finished: its recorded result holds every write of its plan.
func TestKill9DuringSnapshotsAndUndos(t *testing.T) {
	if dir := os.Getenv(crashHome); dir != "" {
		crashChild(t, dir)
		return
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "groups", "fam"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, db := openCrashHome(t, dir)
	if _, err := db.Groups.Add(context.Background(), store.Group{Chat: "local:fam", Name: "fam", Folder: "fam"}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_ = s
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9DuringSnapshotsAndUndos$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashHome+"="+dir)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-time.After(time.Duration(250+r.IntN(350)) * time.Millisecond):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		case <-done:
			t.Fatalf("round %d: the child ended on its own:\n%s", round, out)
		}
		checkAfterCrash(t, dir, round)
	}
}

func checkAfterCrash(t *testing.T, dir string, round int) {
	t.Helper()
	s, db := openCrashHome(t, dir)
	defer db.Close()
	ctx := context.Background()
	cut, err := db.Changes.Opened(ctx)
	if err != nil {
		t.Fatal(err)
	}
	undos := 0
	for _, c := range cut {
		if c.Kind == store.ChangeUndo {
			undos++
		}
	}
	if err := s.Recover(ctx); err != nil {
		t.Fatalf("round %d: recover: %v", round, err)
	}
	// Every object is whole.
	objects := filepath.Join(dir, "data", "snapshots", "objects")
	n := 0
	err = filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(filepath.Dir(p)) == "tmp" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		if name := filepath.Base(filepath.Dir(p)) + filepath.Base(p); hex.EncodeToString(sum[:]) != name {
			t.Errorf("round %d: object %s holds other content", round, name)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	open, err := db.Changes.Opened(ctx)
	if err != nil || len(open) != 0 {
		t.Fatalf("round %d: changes still open after recover: %v, %v", round, open, err)
	}
	cs, err := db.Changes.Roots(ctx, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		// Every object a change names is there.
		for _, h := range []string{c.BeforeFiles, c.BeforeMemory, c.AfterFiles, c.AfterMemory} {
			if _, err := s.diffTrees(emptyTree, h, ""); err != nil {
				t.Fatalf("round %d: change %d: %v", round, c.ID, err)
			}
		}
		if c.Kind != store.ChangeUndo || c.Plan == "" {
			continue
		}
		// The undo's result holds every write of its plan.
		data, err := s.o.get(c.Plan)
		if err != nil {
			t.Fatalf("round %d: undo %d: %v", round, c.ID, err)
		}
		var plan []op
		if err := json.Unmarshal(data, &plan); err != nil {
			t.Fatal(err)
		}
		for _, p := range plan {
			if p.Dir || p.Memory {
				continue
			}
			got, err := s.lookup(c.AfterFiles, p.Path)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case p.Type == "" && got != nil:
				t.Errorf("round %d: undo %d left %s, which its plan removes", round, c.ID, p.Path)
			case p.Type != "" && (got == nil || got.Hash != p.Hash):
				t.Errorf("round %d: undo %d: %s is %v, not what its plan writes", round, c.ID, p.Path, got)
			}
		}
	}
	t.Logf("round %d: %d changes, %d objects, all whole; %d cut off, %d of them undos", round, len(cs), n, len(cut), undos)
}
