package server

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Who may read the run (docs/operations.md "Exposure"): the Host a request names, the Origin of a page that
// opens the WebSocket, the token; and what an answer may say about the server's own files.

// access is the server's admission rules, fixed at New.
type access struct {
	// token is the SHA-256 of the token; tokenSet says one is required.
	token    [sha256.Size]byte
	tokenSet bool
	// hosts are the host names (lower case, no port) requests may name besides loopback names and IP
	// literals.
	hosts map[string]bool
	// hidden are the server directories whose names an answer never shows, longest first, each with what
	// replaces it.
	hidden []hiddenDir
}

type hiddenDir struct{ dir, shown string }

func newAccess(token string, hosts []string) access {
	a := access{hosts: map[string]bool{}}
	if token != "" {
		a.token, a.tokenSet = sha256.Sum256([]byte(token)), true
	}
	for _, h := range hosts {
		if h = normalHost(h); h != "" {
			a.hosts[h] = true
		}
	}
	return a
}

// normalHost is a host name as compared: lower case, without a port, brackets or a trailing dot.
func normalHost(hostport string) string {
	h := strings.TrimSpace(hostport)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// hostAllowed says whether a request may name this host (its Host header, or a page's Origin). A DNS
// rebinding attack reaches the server under the attacker's own name, so names are what is checked: loopback
// names (localhost, *.localhost) and the configured ones pass; an IP literal passes too, since no page can
// make a browser send one it was not loaded from.
func (a *access) hostAllowed(hostport string) bool {
	h := normalHost(hostport)
	switch {
	case h == "":
		return false
	case net.ParseIP(h) != nil:
		return true
	case h == "localhost", strings.HasSuffix(h, ".localhost"):
		return true
	}
	return a.hosts[h]
}

// originAllowed accepts a WebSocket from a page whose origin names an allowed host (or from a client that
// sends no Origin, which no browser page can be). A name is never accepted for equalling the request's own
// Host: a rebound page's Host and Origin agree. An IP literal is an address the page was loaded from, so it
// passes only as the dashboard's own origin (the request's Host) or a loopback one: a page of any other address
// would otherwise read over a WebSocket what the same-origin policy keeps from it over HTTP
// (docs/operations.md "Exposure").
func (a *access) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if ip := net.ParseIP(normalHost(u.Host)); ip != nil {
		return ip.IsLoopback() || strings.EqualFold(u.Host, r.Host)
	}
	return a.hostAllowed(u.Host)
}

// authorized checks the token of a request: ?token= or an Authorization header of the Bearer scheme (any
// case, RFC 9110 §11.1). Both sides are hashed first, so the comparison takes the same time whatever the
// length or content of the token sent.
func (a *access) authorized(r *http.Request) bool {
	if !a.tokenSet {
		return true
	}
	got, sent := r.URL.Query().Get("token"), r.URL.Query().Has("token")
	if scheme, cred, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Bearer") {
		got, sent = strings.TrimSpace(cred), true
	}
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], a.token[:]) == 1 && sent
}

// hide registers a server directory whose name answers replace by shown ("" for a run's own files, which are
// then named relative to the run); its resolved form is hidden too.
func (a *access) hide(dir, shown string) {
	if dir == "" {
		return
	}
	seen := map[string]bool{}
	for _, d := range []string{dir, abs(dir), resolved(dir)} {
		if d != "" && d != "/" && !seen[d] {
			seen[d] = true
			a.hidden = append(a.hidden, hiddenDir{filepath.Clean(d), shown})
		}
	}
	sort.SliceStable(a.hidden, func(i, j int) bool { return len(a.hidden[i].dir) > len(a.hidden[j].dir) })
}

func abs(d string) string {
	a, err := filepath.Abs(d)
	if err != nil {
		return ""
	}
	return a
}

func resolved(d string) string {
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		return ""
	}
	return abs(r)
}

// redact replaces every hidden directory in a message: "/srv/runs/r1/dashboard/x.jsonl" becomes
// "dashboard/x.jsonl".
func (a *access) redact(msg string) string {
	for _, h := range a.hidden {
		if !strings.Contains(msg, h.dir) {
			continue
		}
		shown := h.shown
		if shown != "" {
			shown += "/"
		}
		msg = strings.ReplaceAll(msg, h.dir+string(filepath.Separator), shown)
		msg = strings.ReplaceAll(msg, h.dir, strings.TrimSuffix(cmp.Or(shown, "."), "/"))
	}
	return msg
}

// redactErr keeps an error's kind and redacts its message.
func (a *access) redactErr(err error) error {
	ae := classify(err)
	msg := a.redact(ae.Error())
	if msg == ae.Error() {
		return ae
	}
	return &apiError{ae.typ, errors.New(msg)}
}

// redactedRun is the run as the API shows it: its notices name no server directory.
type redactedRun struct {
	runReader
	a *access
}

func (r redactedRun) Meta() *store.MetaResult {
	m := r.runReader.Meta()
	if m == nil || len(r.a.hidden) == 0 {
		return m
	}
	out := *m
	out.Notices = make([]store.Notice, len(m.Notices))
	for i, n := range m.Notices {
		out.Notices[i] = store.Notice{Level: n.Level, Message: r.a.redact(n.Message)}
	}
	return &out
}
