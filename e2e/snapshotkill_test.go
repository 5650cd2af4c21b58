package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// changeRow is one line of `bridged changes --json`, as this test reads
// it.
type changeRow struct {
	ID      int64      `json:"id"`
	Kind    string     `json:"kind"`
	Undoes  int64      `json:"undoes"`
	Line    string     `json:"line"`
	EndedAt *time.Time `json:"ended_at"`
	Note    string     `json:"note"`
}

// The daemon killed with -9 at random points of turns (their snapshots as
// they begin and end) and of undos, 20 times: after each restart every
// change recorded before is still there and whole (its diff shows), no
// undo is left half done, and the files are what the history says they
// are: the next turn finds nothing changed outside a turn.
func TestE2EKill9DuringSnapshotsAndUndos(t *testing.T) {
	parallel(t, heavy)
	e := newEnv(t, "--idle-timeout", "2m")
	e.mustCLI("groups", "add", "--tools", "full", "--name", "fam", "--no-trigger", "local:fam")
	d := e.start()
	// A folder of 2,000 files: a snapshot after a restart reads them all,
	// an undo writes 200 of them back, one fsync each.
	id := e.post("local:fam", `fake:bash for d in $(seq 1 40); do mkdir -p d$d; for f in $(seq 1 50); do echo base $d $f > d$d/f$f; done; done`+
		"\nfake:reply ready")
	e.waitOut("local:fam", id, 1, 3*time.Minute)

	changes := func() []changeRow {
		t.Helper()
		var cs []changeRow
		if err := json.Unmarshal([]byte(e.mustCLI("changes", "--json", "fam")), &cs); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// paths are the paths a change changed, as `bridged diff --json` tells.
	paths := func(id int64) []string {
		t.Helper()
		var rep struct {
			Files []struct {
				Path string `json:"path"`
			} `json:"files"`
		}
		out, err := e.cli("diff", "--json", "fam", fmt.Sprint(id))
		if err != nil {
			t.Errorf("change %d cannot be shown: %v", id, err)
			return nil
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		var ps []string
		for _, f := range rep.Files {
			ps = append(ps, f.Path)
		}
		slices.Sort(ps)
		return ps
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 33))
	var seen []int64
	shown := map[int64]bool{} // the ended changes whose diff was checked
	// How long a turn and an undo took when the kill came after them: the
	// next kill comes at a random point within that.
	turnTook, undoTook := 2500*time.Millisecond, 300*time.Millisecond
	turnsCut, undosCut := 0, 0
	// Twenty rounds, and on a loaded machine, where a kill may miss every
	// undo, up to twenty more until one was cut.
	for round := 0; round < 20 || round < 40 && (turnsCut == 0 || undosCut == 0); round++ {
		var wait func()
		if round%2 == 0 {
			// A turn rewriting 200 files and CLAUDE.md, killed
			// anywhere from its container's start to its end.
			id := e.post("local:fam", fmt.Sprintf(`fake:bash for d in $(seq 1 20); do for f in $(seq 1 10); do echo round %d > d$d/f$f; done; done; echo round %d >> CLAUDE.md`, round, round)+
				"\nfake:reply done")
			// The kill comes at a random point of the turn, or once
			// it replied.
			replied := make(chan struct{})
			go func() {
				defer close(replied)
				_ = e.api("GET", fmt.Sprintf("/v1/chats/local:fam/messages?after=%d&wait=10s", id), nil, &struct{}{})
			}()
			began := time.Now()
			select {
			case <-replied:
				turnTook = time.Since(began)
			case <-time.After(time.Duration(r.Int64N(int64(turnTook)))):
				turnsCut++
			}
			wait = func() { e.waitOut("local:fam", id, 1, 3*time.Minute) }
		} else {
			// An undo of the newest turn that changed files, killed
			// while it writes them back. It is refused while the
			// group's agent works on a turn (the turn the restart ran
			// again, or the last one's end): it waits for the agent.
			waitAgent(t, e, "fam", "idle", 3*time.Minute, func(_, busy bool) bool { return !busy })
			cs := changes()
			i := slices.IndexFunc(cs, func(c changeRow) bool { return c.Kind == "turn" && c.EndedAt != nil && strings.Contains(c.Line, "~") })
			if i < 0 {
				t.Fatalf("round %d: no turn to undo in %+v", round, cs)
			}
			done := make(chan struct{})
			began := time.Now()
			go func() {
				defer close(done)
				// Through the daemon's API: a CLI started after the
				// kill would undo on its own, beside the next daemon.
				_ = e.api("POST", fmt.Sprintf("/v1/groups/fam/changes/%d/undo", cs[i].ID), map[string]any{"force": true}, &struct{}{})
			}()
			undoing, finished := cs[i].ID, false
			select {
			case <-done:
				undoTook, finished = time.Since(began), true
			case <-time.After(time.Duration(r.Int64N(int64(undoTook)))):
			}
			wait = func() {
				<-done
				// A kill that came before the undo began (its request
				// not yet read, on a loaded machine) leaves no undo:
				// the next one comes later.
				if finished {
					return
				}
				cs := changes()
				switch {
				case !slices.ContainsFunc(cs, func(c changeRow) bool { return c.Kind == "undo" && c.Undoes == undoing }):
					undoTook *= 2
				case slices.ContainsFunc(cs, func(c changeRow) bool {
					return c.Kind == "undo" && c.Undoes == undoing && strings.Contains(c.Note, "finished after a restart")
				}):
					undosCut++
				}
			}
		}
		d.kill9()
		d = e.start()
		wait()

		cs := changes()
		ids := map[int64]bool{}
		for _, c := range cs {
			ids[c.ID] = true
			if c.Kind == "undo" && c.EndedAt == nil {
				t.Errorf("round %d: undo %d left half done after the restart", round, c.ID)
			}
			if c.EndedAt == nil || shown[c.ID] {
				continue
			}
			shown[c.ID] = true
			ps := paths(c.ID)
			// An undo puts back every path the turn changed, or none.
			if c.Kind != "undo" || c.Undoes == 0 {
				continue
			}
			if want := paths(c.Undoes); !slices.Equal(ps, want) {
				var odd []string
				for _, p := range ps {
					if !slices.Contains(want, p) {
						odd = append(odd, "+"+p)
					}
				}
				for _, p := range want {
					if !slices.Contains(ps, p) {
						odd = append(odd, "-"+p)
					}
				}
				t.Errorf("round %d: undo %d (%s) changed %d paths, its turn %d %d: not the turn's paths exactly (%s)",
					round, c.ID, c.Note, len(ps), c.Undoes, len(want), strings.Join(odd, ", "))
			}
		}
		for _, id := range seen {
			if !ids[id] {
				t.Errorf("round %d: change %d was lost", round, id)
			}
		}
		seen = seen[:0]
		for _, c := range cs {
			seen = append(seen, c.ID)
		}
	}
	// The files are what the history says: a last turn finds nothing
	// changed outside a turn, and none was ever recorded.
	id = e.post("local:fam", "fake:reply settled")
	e.waitOut("local:fam", id, 1, 3*time.Minute)
	cutTurns, cutUndos := 0, 0
	for _, c := range changes() {
		switch {
		case c.Kind == "outside":
			t.Errorf("change %d: the files changed outside any turn (%s; %s): a snapshot or undo was left mixed", c.ID, c.Line, c.Note)
		case strings.Contains(c.Note, "ended after a restart"):
			cutTurns++
		case strings.Contains(c.Note, "finished after a restart"):
			cutUndos++
		}
	}
	// The kills landed inside turns and undos, not only between them.
	t.Logf("%d turns killed before their reply, %d of them after writing files; %d undos cut off and finished after the restart",
		turnsCut, cutTurns, cutUndos)
	if turnsCut == 0 || cutUndos == 0 {
		t.Errorf("%d turns and %d undos were cut off by the kills; want some of each", turnsCut, cutUndos)
	}
	d.stop(t)
}
