//go:build !race

package transcript

// raceEnabled: the race detector slows decoding about tenfold, so heavy tests do less.
const raceEnabled = false
