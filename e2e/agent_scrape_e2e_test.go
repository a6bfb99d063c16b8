package e2e

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

// scrapedEngine is a fake sglang engine (internal/fakesglang's exposition text) whose /metrics handler records
// which process each scrape came from: the scraper's side of the loopback connection is looked up in /proc, so
// the test knows which agent scraped, not only that someone did.
type scrapedEngine struct {
	srv     *httptest.Server
	e       *fakesglang.Engine
	fed     fed
	node    string
	mu      sync.Mutex
	pids    []int       // the agent processes a scrape may come from; set before the engine is listed
	served  int         // /metrics answered
	by      map[int]int // scraper pid → scrapes (0: a process that is none of pids)
	lookups []string    // failed owner lookups, reported by the test
}

func startScrapedEngine(t *testing.T, node string, cfg fakesglang.Config, n int) *scrapedEngine {
	t.Helper()
	s := &scrapedEngine{e: fakesglang.NewEngine(cfg), node: node, by: map[int]int{}}
	s.fed = feedEngine(s.e, n)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		pids := s.pids
		s.mu.Unlock()
		pid, err := socketOwner(r.RemoteAddr, s.srv.Listener.Addr().String(), pids)
		var b strings.Builder
		fakesglang.WriteText(&b, s.e.Families(time.Now()), nil, false)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
		s.mu.Lock()
		defer s.mu.Unlock()
		s.served++
		s.by[pid]++
		if err != nil {
			s.lookups = append(s.lookups, err.Error())
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scrapedEngine) addr() string { return s.srv.Listener.Addr().String() }
func (s *scrapedEngine) url() string  { return "http://" + s.addr() }

func (s *scrapedEngine) counts() (served int, by map[int]int, lookups []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served, maps.Clone(s.by), append([]string(nil), s.lookups...)
}

// socketOwner returns which of pids holds the client end (client, e.g. "127.0.0.1:51234") of a TCP connection
// to server: the socket's inode from /proc/net/tcp, then the process whose fd table links to it. 0 with an error
// when none of them does.
func socketOwner(client, server string, pids []int) (int, error) {
	hexAddr := func(hostPort string) (string, error) {
		ap, err := net.ResolveTCPAddr("tcp", hostPort)
		if err != nil {
			return "", err
		}
		ip := ap.IP.To4()
		if ip == nil {
			return "", fmt.Errorf("%s: not IPv4", hostPort)
		}
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port), nil // little-endian word
	}
	local, err := hexAddr(client)
	if err != nil {
		return 0, err
	}
	remote, err := hexAddr(server)
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	inode := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) > 9 && fl[1] == local && fl[2] == remote {
			inode = fl[9]
			break
		}
	}
	if inode == "" {
		return 0, fmt.Errorf("no /proc/net/tcp entry for %s -> %s", client, server)
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join(fdDir, fd.Name())); l == want {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("the client end %s (inode %s) belongs to none of the agents %v", client, inode, pids)
}

