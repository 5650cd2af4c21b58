package store_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/retention"
	"github.com/bridged-app/bridged/internal/store"
	"github.com/bridged-app/bridged/internal/store/storetest"
)

// messagePath runs the store's part of one message's way through bridged
// in chat's group folder: the message stored (with the own-message check),
// the pending messages after the cursor read, the agent's turn committed
// (cursor and reply), the reply marked sent (and stored as the chat's
// message). It returns how long that took.
func messagePath(tb testing.TB, db *store.DB, chat store.ChatID, folder store.Folder, i int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	t0 := time.Now()
	var id store.MessageID
	err := db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		id, _, err = tx.Messages.InsertIn(ctx, store.Chat{ID: chat, Channel: "local"},
			store.Message{Chat: chat, ExternalID: fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano()), Sender: "alice", Text: "@Andy how are things"})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	cur, err := db.Sessions.Cursor(ctx, folder)
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := db.Messages.Pending(ctx, chat, cur, 50); err != nil {
		tb.Fatal(err)
	}
	var reply store.OutboxItem
	err = db.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.Sessions.SetCursor(ctx, folder, id); err != nil {
			return err
		}
		var err error
		reply, err = tx.Outbox.Enqueue(ctx, store.OutboxItem{Chat: chat, Group: folder, Text: "fine, thanks", Origin: store.OriginReply})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := db.Outbox.MarkSent(ctx, reply.ID, "", time.Time{}); err != nil {
		tb.Fatal(err)
	}
	return time.Since(t0)
}

// threadCPU is the CPU time the calling OS thread used so far; with the
// goroutine locked to its thread, SQLite's own work (it runs in the
// calling goroutine) apart from how loaded the machine is.
func threadCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q)]
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pathCPU runs messagePath n times in the big chat: the time each took,
// and its CPU.
func pathCPU(tb testing.TB, db *store.DB, n int) (wall, cpu []time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := range n {
		c := threadCPU(tb)
		wall = append(wall, messagePath(tb, db, storetest.Chat(0), storetest.Folder(0), i))
		cpu = append(cpu, threadCPU(tb)-c)
	}
	return wall, cpu
}

func openSeeded(tb testing.TB, s storetest.Scale) *store.DB {
	tb.Helper()
	return storetest.OpenAt(tb, storetest.Seeded(tb, tb.TempDir(), s))
}

// BenchmarkScaleMessagePath: the store's part of a message's way (see
// messagePath) in a chat with 100,000 replies in a store of a million
// messages and a thousand groups, against an empty store
// (BRIDGED_SCALE_MESSAGES makes the large store smaller).
func BenchmarkScaleMessagePath(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	for range b.N {
		const n = 300
		empty, emptyCPU := pathCPU(b, openSeeded(b, storetest.Empty), n)
		big, bigCPU := pathCPU(b, openSeeded(b, large), n)
		e50, e95, l50, l95 := quantile(empty, .5), quantile(empty, .95), quantile(big, .5), quantile(big, .95)
		b.ReportMetric(msf(l50)/msf(e50), "x-median")
		fmt.Printf("scale: message path in the store (stored, pending read, turn committed, reply sent), %d runs: empty store median %.2f ms p95 %.2f ms; %d messages (%d replies in the chat) median %.2f ms p95 %.2f ms (%.2fx, %.2fx)\n",
			n, msf(e50), msf(e95), large.Messages, large.BigReplies, msf(l50), msf(l95), msf(l50)/msf(e50), msf(l95)/msf(e95))
		ec, lc := quantile(emptyCPU, .5), quantile(bigCPU, .5)
		fmt.Printf("scale: the same, CPU per message (median; apart from the machine's load): empty %.3f ms, large %.3f ms (%.2fx)\n", msf(ec), msf(lc), msf(lc)/msf(ec))
	}
}

// prunes is a retention pass's way to the store in BenchmarkScalePrune: it
// records each batch (its limit, the time it held the writer, the CPU the
// call took on its thread: SQLite's work, apart from the machine's load),
// and gate, held by the benchmark, keeps the next batch from starting.
type prunes struct {
	db   *store.DB
	shm  string // the database's write-ahead log index (path + "-shm")
	gate sync.Mutex
	mu   sync.Mutex
	runs []pruneRun
	// checkpoints is the CPU of each checkpoint the pass ran between
	// batches, on a reading connection.
	checkpoints []time.Duration
	longestLog  int // the most pages the log held at a checkpoint
}

type pruneRun struct {
	limit, rows int
	held, cpu   time.Duration
	// checkpointed is whether frames of the log were copied into the
	// database during the batch (the log index's backfill grew): the
	// commit's own checkpoint. gcs is the garbage collections that
	// ended meanwhile; inblock the blocks the thread read from disk.
	checkpointed bool
	logFrames    int // the log's frames before the batch
	gcs, inblock int64
}

