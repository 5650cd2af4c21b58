package media

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// bracket renders a placeholder: "[label: detail]".
func bracket(label, detail string) string {
	return "[" + label + ": " + detail + "]"
}

// VoicePlaceholder is what the agent sees for a voice note of length d
// saved at path: its transcript when err is nil, else why it is missing.
// A length of 0 (unknown) is left out.
func VoicePlaceholder(d time.Duration, path, text string, err error) string {
	head := "[voice note, " + path + "]"
	if s := int(d.Round(time.Second) / time.Second); s > 0 {
		head = fmt.Sprintf("[voice note %d:%02d, %s]", s/60, s%60, path)
	}
	if err != nil {
		return fmt.Sprintf("%s (transcript missing: %s)", head, oneLine(err.Error(), 160))
	}
	return fmt.Sprintf("%s %q", head, strings.TrimSpace(text))
}

// HumanBytes renders a size for placeholders ("25.3 MB").
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// SafeName makes name a plain file name for inbox/: letters, digits, '.',
// '-' and '_' kept, any other character '_', no leading dot, at most 120
// bytes (the start kept, and the extension); "file" when nothing is left.
func SafeName(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
	name = strings.TrimLeft(name, ".")
	if len(name) > maxName {
		ext := filepath.Ext(name)
		if len(ext) > 20 {
			ext = ""
		}
		name = name[:maxName-len(ext)] + ext
	}
	if name == "" {
		return "file"
	}
	return name
}

// maxName is the longest name SafeName gives.
const maxName = 120

// oneLine is s on one line, at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// oggDuration is the length of an Ogg Opus or Vorbis recording, read from
// the granule position of its last page; 0 when audio is not one.
func oggDuration(audio []byte) time.Duration {
	if len(audio) < 28 || string(audio[:4]) != "OggS" {
		return 0
	}
	var rate, skip uint64
	switch head := audio[28:min(len(audio), 28+64)]; {
	case len(head) >= 19 && string(head[:8]) == "OpusHead":
		rate, skip = 48000, uint64(binary.LittleEndian.Uint16(head[10:12]))
	case len(head) >= 16 && string(head[:7]) == "\x01vorbis":
		rate = uint64(binary.LittleEndian.Uint32(head[12:16]))
	default:
		return 0
	}
	last := strings.LastIndex(string(audio), "OggS")
	if rate == 0 || last < 0 || last+14 > len(audio) {
		return 0
	}
	granule := binary.LittleEndian.Uint64(audio[last+6 : last+14])
	if granule == ^uint64(0) || granule < skip {
		return 0
	}
	return time.Duration((granule - skip) * uint64(time.Second) / rate)
}
