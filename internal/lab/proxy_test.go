package lab_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/machina-dev/machina/internal/lab"
)

// echoServer echoes what each connection sends and records every byte it received.
type echoServer struct {
	ln   net.Listener
	mu   sync.Mutex
	got  bytes.Buffer
	open int // connections not yet ended
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln}
	go s.serve()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *echoServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.open++
		s.mu.Unlock()
		go s.echo(c)
	}
}

func (s *echoServer) echo(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		s.open--
		s.mu.Unlock()
	}()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		s.mu.Lock()
		s.got.Write(buf[:n])
		s.mu.Unlock()
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (s *echoServer) received() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

func (s *echoServer) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

func newProxy(t *testing.T, s *echoServer) *lab.Proxy {
	t.Helper()
	p, err := lab.NewProxy(s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *lab.Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dialling the proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends msg and wants it echoed within 5 s.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("writing %q: %v", msg, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo of %q: got %q, %v", msg, buf, err)
	}
}

// wantClosed wants the proxy to close c: a read ends with EOF or a reset within 5 s.
func wantClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: still open after 5 s", what)
	}
}

// wantSilent wants nothing to arrive on c for a while (a stall: no end, no bytes).
func wantSilent(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(make([]byte, 64))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %d bytes, %v during a stall; want nothing", what, n, err)
	}
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProxyDrop: a Drop closes the open connection and every new one on accept; after Heal
// new connections forward again.
func TestProxyDrop(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s)
	old := dial(t, p)
	roundTrip(t, old, "before")

	p.Cut(lab.Drop)
	wantClosed(t, old, "the connection open at the Drop")
	during := dial(t, p)
	_, _ = during.Write([]byte("during"))
	wantClosed(t, during, "a connection made during the Drop")

	p.Heal()
	roundTrip(t, dial(t, p), "after")
	if got := s.received(); got != "beforeafter" {
		t.Errorf("the server received %q, want %q", got, "beforeafter")
	}
	if st := p.Stats(); st.Accepted != 3 || st.Refused != 1 || st.Cut != 1 {
		t.Errorf("stats %+v, want 3 accepted, 1 refused, 1 cut", st)
	}
}

// TestProxyDelay: with a delay every chunk is held that long each way, so an echo takes at
// least twice it; at zero again it does not wait.
func TestProxyDelay(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s)
	c := dial(t, p)
	p.SetDelay(300 * time.Millisecond)
	start := time.Now()
	roundTrip(t, c, "slow")
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("an echo through a 300-ms delay took %s, want at least 600ms", took)
	}
	p.SetDelay(0)
	roundTrip(t, c, "fast")
	if got := s.received(); got != "slowfast" {
		t.Errorf("the server received %q, want %q", got, "slowfast")
	}
}

// TestProxyStall: a Stall keeps connections open but forwards nothing either way, new ones
// included; on Heal every connection of the stall is closed, nothing sent during it ever
// reaches the server, and new connections forward again.
func TestProxyStall(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s)
	old := dial(t, p)
	roundTrip(t, old, "before")

	p.Cut(lab.Stall)
	if _, err := old.Write([]byte("stalled-old")); err != nil {
		t.Fatalf("a write during the stall failed: %v", err)
	}
	wantSilent(t, old, "the connection open at the Stall")
	during := dial(t, p)
	if _, err := during.Write([]byte("stalled-new")); err != nil {
		t.Fatalf("a write on a connection made during the stall failed: %v", err)
	}
	wantSilent(t, during, "a connection made during the Stall")

	p.Heal()
	wantClosed(t, old, "the connection open at the Stall, after Heal")
	wantClosed(t, during, "the connection made during the Stall, after Heal")
	roundTrip(t, dial(t, p), "after")
	// Once the server has seen its side of the stalled connection end, nothing can be late.
	eventually(t, "the server's stalled connection to end", func() bool { return s.openConns() == 1 })
	if got := s.received(); strings.Contains(got, "stalled") || got != "beforeafter" {
		t.Errorf("the server received %q, want %q: bytes of the stall were delivered", got, "beforeafter")
	}
}

// TestProxyHalfClose: a client's end of writing reaches the server, whose answer still
// comes back.
func TestProxyHalfClose(t *testing.T) {
	s := newEchoServer(t)
	p := newProxy(t, s)
	c := dial(t, p)
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("after a half-close: got %q, %v", got, err)
	}
}
