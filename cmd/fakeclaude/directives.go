package main

import (
	"regexp"
	"strconv"
	"strings"
)

// directive is one fake:<verb> found in a prompt.
type directive struct {
	verb string
	arg  string
}

var (
	directiveRE = regexp.MustCompile(`fake:(reply|sleep|stall|crash|error|tool|bash|write|fetch|compact|pid|api|flood|prompt|memory)\b`)
	messageRE   = regexp.MustCompile(`(?s)<message(?:\s[^>]*)?>(.*?)</message>`)
)

// promptTexts returns the texts directives are read from: the unescaped
// bodies of the <message> elements when the prompt has any, else the whole
// unescaped prompt.
func promptTexts(prompt string) []string {
	ms := messageRE.FindAllStringSubmatch(prompt, -1)
	if len(ms) == 0 {
		return []string{unescapeXML(prompt)}
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = unescapeXML(m[1])
	}
	return out
}

// parseDirectives finds every directive in the prompt, in order. A
// directive's argument runs to the end of its line or to the next directive
// on that line, trimmed.
func parseDirectives(prompt string) []directive {
	var out []directive
	for _, text := range promptTexts(prompt) {
		for _, line := range strings.Split(text, "\n") {
			locs := directiveRE.FindAllStringSubmatchIndex(line, -1)
			for i, loc := range locs {
				end := len(line)
				if i+1 < len(locs) {
					end = locs[i+1][0]
				}
				out = append(out, directive{
					verb: line[loc[2]:loc[3]],
					arg:  strings.TrimSpace(line[loc[1]:end]),
				})
			}
		}
	}
	return out
}

// defaultReply answers a prompt without directives.
func defaultReply(m userMsg) string {
	ms := messageRE.FindAllStringSubmatch(m.text, -1)
	if len(ms) == 0 {
		return "echo: " + m.text
	}
	return "echo: " + unescapeXML(ms[len(ms)-1][1])
}

// unescapeXML undoes XML escaping: the five named entities and numeric
// character references. Anything else is left as it is.
func unescapeXML(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '&' {
			b.WriteByte(s[i])
			i++
			continue
		}
		semi := strings.IndexByte(s[i:], ';')
		if semi < 0 || semi > 12 {
			b.WriteByte('&')
			i++
			continue
		}
		ent := s[i+1 : i+semi]
		if r, ok := entity(ent); ok {
			b.WriteString(r)
			i += semi + 1
			continue
		}
		b.WriteByte('&')
		i++
	}
	return b.String()
}

func entity(e string) (string, bool) {
	switch e {
	case "lt":
		return "<", true
	case "gt":
		return ">", true
	case "amp":
		return "&", true
	case "quot":
		return `"`, true
	case "apos":
		return "'", true
	}
	if num, ok := strings.CutPrefix(e, "#"); ok {
		base := 10
		if h, ok := strings.CutPrefix(num, "x"); ok {
			num, base = h, 16
		} else if h, ok := strings.CutPrefix(num, "X"); ok {
			num, base = h, 16
		}
		n, err := strconv.ParseUint(num, base, 32)
		if err != nil || n == 0 || n > 0x10FFFF {
			return "", false
		}
		return string(rune(n)), true
	}
	return "", false
}
