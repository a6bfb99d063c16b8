package store

import "testing"

// Hooks for the external tests (engines_pack_advisory_test.go): the packed-hours run and the packing switch.
func PackRunForTest(t *testing.T) string { return packRun(t) }
func SetEngPackOffForTest(off bool)      { engPackOff = off }
func PackedSeriesForTest(st *Store) (packed, raw int) {
	return packedSeries(st)
}
