// Package setting is the shape of the bounds a package puts on its own
// settings. The package declares each bound next to the code that relies
// on it, with the words that tell an owner what it wants; internal/config
// reads the variable, parses it and applies the package's bound, naming the
// variable in the error (BRIDGED_MAX_CONTAINERS="0": want a whole number
// from 1 to 1000). So config only reads and routes: what a value may be is
// the package's to say.
package setting

import "errors"

// Number is what a Range bounds: counts, sizes in bytes, durations, CPUs.
type Number interface {
	~int | ~int64 | ~float64
}

// Range bounds a number to [Min, Max]; with ZeroOff, 0 is also accepted
// (it turns the limit off). Want tells the owner what is accepted, for a
// value out of range and for one that is no number at all.
type Range[T Number] struct {
	Min, Max T
	ZeroOff  bool
	Want     string
}

// Check returns Want as an error when v is out of r.
func (r Range[T]) Check(v T) error {
	if (r.ZeroOff && v == 0) || (v >= r.Min && v <= r.Max) {
		return nil
	}
	return errors.New(r.Want)
}
