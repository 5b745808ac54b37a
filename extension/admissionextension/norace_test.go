//go:build !race

package admissionextension

// raceEnabled: see race_test.go.
const raceEnabled = false
