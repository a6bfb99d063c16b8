// Command miles-dashboard serves an otelcol-miles run directory (or a Python miles dashboard one) to a browser.
//
//	miles-dashboard serve --dir RUN [--follow] [--addr 127.0.0.1:7788] [--token T] [--cache-dir D]
//	miles-dashboard serve --root DIR [--addr 127.0.0.1:7788] [--token T]     # every run under DIR
//	                      [--memory-budget 2GiB]                             # parsed hours held, all runs
//
// It only reads the run directory. It binds loopback by default; any other address requires --token.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/dashboard/web"
)

func main() {
	if err := runUntilSignal(os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "miles-dashboard:", err)
		}
		os.Exit(1)
	}
}

// runUntilSignal runs the command under a context that SIGINT and SIGTERM cancel; its deferred stop (and every
// deferred close in run) has run by the time main exits.
func runUntilSignal(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintln(stderr, "usage: miles-dashboard serve --dir RUN [--follow] [--addr 127.0.0.1:7788] [--token T]\n       miles-dashboard serve --root DIR [--addr 127.0.0.1:7788] [--token T]")
		return flag.ErrHelp
	}
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", "", "run directory (the one holding dashboard/)")
	root := fl.String("root", "", "serve every run under this directory (a run library); live runs are followed")
	follow := fl.Bool("follow", false, "tail the files and push updates live")
	addr := fl.String("addr", "127.0.0.1:7788", "listen address; anything but loopback requires --token")
	token := fl.String("token", os.Getenv("MILES_DASHBOARD_TOKEN"), "access token (also MILES_DASHBOARD_TOKEN)")
	var allowedHosts []string
	fl.Func("allowed-hosts", "host names the dashboard is reached by besides loopback names and IP addresses, comma-separated (repeatable); requests naming any other host are refused (DNS rebinding)", func(v string) error {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				allowedHosts = append(allowedHosts, h)
			}
		}
		return nil
	})
	poll := fl.Duration("poll", 250*time.Millisecond, "follow: how often the files are checked for growth")
	pprofAddr := fl.String("pprof", "", "serve Go's profiles (net/http/pprof: heap, goroutine, profile) on this loopback address, e.g. 127.0.0.1:6060")
	cacheDir := fl.String("cache-dir", "", "where derived data is cached (parsed columns of closed hours, settled steps' explanations, dump step summaries); default: the user cache directory, never the run directory")
	settleEvery := fl.Duration("settle-every", 30*time.Second, "compute the explanations of the run's settled steps ahead, while no query is answered, and look for newly settled ones this often; 0: only when asked")
	noCache := fl.Bool("no-cache", false, "do not cache parsed columns of closed hours or settled steps' explanations")
	budget := int64(defaultMemoryBudget)
	fl.Func("memory-budget", "bytes of parsed hours (gpu_util, gpu_rollup, trajectories, engine_traces) held across every open run before the least recently used are dropped and read again when asked for, e.g. 2GiB, 512MiB; 0: unlimited (default 2GiB)", func(v string) error {
		n, err := parseBytes(v)
		budget = n
		return err
	})
	// Run settings the advisory rules need when the run directory does not record them (meta.json "args" of
	// miles v1 runs does; otelcol-miles runs do not yet).
	maxRunning := fl.Int("sglang-max-running-requests", 0, "advisory: the run's --sglang-max-running-requests per engine (enables the KV-bound and low-concurrency rules)")
	memFraction := fl.Float64("sglang-mem-fraction-static", 0, "advisory: the run's --sglang-mem-fraction-static (quoted in advice)")
	samplesPerPrompt := fl.Int("n-samples-per-prompt", 0, "advisory: the run's --n-samples-per-prompt (abort amplification note)")
	maxResponseLen := fl.Int("rollout-max-response-len", 0, "advisory: the run's --rollout-max-response-len (truncation advice)")
	thresholds, thresholdsSet := advisory.DefaultThresholds(), false
	fl.Func("advisory-threshold", "advisory: override rule thresholds, key=value[,key=value] (repeatable; *_s keys in seconds of run time), e.g. stall_min_age_s=60; keys: "+
		strings.Join(advisory.ThresholdNames(), ", "), func(v string) error {
		thresholdsSet = true
		return thresholds.Set(v)
	})
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if (*dir == "") == (*root == "") {
		return errors.New("give one of --dir RUN (one run) or --root DIR (every run under DIR)")
	}
	if err := checkExposure(*addr, *token); err != nil {
		return err
	}
	columns := ""
	if !*noCache {
		base := *cacheDir
		if base == "" {
			if d, err := os.UserCacheDir(); err == nil {
				base = filepath.Join(d, "otelcol-miles")
			}
		}
		if base != "" {
			columns = filepath.Join(base, "columns")
		}
	}
	assets, err := fs.Sub(web.Dist, "dist")
	if err != nil {
		return err
	}
	opts := server.Options{
		Token: *token, AllowedHosts: allowedHosts, Assets: assets, DumpCacheDir: *cacheDir,
		HiddenDirs: []string{*cacheDir, columns}, SettleEvery: *settleEvery,
	}
	if *maxRunning > 0 || *memFraction > 0 || *samplesPerPrompt > 0 || *maxResponseLen > 0 || thresholdsSet {
		c := advisory.Config{
			MaxRunningRequests: *maxRunning, MemFractionStatic: *memFraction,
			NSamplesPerPrompt: *samplesPerPrompt, MaxResponseLen: *maxResponseLen,
		}
		if thresholdsSet {
			c.Thresholds = thresholds
		}
		opts.Advisory = &c
	}
	mem := store.NewBudget(budget)
	opts.Budget = mem
	setMemoryLimit(budget)
	var handler http.Handler
	what, mode := *dir, "static"
	if *root != "" {
		if fi, err := os.Stat(*root); err != nil || !fi.IsDir() {
			return fmt.Errorf("--root %s is not a directory", *root)
		}
		run := opts
		run.Budget = nil // the library's /metrics shows it, once
		lib := server.NewLibrary(server.LibraryOptions{Root: *root, Run: run, FollowPoll: *poll, CacheDir: columns, Budget: mem})
		defer lib.Close()
		handler, what, mode = lib, *root, "run library"
	} else {
		st, err := store.Open(*dir, *follow)
		if err != nil {
			return err
		}
		if columns != "" {
			st.SetCacheDir(columns)
		}
		st.SetBudget(mem)
		opts.Store = st
		srv := server.New(opts)
		defer srv.Close()
		handler = srv
		if *follow {
			mode = "live"
			stopFollow := make(chan struct{})
			defer close(stopFollow)
			go st.Follow(*poll, stopFollow)
		}
	}
	if *pprofAddr != "" {
		stopProfiles, err := serveProfiles(*pprofAddr, stderr)
		if err != nil {
			return err
		}
		defer stopProfiles()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stdout, "miles-dashboard: serving %s (%s) at %s\n", what, mode, url)
	if *token != "" {
		// The token is never printed: terminals are scrolled back, logged and shared.
		fmt.Fprintf(stdout, "miles-dashboard: a token is required: open %s?token=<your token>, or send Authorization: Bearer <your token>\n", url)
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkExposure refuses to serve beyond loopback without a real token: the run's data would be readable by
// anyone who reaches the port (docs/operations.md "Exposure").
func checkExposure(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", addr, err)
	}
	if token != "" && strings.TrimSpace(token) == "" {
		return errors.New("--token is only white space: give a real token, or none on a loopback address")
	}
	if token != strings.TrimSpace(token) {
		return errors.New("--token starts or ends with white space, which an Authorization header cannot carry: remove it")
	}
	if !loopbackHost(host) && token == "" {
		return fmt.Errorf("--addr %s is not loopback: refusing to serve the run without --token", addr)
	}
	if !loopbackHost(host) && utf8.RuneCountInString(token) < minTokenLength {
		return fmt.Errorf("--addr %s is not loopback: the token must be at least %d characters (e.g. openssl rand -hex 16), a short one is guessed by trying", addr, minTokenLength)
	}
	return nil
}

