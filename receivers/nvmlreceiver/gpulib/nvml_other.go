//go:build !cgo || !linux

package gpulib

// New returns a library whose Init reports ErrUnavailable: go-nvml needs cgo on Linux, and this binary was built
// without it (CGO_ENABLED=0, or another OS).
func New() Library { return unavailable{} }

type unavailable struct{}

var errNoCgo = &Error{
	Op:   "nvmlInit",
	Msg:  "this binary was built without cgo (CGO_ENABLED=0) or not for Linux, so it cannot load libnvidia-ml.so",
	Kind: ErrUnavailable,
}

func (unavailable) Init() error                       { return errNoCgo }
func (unavailable) Shutdown() error                   { return nil }
func (unavailable) DriverVersion() (string, error)    { return "", errNoCgo }
func (unavailable) DeviceCount() (int, error)         { return 0, errNoCgo }
func (unavailable) DeviceByIndex(int) (Device, error) { return nil, errNoCgo }
func (unavailable) WatchXID(Device) error             { return errNoCgo }
func (unavailable) PollXID(int) ([]XIDEvent, error)   { return nil, errNoCgo }
