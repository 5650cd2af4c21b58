package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// transcriptDepth bounds how deep a transcript prune descends below a
// group's .claude (the CLI writes projects/<project>/<session>.jsonl and
// projects/<project>/<session>/subagents/<agent>.jsonl).
const transcriptDepth = 8

// PruneTranscripts removes the Claude session transcripts (the *.jsonl
// files under data/sessions/<folder>/.claude) last written before
// `before`, of every folder, and returns how many went. live names the
// session each folder resumes next ("" when none): its transcript, and
// everything under a directory named after it (its subagents'), stays
// whatever its age. The tree is the agent's, so it is walked by descriptor
// and nothing is followed: only regular files are removed, a link (to a
// file or a directory) is left as it is, and so is what it points to. A
// folder without a .claude is not given one. live is asked only for
// folders that have one; an error from it skips that folder (reported).
func (h *Home) PruneTranscripts(before time.Time, live func(folder string) (string, error)) (int, error) {
	base := h.layout.SessionsDir()
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("prune transcripts: %w", err)
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || CheckFolder(e.Name()) != nil {
			continue
		}
		folder := e.Name()
		if fi, err := os.Lstat(h.layout.ClaudeDir(folder)); err != nil || !fi.IsDir() {
			continue
		}
		keep, err := live(folder)
		if err != nil {
			errs = append(errs, fmt.Errorf("prune transcripts of %s: %w", folder, err))
			continue
		}
		tree, err := h.Claude(folder)
		if err != nil {
			errs = append(errs, fmt.Errorf("prune transcripts of %s: %w", folder, err))
			continue
		}
		m, err := pruneTranscripts(tree.fd, before, keep, transcriptDepth)
		tree.Close()
		n += m
		if err != nil {
			errs = append(errs, fmt.Errorf("prune transcripts of %s: %w", folder, err))
		}
	}
	return n, errors.Join(errs...)
}

// pruneTranscripts removes the old *.jsonl regular files in the directory
// dirfd and, depth levels down, in its real subdirectories (opened with
// O_NOFOLLOW), leaving keep.jsonl and a directory named keep. Entries that
// vanish or change meanwhile are skipped.
func pruneTranscripts(dirfd int, before time.Time, keep string, depth int) (int, error) {
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	d := os.NewFile(uintptr(dup), "")
	defer d.Close()
	if _, err := d.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	n := 0
	for {
		entries, rerr := d.ReadDir(pruneChunk)
		for _, e := range entries {
			name := e.Name()
			if keep != "" && (name == keep || name == keep+".jsonl") {
				continue
			}
			switch {
			case e.IsDir() && depth > 0:
				sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue // replaced by a link, or gone
				}
				m, err := pruneTranscripts(sub, before, keep, depth-1)
				unix.Close(sub)
				n += m
				if err != nil {
					return n, err
				}
			case e.Type().IsRegular() && strings.HasSuffix(name, ".jsonl"):
				var st unix.Stat_t
				if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
					continue
				}
				if !time.Unix(st.Mtim.Unix()).Before(before) {
					continue
				}
				// unlinkat removes the name itself, whatever is there now.
				if err := unix.Unlinkat(dirfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
					if errors.Is(err, unix.EISDIR) {
						continue
					}
					return n, err
				}
				n++
			}
		}
		if errors.Is(rerr, io.EOF) || len(entries) == 0 {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