// TestAgentScrapesOwnNodeE2E: two agents (configs/agent.yaml, MILES_NODE n1.rack and n2.rack) on one host stand
// for two nodes; one file_sd file (as the trainer writes it, docs/semconv.md §9) lists fake engines on n1.rack
// (two), n2.rack (one), and two nodes without an agent: n1.rack0 (whose name n1.rack prefixes) and n1xrack (which
// n1.rack matches as a regex): the `node` match is a whole-string comparison. n2.rack's agent also has its
// address (MILES_NODE_IP, as miles' topology names nodes: docs/semconv.md §1.1): the engine listed under
// 10.0.0.7 is n2.rack's, the ones under 10x0x0x7 and under no node nobody's. Each engine is scraped by its own node's agent only
// (the scrape's connection belongs to that process), the agentless nodes' engines by none,
// and the gateway's engine_series holds each scrape once: as many `up` records per engine as it answered scrapes,
// with that engine's own counter and histogram values.
func TestAgentScrapesOwnNodeE2E(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("needs Linux /proc to tell which agent scraped an engine")
	}
	runDir := t.TempDir()
	engines := []*scrapedEngine{
		startScrapedEngine(t, "n1.rack", fakesglang.Config{DPSize: 2}, 5),
		startScrapedEngine(t, "n1.rack", fakesglang.Config{EngineType: fakesglang.EnginePrefill}, 3),
		startScrapedEngine(t, "n2.rack", fakesglang.Config{}, 7),
		startScrapedEngine(t, "n1.rack0", fakesglang.Config{}, 2),
		startScrapedEngine(t, "n1xrack", fakesglang.Config{}, 4),
		startScrapedEngine(t, "10.0.0.7", fakesglang.Config{}, 6),
		startScrapedEngine(t, "10x0x0x7", fakesglang.Config{}, 1),
		startScrapedEngine(t, "", fakesglang.Config{}, 1), // no node: only an agent without MILES_NODE takes it
	}
	owner := map[string]string{"n1.rack": "n1.rack", "n2.rack": "n2.rack", "10.0.0.7": "n2.rack"}
	nodeIP := map[string]string{"n2.rack": `10\.0\.0\.7`}
	gw := e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{e2etest.Config("gateway.yaml")}})
	agents := map[string]*e2etest.Collector{}
	var pids []int
	for _, node := range []string{"n1.rack", "n2.rack"} {
		agents[node] = e2etest.StartCollector(t, runDir, e2etest.Options{
			Configs: []string{e2etest.Config("agent.yaml")},
			Env:     []string{"MILES_NODE=" + node, "MILES_NODE_IP=" + nodeIP[node], "MILES_GATEWAYS=" + gw.GRPCAddr},
		})
		pids = append(pids, agents[node].PID())
	}
	// The targets appear once both agents run (the file_sd watch picks the file up), so every scrape is
	// attributable and counted.
	var groups []map[string]any
	for i, e := range engines {
		e.mu.Lock()
		e.pids = pids
		e.mu.Unlock()
		groups = append(groups, target(e.addr(), i, "node", e.node))
	}
	writeTargets(t, runDir, groups)

	e2etest.Eventually(t, 60*time.Second, "three scrapes of every engine of n1.rack and n2.rack", func() bool {
		for _, e := range engines {
			if n, _, _ := e.counts(); owner[e.node] != "" && n < 3 {
				return false
			}
		}
		return true
	})
	// Engines first (a scrape in progress finishes its answer; later ones fail with up=0), then the agents (they
	// flush to the gateway), then the gateway (it flushes to disk): every answered scrape is in the files.
	for _, e := range engines {
		e.srv.Close()
	}
	for _, a := range agents {
		a.Stop(t)
	}
	gw.Stop(t)

	recs := e2etest.EngineSeries(t, runDir)
	ups := map[string]int{}
	var answered []map[string]any // without the up=0 of scrapes after the engines closed
	for _, r := range recs {
		if r["metric"] == "up" && r["v"] == 1.0 {
			ups[r["addr"].(string)]++
		}
		if r["metric"] != "up" || r["v"] == 1.0 {
			answered = append(answered, r)
		}
	}
	for _, e := range engines {
		served, by, lookups := e.counts()
		if len(lookups) > 0 {
			t.Errorf("engine %s (node %s): scrapes from no agent: %v", e.url(), e.node, lookups)
		}
		own := 0
		a := agents[owner[e.node]]
		if a != nil {
			own = by[a.PID()]
		}
		t.Logf("engine %s on %s: %d scrapes answered, %d by its node's agent, %d up records in the files",
			e.url(), e.node, served, own, ups[e.url()])
		if own != served {
			t.Errorf("engine %s on %s: %d of its %d scrapes came from another process (by pid: %v)", e.url(), e.node, served-own, served, by)
		}
		if a == nil {
			if served != 0 || ups[e.url()] != 0 {
				t.Errorf("engine %s on %s (no agent there) was scraped %d times, %d up records", e.url(), e.node, served, ups[e.url()])
			}
			for _, r := range recs {
				if r["addr"] == e.url() {
					t.Fatalf("record of the unscraped engine on %s: %v", e.node, r)
				}
			}
			continue
		}
		if ups[e.url()] != served {
			t.Errorf("engine %s: %d scrapes answered, %d up=1 records in the files: each scrape must be written once", e.url(), served, ups[e.url()])
		}
		checkEngine(t, answered, e.url(), e.e, e.fed)
	}
}
