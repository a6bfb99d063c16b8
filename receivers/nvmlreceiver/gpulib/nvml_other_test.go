//go:build !cgo || !linux

package gpulib

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNoCgoLibraryIsUnavailable(t *testing.T) {
	lib := New()
	err := lib.Init()
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "built without cgo")
	_, err = lib.DeviceCount()
	assert.ErrorIs(t, err, ErrUnavailable)
}
