//go:build !race

package main

// raceEnabled makes TestMain build the binaries under test with -race too.
const raceEnabled = false
