package store

import "testing"

// Hooks for the external tests (engines_pack_advisory_test.go): the packed-hours run and the packing switch.
func PackRunForTest(t *testing.T) string { return packRun(t) }
func SetEngPackOffForTest(off bool)      { engPackOff = off }
func PackedSeriesForTest(st *Store) (packed, raw int) {
	return packedSeries(st)
}

// V1RunForTest writes the miles v1 run of v1run_test.go.
func V1RunForTest(t *testing.T, catalog bool) string { return v1Run(t, catalog) }
