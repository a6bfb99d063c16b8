package gpulibtest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
)

var _ gpulib.Library = (*Fake)(nil)

func TestFakeFollowsNVMLSemantics(t *testing.T) {
	f := NewH200Node(8)
	require.NoError(t, f.Init())
	n, err := f.DeviceCount()
	require.NoError(t, err)
	require.Equal(t, 8, n)

	uuids := map[string]bool{}
	for i := range n {
		d, err := f.DeviceByIndex(i)
		require.NoError(t, err)
		id, err := d.Identity()
		require.NoError(t, err)
		assert.Equal(t, i, id.Index)
		assert.Equal(t, "NVIDIA H200", id.Name)
		uuids[id.UUID] = true
		require.NoError(t, d.Close())
	}
	assert.Len(t, uuids, 8, "UUIDs are unique")

	d, err := f.DeviceByIndex(2)
	require.NoError(t, err)
	_, err = d.GPMMetrics()
	require.ErrorIs(t, err, gpulib.ErrNotReady, "GPM needs two samples")
	v, err := d.GPMMetrics()
	require.NoError(t, err)
	assert.True(t, v.OK[gpulib.GPMSMActivity])

	e1, _ := d.TotalEnergy()
	f.Advance()
	e2, _ := d.TotalEnergy()
	assert.Greater(t, e2, e1, "counters grow with the step")

	f.SetLost(f.GPU(2), true)
	_, err = d.Utilization()
	require.ErrorIs(t, err, gpulib.ErrDeviceLost)
	_, err = f.DeviceByIndex(2)
	require.ErrorIs(t, err, gpulib.ErrDeviceLost)
	f.SetLost(f.GPU(2), false)

	f.Swap(2, 6)
	id, err := d.Identity()
	require.NoError(t, err)
	assert.Equal(t, 6, id.Index, "the handle follows the GPU to its new index")
	require.NoError(t, d.Close())
	_, _, open := f.Stats()
	assert.Zero(t, open)
}

func TestA100HasNoGPMNorPCIeCounters(t *testing.T) {
	f := New(NewA100(0))
	d, err := f.DeviceByIndex(0)
	require.NoError(t, err)
	ok, err := d.GPMSupported()
	require.NoError(t, err)
	assert.False(t, ok)
	io, err := d.IOCounters()
	require.NoError(t, err)
	require.ErrorIs(t, io.PCIeErr, gpulib.ErrNotSupported)
	assert.NoError(t, io.NVLinkErr)
}
