package main

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// closedByPeer tells a connection its peer closed from one still open and
// idle, at once, and keeps telling them apart however late it looks.
func TestClosedByPeer(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() (client, server net.Conn) {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		select {
		case s := <-accepted:
			t.Cleanup(func() { s.Close() })
			return c, s
		case <-time.After(time.Minute):
			t.Fatal("no connection accepted within a minute")
			return nil, nil
		}
	}
	open, _ := dial()
	shut, server := dial()
	server.Close()
	for range 3 {
		if closedByPeer(open) {
			t.Error("an open, idle connection is reported closed by its peer")
		}
		if !closedByPeer(shut) {
			t.Error("a connection its peer closed is reported open")
		}
	}
}
