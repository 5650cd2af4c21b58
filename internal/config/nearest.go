package config

// Nearest returns the candidate nearest to word by edit distance (an
// insertion, a deletion, a change or a swap of two neighbours each count
// one), or "" when none is near enough to be a likely slip: at most one
// edit for short words, two for longer ones, and never more than half the
// word. Case is ignored. The command line uses it for mistyped commands,
// resolve for unknown BRIDGED_ variables.
func Nearest(word string, candidates []string) string {
	best, bestD := "", -1
	w := []rune(lower(word))
	limit := 1
	if len(w) > 5 {
		limit = 2
	}
	if len(w) > 12 {
		limit = 3
	}
	for _, c := range candidates {
		d := distance(w, []rune(lower(c)))
		if d == 0 || d > limit || 2*d > len(w) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func lower(s string) string {
	b := []rune(s)
	for i, r := range b {
		if 'A' <= r && r <= 'Z' {
			b[i] = r + 'a' - 'A'
		}
	}
	return string(b)
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b []rune) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
