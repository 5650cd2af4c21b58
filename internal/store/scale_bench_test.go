package store_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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

// pathTimes runs messagePath n times in the big chat.
func pathTimes(tb testing.TB, db *store.DB, n int) []time.Duration {
	wall, _ := pathCPU(tb, db, n)
	return wall
}

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

// BenchmarkScalePrune: a first prune of 97 % of the large store, in batches
// of rows of each kind as the retention pass takes them: each batch's
// time (how long it holds the writer) at the start and at the end, the
// longest, and the message path's p95 while a paced prune (the retention's
// pause between batches) runs against its p95 without one.
func BenchmarkScalePrune(b *testing.B) {
	large := storetest.ScaleFromEnv(b)
	ctx := context.Background()
	batch := retention.DefaultBatch
	for range b.N {
		db := openSeeded(b, large)
		before := time.Now().Add(-storetest.Span * 3 / 100)
		quiet := pathTimes(b, db, 300)

		// A paced prune (the retention's batch and pause) while messages flow.
		stop, done := make(chan struct{}), make(chan []time.Duration)
		go func() {
			var batches []time.Duration
			defer func() { done <- batches }()
			for {
				t0 := time.Now()
				p, err := db.Prune(ctx, before, batch)
				if err != nil {
					b.Error(err)
					return
				}
				batches = append(batches, time.Since(t0))
				if max(p.Messages, p.Outbox, p.TaskRuns, p.Usage) < batch {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(retention.DefaultPause):
				}
			}
		}()
		during := pathTimes(b, db, 300)
		close(stop)
		paced := <-done

		// The rest at once, batch after batch.
		var batches, cpu []time.Duration
		var rows []int
		t0 := time.Now()
		var total store.Pruned
		runtime.LockOSThread()
		for {
			t, c := time.Now(), threadCPU(b)
			p, err := db.Prune(ctx, before, batch)
			if err != nil {
				b.Fatal(err)
			}
			batches = append(batches, time.Since(t))
			cpu = append(cpu, threadCPU(b)-c)
			rows = append(rows, p.Total())
			total = total.Add(p)
			if max(p.Messages, p.Outbox, p.TaskRuns, p.Usage) < batch {
				break
			}
		}
		runtime.UnlockOSThread()
		kc := min(20, len(cpu)/3)
		all := append(slices.Clone(paced), batches...)
		mean := func(d []time.Duration) time.Duration {
			var s time.Duration
			for _, x := range d {
				s += x
			}
			return s / time.Duration(max(len(d), 1))
		}
		k := min(20, len(all)/3)
		q95, d95 := quantile(quiet, .95), quantile(during, .95)
		b.ReportMetric(msf(slices.Max(all)), "ms-longest-batch")
		fmt.Printf("scale: pruning 97 %% of %d messages: %d batches of %d (%d rows after the paced part) in %s unpaced; batch mean first %d %.2f ms, last %d %.2f ms, median %.2f ms, longest %.2f ms\n",
			large.Messages, len(all), batch, total.Total(), time.Since(t0).Round(time.Millisecond), k, msf(mean(all[:k])), k, msf(mean(all[len(all)-k:])), msf(quantile(all, .5)), msf(slices.Max(all)))
		fmt.Printf("scale: the same unpaced batches' CPU (SQLite's work, apart from the machine's load): first %d %.2f ms, last %d %.2f ms, median %.2f ms, most %.2f ms\n",
			kc, msf(mean(cpu[:kc])), kc, msf(mean(cpu[len(cpu)-kc:])), msf(quantile(cpu, .5)), msf(slices.Max(cpu)))
		// Later batches remove fewer kinds (the outbox, turn ends and ledger
		// run out before the messages do): linear means the same CPU per
		// row removed at the start, the middle and the end.
		perK := func(from, to int) float64 {
			var c time.Duration
			var r int
			for i := from; i < to; i++ {
				c, r = c+cpu[i], r+rows[i]
			}
			return msf(c) * 1000 / float64(max(r, 1))
		}
		mid := len(cpu) / 2
		fmt.Printf("scale: CPU per 1,000 rows removed: first %d batches %.2f ms, middle %d %.2f ms, last %d %.2f ms\n",
			kc, perK(0, kc), kc, perK(mid, mid+kc), kc, perK(len(cpu)-kc, len(cpu)))
		fmt.Printf("scale: message path p95 while a paced prune runs (%d batches, %s apart) %.2f ms against %.2f ms without (%.2fx); median %.2f vs %.2f ms\n",
			len(paced), retention.DefaultPause, msf(d95), msf(q95), msf(d95)/msf(q95), msf(quantile(during, .5)), msf(quantile(quiet, .5)))
	}
}
