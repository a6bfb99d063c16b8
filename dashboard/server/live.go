package server

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// The live hub: one WebSocket per page (/api/v1/live), over which the hub pushes what each stream
// (streams.go) says changed. Every stream has its own loop, so a slow one (the advisory reads the whole run)
// never delays another (the GPU deltas); all of them send through the same non-blocking queues.

// stream is one kind of live message.
type stream interface {
	// every is how often the stream is asked for its deltas: 0 at every store change; otherwise at most once
	// per every, after a store change, while pages are connected.
	every() time.Duration
	// greet is what a page gets from this stream when it connects (nil: nothing), and whether the stream wants
	// to be asked for its deltas now rather than at its next tick.
	greet() (msg []byte, askNow bool)
	// deltas is what changed since the last call: all goes to every page, each gives a page's message from
	// its subscription (nil before the page subscribed); either may be nil, and each may answer nil.
	deltas() (all []byte, each func(sub *subscription) []byte)
}

// ticker is a stream asked at every tick of its period, changed or not (the heartbeat).
type ticker interface{ ticks() bool }

// clientQueue and clientQueueBytes bound what one page may have pending (messages, bytes); a page that does
// not read is resynced, then dropped, and never slows the others: the hub only ever does non-blocking sends.
// The byte bound matters for per-page deltas: 64 deltas of a wide window at 4000 points are tens of MB.
const (
	clientQueue      = 64
	clientQueueBytes = 4 << 20
)

// socketSendBuffer bounds the kernel's send buffer of a page's socket (loopback autotuning grows it to
// several MB), so a page that stops reading fills it, and is dropped, after a bounded amount of data.
const socketSendBuffer = 256 << 10

const resyncMsg = `{"type":"resync"}`

// writeTimeout drops a page whose connection accepts nothing for this long.
const writeTimeout = 5 * time.Second

// liveMessage is every message the hub sends: {"type": …, "data": …} or {"type": "error", "error": …}.
type liveMessage struct {
	Type  string `json:"type"`
	Data  any    `json:"data,omitempty"`
	Error string `json:"error,omitempty"`
}

func (m liveMessage) encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

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
	queued  int  // bytes in out (under mu)
	resync  bool // a resync is queued and not yet written: deltas are pointless until the page re-fetches
	closed  chan struct{}
	closeMu sync.Once
}

func (c *client) close() { c.closeMu.Do(func() { close(c.closed); _ = c.conn.Close() }) }

func (c *client) subscription() *subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sub
}

// resyncing says whether the page waits for its resync to be written (it takes no deltas until then).
func (c *client) resyncing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resync
}

// hub fans the streams' deltas out to pages.
type hub struct {
	run     runReader
	streams []*streamLoop
	up      websocket.Upgrader
	// writeWait is how long a page's socket may accept nothing before the page is dropped (writeTimeout;
	// tests shorten it).
	writeWait time.Duration

	mu      sync.Mutex
	clients map[*client]struct{}
	closed  bool

	stop chan struct{}
	wg   sync.WaitGroup // the stream loops and the pages' writers
}

// streamLoop is one stream and what wakes its loop.
type streamLoop struct {
	stream
	changes chan struct{} // the store's change notifications
	asked   chan struct{} // a page asked for the stream's deltas now (capacity 1)
}

func newHub(run runReader, streams []stream) *hub {
	h := &hub{run: run, clients: map[*client]struct{}{}, stop: make(chan struct{}), writeWait: writeTimeout}
	h.up = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 64 << 10}
	for _, s := range streams {
		l := &streamLoop{stream: s, changes: run.Subscribe(), asked: make(chan struct{}, 1)}
		h.streams = append(h.streams, l)
		h.wg.Add(1)
		go h.loop(l)
	}
	return h
}

// close stops the loops and closes every page's socket; it returns once the loops and writers are done.
func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.stop)
	for c := range h.clients {
		c.close()
	}
	h.mu.Unlock()
	h.wg.Wait()
	for _, l := range h.streams {
		h.run.Unsubscribe(l.changes)
	}
}

