package server

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// clientQueue bounds what one page may have pending; a page that does not read is resynced, then dropped,
// and never slows the others: the hub only ever does non-blocking sends.
const clientQueue = 64

const resyncMsg = `{"type":"resync"}`

// writeTimeout drops a page whose connection accepts nothing for this long.
const writeTimeout = 5 * time.Second

// subscription is what a page asked for.
type subscription struct {
	Type    string   `json:"type"`
	View    string   `json:"view"`
	Lanes   string   `json:"lanes"`
	T0      *float64 `json:"t0"`
	T1      *float64 `json:"t1"`
	FollowS float64  `json:"follow_s"`
	Points  int      `json:"points"`
}

type client struct {
	conn    *websocket.Conn
	out     chan []byte
	mu      sync.Mutex
	sub     *subscription
	resync  bool // a resync is queued and not yet written: deltas are pointless until the page re-fetches
	closed  chan struct{}
	closeMu sync.Once
}

func (c *client) close() { c.closeMu.Do(func() { close(c.closed); _ = c.conn.Close() }) }

// hub fans store changes out to pages.
type hub struct {
	st      *store.Store
	srv     *Server
	mu      sync.Mutex
	clients map[*client]struct{}
	changes chan struct{}
	sent    float64 // data edge up to which deltas were sent
	metaV   int     // meta version last sent
	stop    chan struct{}
	up      websocket.Upgrader
}

func newHub(st *store.Store, srv *Server) *hub {
	h := &hub{st: st, srv: srv, clients: map[*client]struct{}{}, changes: st.Subscribe(), stop: make(chan struct{}),
		sent: st.Edge(), metaV: st.MetaVersion()}
	h.up = websocket.Upgrader{CheckOrigin: sameOrigin, ReadBufferSize: 4096, WriteBufferSize: 64 << 10}
	go h.run()
	return h
}

// sameOrigin accepts pages served by this server (or non-browser clients that send no Origin).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (h *hub) close() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	h.st.Unsubscribe(h.changes)
	h.mu.Lock()
	for c := range h.clients {
		c.close()
	}
	h.mu.Unlock()
}

func (h *hub) run() {
	for {
		select {
		case <-h.stop:
			return
		case <-h.changes:
			to := h.st.Edge()
			from := h.sent
			h.sent = math.Max(h.sent, to)
			var meta []byte
			if v := h.st.MetaVersion(); v != h.metaV {
				h.metaV = v
				meta, _ = json.Marshal(map[string]any{"type": "meta", "data": h.st.Meta()})
			}
			h.mu.Lock()
			cs := make([]*client, 0, len(h.clients))
			for c := range h.clients {
				cs = append(cs, c)
			}
			h.mu.Unlock()
			for _, c := range cs {
				if meta != nil {
					h.enqueue(c, meta)
				}
				if msg := h.delta(c, from, to); msg != nil {
					h.enqueue(c, msg)
				}
			}
		}
	}
}

// enqueue never blocks: on overflow the queue is replaced by one resync and further messages are skipped
// until the page has been sent it (it re-fetches its window then). A page whose socket does not drain for
// writeTimeout is dropped by its writer.
func (h *hub) enqueue(c *client, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resync {
		return
	}
	select {
	case c.out <- msg:
		return
	default:
	}
	c.resync = true
	for {
		select {
		case <-c.out:
			continue
		default:
		}
		break
	}
	select {
	case c.out <- []byte(resyncMsg):
	default:
	}
}

// delta computes what changed inside a client's window: the phases and GPU buckets of [from, to] (phases from
// a little earlier, since a phase that began before and just closed must replace its open marker).
func (h *hub) delta(c *client, from, to float64) []byte {
	c.mu.Lock()
	sub := c.sub
	c.mu.Unlock()
	if sub == nil || to <= from {
		return nil
	}
	t0, t1 := from-60, to
	if sub.FollowS <= 0 && sub.T0 != nil && sub.T1 != nil {
		t0, t1 = math.Max(t0, *sub.T0), math.Min(t1, *sub.T1)
	}
	if t1 <= t0 {
		return nil
	}
	if t1-t0 > store.WindowCap {
		t0 = t1 - store.WindowCap
	}
	lanes, _, err := h.st.Lanes(sub.Lanes)
	if err != nil {
		return nil
	}
	points := sub.Points
	if points <= 0 {
		points = 1000
	}
	width := math.Max(sub.FollowS, 60)
	if sub.T0 != nil && sub.T1 != nil {
		width = *sub.T1 - *sub.T0
	}
	n := int(math.Max(2, math.Min(4000, math.Ceil((t1-t0)/width*float64(points)))))
	msg, _ := json.Marshal(map[string]any{"type": "delta", "data": map[string]any{
		"t0": t0, "t1": t1, "data_edge": to,
		"phases": h.st.Phases(t0, t1, lanes),
		"gpu":    h.st.GPU(t0, t1, lanes, n, []string{"util", "mem_mb"}),
	}})
	return msg
}

func (h *hub) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader already answered
	}
	c := &client{conn: conn, out: make(chan []byte, clientQueue), closed: make(chan struct{})}
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.clients, c)
		h.mu.Unlock()
		c.close()
	}()
	meta, _ := json.Marshal(map[string]any{"type": "meta", "data": h.st.Meta()})
	c.out <- meta
	go h.writer(c)
	h.srv.explorerHello(c) // issue 8: the current advisory (explorer_live.go)
	conn.SetReadLimit(64 << 10)
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var sub subscription
		if json.Unmarshal(data, &sub) != nil || sub.Type != "subscribe" {
			h.enqueue(c, []byte(`{"type":"error","error":"expected {\"type\":\"subscribe\",…}"}`))
			continue
		}
		if _, _, err := h.st.Lanes(sub.Lanes); err != nil {
			msg, _ := json.Marshal(map[string]any{"type": "error", "error": err.Error()})
			h.enqueue(c, msg)
			continue
		}
		c.mu.Lock()
		c.sub = &sub
		c.mu.Unlock()
	}
}

func (h *hub) writer(c *client) {
	ping := time.NewTicker(20 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-c.closed:
			return
		case msg := <-c.out:
			_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				c.close()
				return
			}
			if string(msg) == resyncMsg {
				c.mu.Lock()
				c.resync = false
				c.mu.Unlock()
			}
		case <-ping.C:
			_ = c.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				c.close()
				return
			}
		}
	}
}