// walIndex reads the write-ahead log index's frame count and backfill
// (how many of them a checkpoint copied into the database).
func walIndex(shm string) (frames, backfill uint32) {
	f, err := os.Open(shm)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	var b [100]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0
	}
	return binary.NativeEndian.Uint32(b[16:]), binary.NativeEndian.Uint32(b[96:])
}

func gcCycles() int64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func (p *prunes) Prune(ctx context.Context, before time.Time, limit int) (store.Pruned, error) {
	p.gate.Lock()
	defer p.gate.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ru0, ru1 syscall.Rusage
	frames0, back0 := walIndex(p.shm)
	gc0 := gcCycles()
	_ = syscall.Getrusage(1, &ru0) // RUSAGE_THREAD
	n, err := p.db.Prune(ctx, before, limit)
	_ = syscall.Getrusage(1, &ru1)
	gc1 := gcCycles()
	_, back1 := walIndex(p.shm)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	if err == nil {
		p.mu.Lock()
		p.runs = append(p.runs, pruneRun{limit: limit, rows: n.Total(), held: n.Held, cpu: cpu,
			checkpointed: back1 > back0, logFrames: int(frames0), gcs: gc1 - gc0, inblock: ru1.Inblock - ru0.Inblock})
		p.mu.Unlock()
	}
	return n, err
}

// Checkpoint is the store's, timed (its CPU does not hold the writer),
// with the most pages the log held.
func (p *prunes) Checkpoint(ctx context.Context) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(1, &ru0) // RUSAGE_THREAD
	n, err := p.db.Checkpoint(ctx)
	_ = syscall.Getrusage(1, &ru1)
	p.mu.Lock()
	p.checkpoints = append(p.checkpoints, time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()))
	p.longestLog = max(p.longestLog, n)
	p.mu.Unlock()
	return n, err
}

// take returns the batches recorded since the last take.
func (p *prunes) take() []pruneRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.runs
	p.runs = nil
	return out
}

func spread(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("median %.2f ms, p99 %.2f ms, most %.2f ms", msf(quantile(d, .5)), msf(quantile(d, .99)), msf(slices.Max(d)))
}

func batchFigures(rs []pruneRun) (held, cpu []time.Duration, limits []int) {
	for _, r := range rs {
		held, cpu, limits = append(held, r.held), append(cpu, r.cpu), append(limits, r.limit)
	}
	return held, cpu, limits
}

