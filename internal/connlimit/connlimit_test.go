package connlimit_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/protobase/protobase/internal/connlimit"
)

// serve accepts on l and hands each connection to conns until l closes.
func serve(t *testing.T, l net.Listener) <-chan net.Conn {
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(conns)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return conns
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer reports whether the server closed c (EOF or reset)
// within 5 s.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && (!errors.As(err, &ne) || !ne.Timeout())
}

// At the cap a new connection is closed at once and counted; the ones
// held keep working; closing one (twice, even) frees one slot.
func TestCap(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.Wrap(raw, "test", 2, nil)
	conns := serve(t, l)
	addr := raw.Addr().String()

	dial(t, addr)
	c2 := dial(t, addr)
	s1, s2 := <-conns, <-conns
	over := dial(t, addr)
	if !closedByServer(over) {
		t.Fatal("the connection over the cap is open")
	}
	if l.Open() != 2 || l.Refused() != 1 {
		t.Fatalf("open %d, refused %d; want 2 and 1", l.Open(), l.Refused())
	}
	// Those held still carry bytes both ways.
	if _, err := c2.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s2, make([]byte, 1)); err != nil {
		t.Fatalf("a held connection at the cap: %v", err)
	}

	_ = s1.Close()
	_ = s1.Close()
	if l.Open() != 1 {
		t.Fatalf("open %d after a close, want 1", l.Open())
	}
	dial(t, addr)
	select {
	case <-conns:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection under the cap again was not accepted")
	}
	if l.Open() != 2 || l.Refused() != 1 {
		t.Fatalf("open %d, refused %d; want 2 and 1", l.Open(), l.Refused())
	}
}

// Without a cap every connection is accepted, and counted.
func TestNoCap(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.Wrap(raw, "test", 0, nil)
	conns := serve(t, l)
	for range 5 {
		dial(t, raw.Addr().String())
		<-conns
	}
	if l.Open() != 5 || l.Refused() != 0 {
		t.Fatalf("open %d, refused %d; want 5 and 0", l.Open(), l.Refused())
	}
}

func TestDefault(t *testing.T) {
	for _, c := range []struct {
		files uint64
		want  int
	}{
		{0, connlimit.MaxDefault},       // unknown
		{1 << 20, connlimit.MaxDefault}, // plentiful
		{20_000, 4_250},                 // (20,000 - 3,000) / 4
		{4_096, 512},                    // half of it, / 4
		{1_024, 128},
		{4, 1},
	} {
		if got := connlimit.Default(c.files); got != c.want {
			t.Errorf("Default(%d) = %d, want %d", c.files, got, c.want)
		}
	}
}
