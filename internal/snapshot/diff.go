package snapshot

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// delta is one path that differs between two trees: old or new is nil
// where it is missing on that side. Directories are walked into, so a
// delta is never a directory.
type delta struct {
	path     string
	old, new *entry
}

// diffTrees lists the paths that differ between trees a and b (hashes;
// empty: an empty tree), in name order, below prefix.
func (s *Service) diffTrees(a, b, prefix string) ([]delta, error) {
	if a == b {
		return nil, nil
	}
	ea, err := s.tree(a)
	if err != nil {
		return nil, err
	}
	eb, err := s.tree(b)
	if err != nil {
		return nil, err
	}
	var out []delta
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j >= len(eb) || i < len(ea) && ea[i].Name < eb[j].Name:
			d, err := s.side(&ea[i], path.Join(prefix, ea[i].Name), true)
			if err != nil {
				return nil, err
			}
			out = append(out, d...)
			i++
		case i >= len(ea) || eb[j].Name < ea[i].Name:
			d, err := s.side(&eb[j], path.Join(prefix, eb[j].Name), false)
			if err != nil {
				return nil, err
			}
			out = append(out, d...)
			j++
		default:
			x, y := &ea[i], &eb[j]
			p := path.Join(prefix, x.Name)
			i++
			j++
			switch {
			case x.Type == typeDir && y.Type == typeDir:
				d, err := s.diffTrees(x.Hash, y.Hash, p)
				if err != nil {
					return nil, err
				}
				out = append(out, d...)
			case x.Type == typeDir || y.Type == typeDir:
				d1, err := s.side(x, p, true)
				if err != nil {
					return nil, err
				}
				d2, err := s.side(y, p, false)
				if err != nil {
					return nil, err
				}
				out = append(append(out, d1...), d2...)
			case x.Type != y.Type || x.Hash != y.Hash || x.Perm != y.Perm || x.Kind != y.Kind:
				out = append(out, delta{path: p, old: x, new: y})
			}
		}
	}
	return out, nil
}

// side lists e (at p) as removed (old) or added, every leaf of it when it
// is a directory.
func (s *Service) side(e *entry, p string, old bool) ([]delta, error) {
	if e.Type != typeDir {
		if old {
			return []delta{{path: p, old: e}}, nil
		}
		return []delta{{path: p, new: e}}, nil
	}
	if old {
		return s.diffTrees(e.Hash, emptyTree, p)
	}
	return s.diffTrees(emptyTree, e.Hash, p)
}

// emptyTree is the hash of a tree with no entries.
const emptyTree = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// tree reads and parses tree object h (empty: no entries).
func (s *Service) tree(h string) ([]entry, error) {
	if h == "" || h == emptyTree {
		return nil, nil
	}
	data, err := s.o.get(h)
	if err != nil {
		return nil, err
	}
	return parseTree(data)
}

// lineDiff compares two texts by lines and returns the lines added and
// removed and a unified listing of the changes with context lines of
// context ("+" added, "-" removed, " " kept, "@@" between hunks).
func lineDiff(a, b []byte, context int) (added, removed int, listing []string) {
	la, lb := splitLines(a), splitLines(b)
	ops := diffOps(la, lb)
	for _, o := range ops {
		switch o.kind {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	// Keep the changed lines and context lines around them.
	keep := make([]bool, len(ops))
	for i, o := range ops {
		if o.kind == ' ' {
			continue
		}
		for k := max(0, i-context); k <= min(len(ops)-1, i+context); k++ {
			keep[k] = true
		}
	}
	gap := false
	for i, o := range ops {
		if !keep[i] {
			gap = true
			continue
		}
		if gap && len(listing) > 0 {
			listing = append(listing, "@@")
		}
		gap = false
		listing = append(listing, string(o.kind)+o.text)
	}
	return added, removed, listing
}

type lineOp struct {
	kind byte
	text string
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.Split(s, "\n")
}

// maxDiffCells bounds the work of one line diff; past it the middle that
// differs is shown as removed and added whole.
const maxDiffCells = 4 << 20

// diffOps is a longest-common-subsequence diff of a and b: the common
// start and end are kept, the middle compared by dynamic programming.
func diffOps(a, b []string) []lineOp {
	var head, tail []lineOp
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		head = append(head, lineOp{' ', a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		tail = append([]lineOp{{' ', a[len(a)-1]}}, tail...)
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	var mid []lineOp
	if len(a)*len(b) > maxDiffCells || len(a) == 0 || len(b) == 0 {
		for _, l := range a {
			mid = append(mid, lineOp{'-', l})
		}
		for _, l := range b {
			mid = append(mid, lineOp{'+', l})
		}
		return append(append(head, mid...), tail...)
	}
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			mid = append(mid, lineOp{' ', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			mid = append(mid, lineOp{'-', a[i]})
			i++
		default:
			mid = append(mid, lineOp{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		mid = append(mid, lineOp{'-', a[i]})
	}
	for ; j < m; j++ {
		mid = append(mid, lineOp{'+', b[j]})
	}
	return append(append(head, mid...), tail...)
}

// isText reports whether data reads as text (UTF-8 without NULs), which
// is shown line by line.
func isText(data []byte) bool {
	return utf8.Valid(data) && !bytes.Contains(data, []byte{0})
}

// describe is an entry as a person reads it in a diff.
func describe(e *entry) string {
	if e == nil {
		return "nothing"
	}
	switch e.Type {
	case typeFile:
		return fmt.Sprintf("file, %d bytes", e.Size)
	case typeLarge:
		return fmt.Sprintf("file, %d bytes (over the size limit: recorded by size and hash only)", e.Size)
	case typeLink:
		return "symlink"
	case typeSpecial:
		return e.Kind
	case typeSkipped:
		return "not recorded (" + e.Kind + ")"
	}
	return "?"
}
