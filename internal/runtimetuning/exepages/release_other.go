//go:build !linux

package exepages

// Release does nothing outside Linux.
func Release() error { return nil }
