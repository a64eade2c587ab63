package lab

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// CutMode is how a Proxy partitions its clients from its target.
type CutMode int

const (
	// Drop closes every open connection at once and each new one as it is accepted: the
	// clients see resets and refused handshakes, as when the target's host is gone.
	Drop CutMode = iota
	// Stall keeps connections open but forwards nothing in either direction, and accepts new
	// connections without forwarding them: the clients see a black hole until they time out.
	Stall
)

func (m CutMode) String() string {
	switch m {
	case Drop:
		return "Drop"
	case Stall:
		return "Stall"
	}
	return fmt.Sprintf("CutMode(%d)", int(m))
}

// Proxy is a TCP proxy on a loopback port to one target, which can partition its clients from
// the target (Cut) and join them again (Heal). Nothing a client sends during a cut ever
// reaches the target: every connection open during a cut is closed when it heals.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	mode   CutMode
	closed bool
	conns  map[*proxyConn]struct{}

	stats ProxyStats   // updated atomically
	delay atomic.Int64 // SetDelay's, in nanoseconds
}

// ProxyStats counts what a Proxy has done.
type ProxyStats struct {
	Accepted  int64 // connections accepted
	Refused   int64 // connections closed on accept during a Drop
	Cut       int64 // connections closed by a cut or its heal
	Forwarded int64 // bytes forwarded, both directions
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	client, upstream net.Conn // upstream is nil for a connection accepted during a Stall
	doomed           atomic.Bool
	closeOnce        sync.Once
}

// NewProxy listens on 127.0.0.1:0 and forwards every connection to target (host:port).
func NewProxy(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("lab: proxy target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lab: proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's listening address, 127.0.0.1:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{
		Accepted:  atomic.LoadInt64(&p.stats.Accepted),
		Refused:   atomic.LoadInt64(&p.stats.Refused),
		Cut:       atomic.LoadInt64(&p.stats.Cut),
		Forwarded: atomic.LoadInt64(&p.stats.Forwarded),
	}
}

// SetDelay holds every chunk the proxy forwards, either way, for d before passing it on: a
// slow link, on connections open and new alike. Zero forwards at once again.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Cut partitions the clients from the target until Heal. A Drop closes the open connections
// before Cut returns; after a Stall no byte that reaches the proxy from either side is
// forwarded (bytes it had read before may still be, as the cut begins).
func (p *Proxy) Cut(mode CutMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.mode = true, mode
	for c := range p.conns {
		c.doomed.Store(true)
		if mode == Drop {
			p.closeLocked(c)
		}
	}
}

// Heal ends a cut: every connection that was open during it is closed (what its client sent
// meanwhile is discarded), and new connections are forwarded again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c := range p.conns {
		if c.doomed.Load() {
			p.closeLocked(c)
		}
	}
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		p.closeLocked(c)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		atomic.AddInt64(&p.stats.Accepted, 1)
		p.wg.Add(1)
		go p.serve(conn)
	}
}

// serve connects a new client to the target, unless a cut says otherwise.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	c := &proxyConn{client: client}
	if p.refused(c) {
		return
	}
	upstream, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.register(c, upstream) {
		return
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go p.pump(c, &pumps, client, upstream)
	go p.pump(c, &pumps, upstream, client)
	pumps.Wait()
	if !c.doomed.Load() {
		p.close(c)
	}
}

// refused closes a client accepted during a Drop, and keeps one accepted during a Stall
// open without forwarding it (Heal closes it). It reports whether the client was handled.
func (p *Proxy) refused(c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed || p.cut && p.mode == Drop:
		c.client.Close()
		atomic.AddInt64(&p.stats.Refused, 1)
		return true
	case p.cut:
		c.doomed.Store(true)
		p.conns[c] = struct{}{}
		return true
	}
	return false
}

// register records a connection dialled to the target; a cut that began while dialling
// applies to it. It reports whether the connection is to be forwarded.
func (p *Proxy) register(c *proxyConn, upstream net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.upstream = upstream
	switch {
	case p.closed || p.cut && p.mode == Drop:
		c.client.Close()
		upstream.Close()
		atomic.AddInt64(&p.stats.Refused, 1)
		return false
	case p.cut:
		c.doomed.Store(true)
		p.conns[c] = struct{}{}
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// pump copies src to dst until either ends or the connection is doomed by a cut. A doomed
// connection forwards nothing more, not even its end: it stays open until Heal or Close.
func (p *Proxy) pump(c *proxyConn, done *sync.WaitGroup, src, dst net.Conn) {
	defer done.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if c.doomed.Load() {
			return
		}
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.close(c)
				return
			}
			atomic.AddInt64(&p.stats.Forwarded, int64(n))
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) && closeWrite(dst):
			return // the end passed on as a half-close; the other direction goes on
		default:
			p.close(c)
			return
		}
	}
}

// closeWrite passes the end of one direction on, if dst can half-close.
func closeWrite(dst net.Conn) bool {
	tc, ok := dst.(*net.TCPConn)
	return ok && tc.CloseWrite() == nil
}

func (p *Proxy) close(c *proxyConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked(c)
}

// closeLocked closes both sides of c and forgets it; p.mu is held.
func (p *Proxy) closeLocked(c *proxyConn) {
	c.closeOnce.Do(func() {
		c.client.Close()
		if c.upstream != nil {
			c.upstream.Close()
		}
		if c.doomed.Load() {
			atomic.AddInt64(&p.stats.Cut, 1)
		}
	})
	delete(p.conns, c)
}

// ProxiedConfig returns a copy of cfg whose requests go through p. The scheme and the TLS
// settings are kept: the lab's kube-apiserver certificate names 127.0.0.1, the proxy's
// address, so the server is still verified.
func ProxiedConfig(cfg *rest.Config, p *Proxy) *rest.Config {
	out := rest.CopyConfig(cfg)
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		u.Host = p.Addr()
		out.Host = u.String()
	} else {
		out.Host = p.Addr()
	}
	return out
}
