package main

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections open at once: Accept
// waits for one to close before it accepts another, so connections
// beyond the limit wait in the kernel's backlog instead of each taking a
// goroutine and buffers. Slow clients are cut off by the server's
// timeouts, which frees their places.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func limitConns(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, n)}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

// limitedConn gives its place back once, when it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
