// hookrecv: a webhook receiver for tests/bench/notify-bench.sh, written in
// Go so that the receiver's own CPU (on the same two cores as the daemon)
// stays a small part of what the benchmark measures. It does what
// tests/helpers/hook_receiver.py does for the tests: checks each
// POST's X-Pipelined-Signature-256 (HMAC-SHA256 of the body under its own
// secret; 401 when wrong), answers 500 to the first try of every Nth new
// idempotency key, and writes one JSON line per request to the log.
//
//	hookrecv -port-file F -log L -secret S -fail-first-every N
package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
)

func main() {
	portFile := flag.String("port-file", "", "where the port is written")
	logPath := flag.String("log", "", "one JSON line per request")
	secret := flag.String("secret", "", "the HMAC key")
	every := flag.Int("fail-first-every", 0, "500 for the first try of every Nth new key")
	flag.Parse()
	lf, err := os.Create(*logPath)
	if err != nil {
		panic(err)
	}
	w := bufio.NewWriter(lf)
	var mu sync.Mutex
	seen := map[string]bool{}
	h := func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, []byte(*secret))
		m.Write(body)
		want := "sha256=" + hex.EncodeToString(m.Sum(nil))
		ok := hmac.Equal([]byte(want), []byte(r.Header.Get("X-Pipelined-Signature-256")))
		key := r.Header.Get("Idempotency-Key")
		status := 200
		mu.Lock()
		isNew := !seen[key]
		seen[key] = true
		if !ok {
			status = 401
		} else if isNew && *every > 0 && len(seen)%*every == 0 {
			status = 500
		}
		rec, _ := json.Marshal(map[string]any{"key": key, "event": r.Header.Get("X-Pipelined-Event"),
			"sig_ok": ok, "status": status})
		w.Write(rec)
		w.WriteByte('\n')
		w.Flush()
		mu.Unlock()
		rw.WriteHeader(status)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	os.WriteFile(*portFile+".tmp", []byte(strconv.Itoa(port)), 0644)
	os.Rename(*portFile+".tmp", *portFile)
	http.Serve(l, http.HandlerFunc(h))
}