// BenchmarkScalePrune: a first prune of 97 % of the large store by the
// retention's pass (its batch sizing and pause). First the message path
// with the paced pass running against without it, in interleaved rounds
// (the pass held between the rounds without it): the median of the rounds'
// p95s and their ratio, by wall time and by the path's CPU. Then the rest
// of the prune without pauses: each batch's time holding the writer (wall
// in its transaction, and CPU), its size, and the CPU per row at the
// start, the middle and the end (linear: the same).
func BenchmarkScalePrune(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	const rounds, perRound = 20, 150
	for range b.N {
		path := storetest.Seeded(b, b.TempDir(), large)
		db := storetest.OpenAt(b, path)
		keep := storetest.Span * 3 / 100
		ps := &prunes{db: db, shm: path + "-shm"}
		ctx, cancel := context.WithCancel(context.Background())
		ps.gate.Lock()
		passDone := make(chan error, 1)
		go func() {
			_, err := (&retention.Pruner{DB: ps, Keep: keep}).Pass(ctx)
			passDone <- err
		}()
		type half struct{ p95, cpu95, p50 []time.Duration }
		var with, without half
		var ratios []float64
		measure := func(h *half) time.Duration {
			wall, cpu := pathCPU(b, db, perRound)
			p95 := quantile(wall, .95)
			h.p95, h.cpu95, h.p50 = append(h.p95, p95), append(h.cpu95, quantile(cpu, .95)), append(h.p50, quantile(wall, .5))
			return p95
		}
		for r := range rounds {
			var w, wo time.Duration
			if r%2 == 0 {
				wo = measure(&without)
				ps.gate.Unlock()
				w = measure(&with)
				ps.gate.Lock()
			} else {
				ps.gate.Unlock()
				w = measure(&with)
				ps.gate.Lock()
				wo = measure(&without)
			}
			ratios = append(ratios, msf(w)/msf(wo))
		}
		cancel()
		ps.gate.Unlock()
		if err := <-passDone; err != nil && ctx.Err() == nil {
			b.Fatal(err)
		}
		paced := ps.take()
		med := func(d []time.Duration) float64 { return msf(quantile(d, .5)) }
		slices.Sort(ratios)
		fmt.Printf("scale: message path p95 while the retention's paced pass runs against without, %d interleaved rounds of %d messages each: median of the rounds' p95s %.2f vs %.2f ms (%.2fx); the rounds' ratios median %.2fx, from %.2fx to %.2fx; medians %.2f vs %.2f ms\n",
			rounds, perRound, med(with.p95), med(without.p95), med(with.p95)/med(without.p95), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], med(with.p50), med(without.p50))
		fmt.Printf("scale: the same by the message path's CPU (apart from the machine's load; a wait for the writer takes none): median of the rounds' p95s %.3f vs %.3f ms (%.2fx)\n",
			med(with.cpu95), med(without.cpu95), med(with.cpu95)/med(without.cpu95))
		held, cpu, _ := batchFigures(paced)
		fmt.Printf("scale: the paced pass's %d batches meanwhile (the first of the prune: cold cache): writer held (wall in the transaction) %s; CPU %s\n", len(paced), spread(held), spread(cpu))

		// The rest at once: the retention's pass with no pause.
		t0 := time.Now()
		total, err := (&retention.Pruner{DB: ps, Keep: keep, Pause: time.Nanosecond}).Pass(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		rest := ps.take()
		held, cpu, limits := batchFigures(rest)
		all := append(slices.Clone(paced), rest...)
		allHeld, allCPU, _ := batchFigures(all)
		over := func(d []time.Duration) (n int) {
			for _, x := range d {
				if x > 20*time.Millisecond {
					n++
				}
			}
			return n
		}
		slices.Sort(limits)
		fmt.Printf("scale: pruning 97 %% of %d messages: %d paced batches, then %d batches (%d rows) unpaced in %s; batch size (rows of each kind) from %d to %d, median %d\n",
			large.Messages, len(paced), len(rest), total.Total(), took.Round(time.Millisecond), limits[0], limits[len(limits)-1], limits[len(limits)/2])
		fmt.Printf("scale: the unpaced batches: writer held (wall in the transaction) %s; CPU %s\n", spread(held), spread(cpu))
		fmt.Printf("scale: every batch of the prune (%d): writer held %s, %d over 20 ms; CPU %s, %d over 20 ms\n",
			len(all), spread(allHeld), over(allHeld), spread(allCPU), over(allCPU))
		top := slices.Clone(all)
		slices.SortFunc(top, func(a, b pruneRun) int { return cmp.Compare(b.cpu, a.cpu) })
		var tops []string
		for _, r := range top[:min(8, len(top))] {
			var what []string
			if r.checkpointed {
				what = append(what, "its commit checkpointed")
			}
			if r.gcs > 0 {
				what = append(what, fmt.Sprintf("%d GC", r.gcs))
			}
			if r.inblock > 0 {
				what = append(what, fmt.Sprintf("%d blocks read from disk", r.inblock))
			}
			tops = append(tops, fmt.Sprintf("%.1f ms (%d rows of %d; log %d frames before; %s)", msf(r.cpu), r.rows, r.limit, r.logFrames, strings.Join(what, ", ")))
		}
		fmt.Printf("scale: the batches of most CPU: %s\n", strings.Join(tops, "; "))
		var ckpt, ckptOver, gcd, gcdOver int
		for _, r := range all {
			if r.checkpointed {
				ckpt++
				if r.cpu > 20*time.Millisecond {
					ckptOver++
				}
			}
			if r.gcs > 0 {
				gcd++
				if r.cpu > 20*time.Millisecond {
					gcdOver++
				}
			}
		}
		fmt.Printf("scale: batches whose commit checkpointed the log: %d (%d of them over 20 ms of CPU); batches during which a GC ended: %d (%d over 20 ms)\n", ckpt, ckptOver, gcd, gcdOver)
		// A commit runs SQLite's own checkpoint only once the log holds
		// 1,000 pages: never, if it never held that many between batches.
		fmt.Printf("scale: the pass's %d checkpoints between batches (on a reading connection: the writer free meanwhile): CPU %s; the log held at most %d pages (a commit checkpoints at 1,000)\n",
			len(ps.checkpoints), spread(ps.checkpoints), ps.longestLog)
		kc := min(20, len(rest)/3)
		perK := func(from, to int) float64 {
			var c time.Duration
			var r int
			for _, x := range rest[from:to] {
				c, r = c+x.cpu, r+x.rows
			}
			return msf(c) * 1000 / float64(max(r, 1))
		}
		mid := len(rest) / 2
		fmt.Printf("scale: CPU per 1,000 rows removed, unpaced: first %d batches %.2f ms, middle %d %.2f ms, last %d %.2f ms\n",
			kc, perK(0, kc), kc, perK(mid, mid+kc), kc, perK(len(rest)-kc, len(rest)))
		b.ReportMetric(msf(slices.Max(allHeld)), "ms-longest-batch")
		b.ReportMetric(msf(slices.Max(allCPU)), "ms-longest-batch-cpu")
		b.ReportMetric(med(with.p95)/med(without.p95), "x-p95-during-prune")
	}
}