// loop asks its stream for deltas: at every change, or at most every l.every() after one while pages are
// connected, and whenever a new page asked.
func (h *hub) loop(l *streamLoop) {
	defer h.wg.Done()
	var tick <-chan time.Time
	if every := l.every(); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	dirty := tick != nil // a timed stream sends what it has once pages connect
	tk, always := l.stream.(ticker)
	always = always && tk.ticks()
	for {
		select {
		case <-h.stop:
			return
		case <-l.changes:
			if tick == nil {
				h.ask(l)
			} else {
				dirty = true
			}
		case <-l.asked:
			h.ask(l)
			dirty = false
		case <-tick:
			if (dirty || always) && len(h.clientList()) > 0 {
				dirty = false
				h.ask(l)
			}
		}
	}
}

func (h *hub) ask(l *streamLoop) {
	all, each := l.deltas()
	if all == nil && each == nil {
		return
	}
	// A page's message depends only on its subscription: pages that subscribed alike (one view open in many
	// tabs, or a script opening many sockets) share one computation; a page waiting for its resync gets none.
	memo := map[subKey][]byte{}
	for _, c := range h.clientList() {
		if all != nil {
			h.enqueue(c, all)
		}
		if each == nil || c.resyncing() {
			continue
		}
		sub := c.subscription()
		key := sub.key()
		msg, ok := memo[key]
		if !ok {
			msg = each(sub)
			memo[key] = msg
		}
		if msg != nil {
			h.enqueue(c, msg)
		}
	}
}

// subKey is a subscription as a comparable value (the window bounds by value, not by pointer).
type subKey struct {
	set              bool // a page that has not subscribed yet: the zero key
	typ, view, lanes string
	t0, t1           float64
	hasT0, hasT1     bool
	followS          float64
	points           int
}

func (s *subscription) key() subKey {
	if s == nil {
		return subKey{}
	}
	k := subKey{set: true, typ: s.Type, view: s.View, lanes: s.Lanes, followS: s.FollowS, points: s.Points}
	if s.T0 != nil {
		k.t0, k.hasT0 = *s.T0, true
	}
	if s.T1 != nil {
		k.t1, k.hasT1 = *s.T1, true
	}
	return k
}

func (h *hub) clientList() []*client {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := make([]*client, 0, len(h.clients))
	for c := range h.clients {
		cs = append(cs, c)
	}
	return cs
}

// enqueue never blocks: on overflow (clientQueue messages or clientQueueBytes) the queue is replaced by one
// resync and further messages are skipped until the page has been sent it (it re-fetches its window then). A
// page whose socket does not drain for writeWait is dropped by its writer.
func (h *hub) enqueue(c *client, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resync {
		return
	}
	if c.queued+len(msg) <= clientQueueBytes {
		select {
		case c.out <- msg:
			c.queued += len(msg)
			return
		default:
		}
	}
	c.resync = true
	for {
		select {
		case m := <-c.out:
			c.queued -= len(m)
			continue
		default:
		}
		break
	}
	select {
	case c.out <- []byte(resyncMsg):
		c.queued += len(resyncMsg)
	default:
	}
}

// pending is what the page has queued: messages and bytes.
func (c *client) pending() (msgs, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out), c.queued
}

func (h *hub) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader already answered
	}
	if tc, ok := conn.NetConn().(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(socketSendBuffer)
	}
	c := &client{conn: conn, out: make(chan []byte, clientQueue), closed: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		_ = conn.Close()
		return
	}
	h.clients[c] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.clients, c)
		h.mu.Unlock()
		c.close()
	}()
	go func() {
		defer h.wg.Done()
		h.writer(c)
	}()
	for _, l := range h.streams {
		msg, now := l.greet()
		if msg != nil {
			h.enqueue(c, msg)
		}
		if now {
			select {
			case l.asked <- struct{}{}:
			default:
			}
		}
	}
	conn.SetReadLimit(64 << 10)
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var sub subscription
		if json.Unmarshal(data, &sub) != nil || sub.Type != "subscribe" {
			h.enqueue(c, liveMessage{Type: "error", Error: `expected {"type":"subscribe",…}`}.encode())
			continue
		}
		if _, _, err := h.run.Lanes(sub.Lanes); err != nil {
			h.enqueue(c, liveMessage{Type: "error", Error: err.Error()}.encode())
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
			c.mu.Lock()
			c.queued -= len(msg)
			c.mu.Unlock()
			_ = c.conn.SetWriteDeadline(time.Now().Add(h.writeWait))
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
			_ = c.conn.SetWriteDeadline(time.Now().Add(h.writeWait))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				c.close()
				return
			}
		}
	}
}