// minTokenLength is the shortest token accepted beyond loopback (docs/operations.md "Exposure").
const minTokenLength = 16

// loopbackHost says whether a listen address's host reaches this machine only.
func loopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback() || host == "localhost"
}

// serveProfiles serves net/http/pprof on a loopback address (never beyond: profiles show paths and data), for an
// operator looking at the dashboard's memory or goroutines (docs/operations.md "Sizing").
func serveProfiles(addr string, stderr io.Writer) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof %q: %w", addr, err)
	}
	if !loopbackHost(host) {
		return nil, fmt.Errorf("--pprof %s is not loopback: profiles are served on loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "miles-dashboard: profiles at http://%s/debug/pprof/\n", ln.Addr())
	go func() { _ = hs.Serve(ln) }()
	return func() { _ = hs.Close() }, nil
}

// setMemoryLimit gives the Go runtime a soft memory limit of the budget plus 1 GiB, unless GOMEMLIMIT sets one
// or the budget is off. The heap otherwise grows to twice what is live before it is collected (GOGC=100), and
// dropped and reloaded hours make garbage fast: the limit makes the collector work harder near it instead of
// letting RSS run to twice the budget. The 1 GiB is for what stays resident outside the budget and the answers
// being written (docs/operations.md "Memory"); past the limit the runtime still grows the heap, at most half the
// CPU going to collection.
func setMemoryLimit(budget int64) {
	if budget <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(budget + 1<<30)
}

// defaultMemoryBudget bounds the parsed hours a dashboard holds (docs/operations.md "Memory"): about a day of a
// 128-GPU run's engine trace and trajectory hours, or a few 1024-GPU gpu_util hours.
const defaultMemoryBudget = 2 << 30

// parseBytes reads a byte count: a whole number with an optional unit, B, KiB, MiB, GiB, TiB (powers of 1024)
// or KB, MB, GB, TB (powers of 1000), case-insensitive.
func parseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 2GiB, 512MiB, 0)", v)
	}
	mult := map[string]int64{
		"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	}[strings.ToLower(strings.TrimSpace(s[i:]))]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", v, strings.TrimSpace(s[i:]))
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return n * mult, nil
}
