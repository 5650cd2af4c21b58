package control

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
)

// runtimeMetrics are the Go runtime's own figures /metrics exports, read
// with runtime/metrics: Prometheus name, type, help, and the runtime's
// name.
var runtimeMetrics = []struct{ name, typ, help, sample string }{
	{"go_goroutines", "gauge", "Goroutines that currently exist.", "/sched/goroutines:goroutines"},
	{"go_memstats_heap_alloc_bytes", "gauge", "Bytes of heap memory occupied by live objects and dead ones not yet freed.", "/memory/classes/heap/objects:bytes"},
	{"go_memstats_sys_bytes", "gauge", "Bytes of memory mapped by the Go runtime (all of it: heap, stacks, runtime structures).", "/memory/classes/total:bytes"},
	{"go_gc_heap_goal_bytes", "gauge", "Heap size the garbage collector aims to keep below at the end of the cycle.", "/gc/heap/goal:bytes"},
	{"go_gc_cycles_total", "counter", "Garbage collection cycles completed.", "/gc/cycles/total:gc-cycles"},
}

// writeRuntime writes the Go runtime's figures and the process's open and
// allowed file descriptors and resident memory. A figure the platform
// does not offer is left out.
func writeRuntime(m *metricWriter) {
	samples := make([]metrics.Sample, len(runtimeMetrics))
	for i, r := range runtimeMetrics {
		samples[i].Name = r.sample
	}
	metrics.Read(samples)
	for i, r := range runtimeMetrics {
		var v float64
		switch samples[i].Value.Kind() {
		case metrics.KindUint64:
			v = float64(samples[i].Value.Uint64())
		case metrics.KindFloat64:
			v = samples[i].Value.Float64()
		default:
			continue // not offered by this Go
		}
		m.single(r.name, r.typ, r.help, v)
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		// ReadDir's own descriptor of the directory is closed again.
		m.single("process_open_fds", "gauge", "Open file descriptors of the daemon.", float64(len(ents)-1))
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		m.single("process_max_fds", "gauge", "Most file descriptors the daemon may open (its soft nofile limit).", float64(lim.Cur))
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				m.single("process_resident_memory_bytes", "gauge", "Resident memory of the daemon, in bytes.", float64(pages)*float64(os.Getpagesize()))
			}
		}
	}
}
