package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// cutOff opens a connection and trickles a request into it, one piece
// every 50 ms for up to 10 s, and reports whether the server closed the
// connection before the client was done. head is sent first; then each
// piece is a header line (slow headers) or a body byte (slow body).
func cutOff(t *testing.T, addr, head string, piece string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		io.Copy(io.Discard, c) // returns when the server closes the connection
	}()
	if _, err := io.WriteString(c, head); err != nil {
		return true
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-closed:
			return true
		case <-tick.C:
			if _, err := io.WriteString(c, piece); err != nil {
				return true
			}
		}
	}
	return false
}

// TestSlowAndAbusiveClients: a slowloris client (headers, or a body,
// trickling in) is cut off by the server's timeouts while other checks
// are served; one key's flood is answered 429 while another key's checks
// go on.
func TestSlowAndAbusiveClients(t *testing.T) {
	data := t.TempDir()
	flood, _ := keyFor(t, data, "acme", "flooder", "agent")
	calm, _ := keyFor(t, data, "acme", "calm", "agent")
	slowKey, _ := keyFor(t, data, "acme", "slow", "agent")
	srv := startServerArgs(t, "--data", data, "--pack", "../../examples/refund",
		"--read-header-timeout", "300ms", "--read-timeout", "1s", "--max-conns", "32", "--rate-limit", "2", "--rate-burst", "8")
	addr := strings.TrimPrefix(srv.url, "http://")
	body, err := os.ReadFile("../../examples/refund/requests/refund-allow.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(token string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/v1/check", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("check: %v", err)
			return 0, nil, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b
	}

	// Slow clients, many at once, each cut off; a check is served while
	// they hold their connections.
	var wg sync.WaitGroup
	slow := make(chan string, 20)
	for i := range 10 {
		wg.Go(func() {
			if i%2 == 0 {
				if !cutOff(t, addr, "POST /v1/check HTTP/1.1\r\nHost: writ\r\n", "X-Slow: 1\r\n") {
					slow <- "slow headers"
				}
				return
			}
			head := fmt.Sprintf("POST /v1/check HTTP/1.1\r\nHost: writ\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", slowKey, 100000)
			if !cutOff(t, addr, head, " ") {
				slow <- "slow body"
			}
		})
	}
	if status, _, b := check(calm); status != http.StatusOK {
		t.Errorf("a check while slow clients hold connections: %d %s", status, b)
	}
	wg.Wait()
	close(slow)
	for what := range slow {
		t.Errorf("a client sending %s was not cut off within 10 s", what)
	}

	// One key floods; the other's checks go on.
	statuses := make(chan int, 60)
	var floodWG sync.WaitGroup
	for range 60 {
		floodWG.Go(func() {
			status, h, b := check(flood)
			if status == http.StatusTooManyRequests {
				var p struct {
					Code string `json:"code"`
				}
				if json.Unmarshal(b, &p) != nil || p.Code != "rate_limited" || h.Get("Retry-After") == "" || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
					t.Errorf("429 answer: %s %v %s", h.Get("Content-Type"), h.Get("Retry-After"), b)
				}
			}
			statuses <- status
		})
	}
	for i := range 3 {
		if status, _, b := check(calm); status != http.StatusOK {
			t.Errorf("calm key's check %d during the flood: %d %s", i, status, b)
		}
	}
	floodWG.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	// The bucket holds 8 and refills 2 a second: of 60 requests sent at
	// once, only a few more than 8 pass.
	if count[http.StatusTooManyRequests] < 40 || count[http.StatusOK]+count[http.StatusTooManyRequests] != 60 {
		t.Errorf("flood of 60 checks from one key: statuses %v, want at least 40 answered 429 and the rest 200", count)
	}
	if status, _, _ := check(calm); status != http.StatusOK {
		t.Errorf("calm key after the flood: %d", status)
	}
}
