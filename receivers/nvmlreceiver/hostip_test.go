package nvmlreceiver

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"
)

func hostIPsOf(t *testing.T, md pmetric.Metrics) string {
	t.Helper()
	require.Positive(t, md.ResourceMetrics().Len())
	v, ok := md.ResourceMetrics().At(0).Resource().Attributes().Get(semconv.HostIP)
	require.True(t, ok, "resource without host.ip")
	var out []string
	for _, x := range v.Slice().All() {
		out = append(out, x.Str())
	}
	return strings.Join(out, ",")
}

// TestResourceHostIP: every GPU resource lists the node's addresses as host.ip (docs/semconv.md §1, "Node
// identity"): the host_ips setting, else the machine's unicast addresses without loopback and link-local ones.
func TestResourceHostIP(t *testing.T) {
	saved := interfaceAddrs
	t.Cleanup(func() { interfaceAddrs = saved })
	interfaceAddrs = func() ([]net.Addr, error) {
		var out []net.Addr
		for _, c := range []string{"127.0.0.1/8", "10.1.2.3/24", "fe80::1/64", "2001:db8::5/64", "::1/128"} {
			ip, n, err := net.ParseCIDR(c)
			require.NoError(t, err)
			out = append(out, &net.IPNet{IP: ip, Mask: n.Mask})
		}
		return out, nil
	}
	h := newHarness(t, gpulibtest.NewH200Node(2), func(c *Config) { c.HostIPs = nil })
	h.open()
	require.Equal(t, "10.1.2.3,2001:db8::5", hostIPsOf(t, h.tick()))

	h = newHarness(t, gpulibtest.NewH200Node(2), func(c *Config) { c.HostIPs = []string{"10.0.0.2"} })
	h.open()
	require.Equal(t, "10.0.0.2", hostIPsOf(t, h.tick()))
}
