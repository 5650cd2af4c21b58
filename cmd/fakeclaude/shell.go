package main

import (
	"regexp"
	"strings"
)

var (
	stmtSep    = regexp.MustCompile(`;|&&|\n`)
	redirectRE = regexp.MustCompile(`^[0-9]*(>>?|<)(&[0-9]+)?(.*)$`)
)

// builtinShell interprets the few commands the tests need when there is no
// /bin/sh (or FAKECLAUDE_NO_SHELL=1): statements separated by ';', '&&' or
// newlines, each one of `unset NAME...`, `export NAME=VALUE...`, `env`,
// `echo WORDS...`, `true`, `false`. Redirections are ignored; there is no
// quoting. It returns the output and the exit status of the last statement.
func builtinShell(command string, env []string) (string, int) {
	env = append([]string{}, env...)
	var out strings.Builder
	code := 0
	for _, stmt := range stmtSep.Split(command, -1) {
		var words []string
		fields := strings.Fields(stmt)
		for i := 0; i < len(fields); i++ {
			if m := redirectRE.FindStringSubmatch(fields[i]); m != nil {
				if m[2] == "" && m[3] == "" { // "> file": the target is the next word
					i++
				}
				continue
			}
			words = append(words, fields[i])
		}
		if len(words) == 0 {
			continue
		}
		code = 0
		switch words[0] {
		case "unset":
			for _, name := range words[1:] {
				if strings.HasPrefix(name, "-") {
					continue
				}
				env = removeVar(env, name)
			}
		case "export":
			for _, kv := range words[1:] {
				if k, _, ok := strings.Cut(kv, "="); ok {
					env = append(removeVar(env, k), kv)
				}
			}
		case "env":
			if len(words) > 1 {
				out.WriteString("env: only a plain `env` is supported by the built-in shell\n")
				code = 1
				continue
			}
			for _, kv := range env {
				out.WriteString(kv)
				out.WriteByte('\n')
			}
		case "echo":
			out.WriteString(strings.Join(words[1:], " "))
			out.WriteByte('\n')
		case "true":
		case "false":
			code = 1
		default:
			out.WriteString("sh: 1: " + words[0] + ": not found\n")
			code = 127
		}
	}
	return out.String(), code
}

func removeVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}
