package rules

import (
	"errors"
	"unicode"
)

// CheckAssistantName says why s cannot be the assistant's name (nil when it
// can): the name is the trigger's word (@<name>), so it is one word of at
// most 32 letters, digits, - or _, starting with a letter or digit. (A loop,
// not a regexp: the bounded Unicode classes compile to a program of most of
// a megabyte the daemon would carry for its whole life.)
func CheckAssistantName(s string) error {
	if !validAssistantName(s) {
		return errors.New("want a single word of letters, digits, - or _ (at most 32)")
	}
	return nil
}

func validAssistantName(s string) bool {
	n := 0
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsNumber(r):
		case n > 0 && (r == '-' || r == '_'):
		default:
			return false
		}
		if n++; n > 32 {
			return false
		}
	}
	return n > 0
}
