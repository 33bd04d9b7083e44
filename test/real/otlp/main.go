// A strict OTLP/HTTP receiver for the real-peers suite.
//
// It parses each POST /v1/traces with the OpenTelemetry Collector's own
// pdata unmarshalers (JSON or protobuf, by Content-Type), so it refuses with
// 400 exactly what a collector refuses: a traceId that is not hex, an id of
// the wrong length, a body that is not OTLP. Accepted batches are kept in
// memory and served back for the test to inspect:
//
//	GET  /received      accepted spans, one JSON object per line
//	GET  /stats         {"accepted":N,"rejected":N,"spans":N}
//	POST /control/fail?status=503&count=2&retry_after=1
//	                    answer the next count exports with status (and
//	                    Retry-After), to test a sender's retries
//
// It listens on loopback only.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

type span struct {
	TraceID      string            `json:"traceId"`
	SpanID       string            `json:"spanId"`
	ParentSpanID string            `json:"parentSpanId"`
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	Status       string            `json:"status"`
	StatusMsg    string            `json:"statusMessage"`
	Service      string            `json:"service"`
	Scope        string            `json:"scope"`
	Start        uint64            `json:"startTimeUnixNano"`
	End          uint64            `json:"endTimeUnixNano"`
	Attributes   map[string]any    `json:"attributes"`
	Resource     map[string]any    `json:"resource"`
	Events       []string          `json:"events,omitempty"`
}

type receiver struct {
	mu       sync.Mutex
	spans    []span
	accepted int
	rejected int
	failLeft int
	failCode int
	failRA   string
}

func rpcStatus(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// google.rpc.Status, as the OTLP/HTTP spec asks for failures.
	_ = json.NewEncoder(w).Encode(map[string]any{"code": 3, "message": msg})
}

func (r *receiver) traces(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		rpcStatus(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	r.mu.Lock()
	if r.failLeft > 0 {
		r.failLeft--
		code, ra := r.failCode, r.failRA
		r.mu.Unlock()
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		rpcStatus(w, code, "injected failure")
		return
	}
	r.mu.Unlock()
	body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
	if err != nil {
		rpcStatus(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	ct := req.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	var td ptrace.Traces
	switch strings.TrimSpace(ct) {
	case "application/json":
		td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
	case "application/x-protobuf":
		td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	default:
		rpcStatus(w, http.StatusUnsupportedMediaType, "unsupported content type "+ct)
		return
	}
	if err == nil {
		err = check(td)
	}
	if err != nil {
		r.mu.Lock()
		r.rejected++
		r.mu.Unlock()
		rpcStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	got := flatten(td)
	r.mu.Lock()
	r.accepted++
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	w.Header().Set("Content-Type", ct)
	if ct == "application/json" {
		_, _ = w.Write([]byte("{}"))
	}
}

// check refuses what the collector's pipeline would drop as invalid but the
// unmarshaler lets through: an all-zero trace or span id (the spec calls
// them invalid).
func check(td ptrace.Traces) error {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				if s.TraceID().IsEmpty() {
					return fmt.Errorf("span %q: traceId is empty or all zeros", s.Name())
				}
				if s.SpanID().IsEmpty() {
					return fmt.Errorf("span %q: spanId is empty or all zeros", s.Name())
				}
			}
		}
	}
	return nil
}

func flatten(td ptrace.Traces) []span {
	var out []span
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := rs.Resource().Attributes().AsRaw()
		svc, _ := res["service.name"].(string)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			sc := sss.At(j)
			ss := sc.Spans()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				o := span{
					TraceID:    s.TraceID().String(),
					SpanID:     s.SpanID().String(),
					Name:       s.Name(),
					Kind:       s.Kind().String(),
					Status:     s.Status().Code().String(),
					StatusMsg:  s.Status().Message(),
					Service:    svc,
					Scope:      sc.Scope().Name(),
					Start:      uint64(s.StartTimestamp()),
					End:        uint64(s.EndTimestamp()),
					Attributes: s.Attributes().AsRaw(),
					Resource:   res,
				}
				if !s.ParentSpanID().IsEmpty() {
					o.ParentSpanID = s.ParentSpanID().String()
				}
				for e := 0; e < s.Events().Len(); e++ {
					o.Events = append(o.Events, s.Events().At(e).Name())
				}
				out = append(out, o)
			}
		}
	}
	return out
}

func (r *receiver) received(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, s := range r.spans {
		_ = enc.Encode(s)
	}
}

func (r *receiver) stats(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{
		"accepted": r.accepted, "rejected": r.rejected, "spans": len(r.spans)})
}

func (r *receiver) control(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	code, err := strconv.Atoi(q.Get("status"))
	if err != nil || code < 400 || code > 599 {
		http.Error(w, "status must be 400..599", http.StatusBadRequest)
		return
	}
	n, err := strconv.Atoi(q.Get("count"))
	if err != nil || n < 0 {
		http.Error(w, "count must be >= 0", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.failCode, r.failLeft, r.failRA = code, n, q.Get("retry_after")
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func main() {
	addr := flag.String("listen", "127.0.0.1:0", "loopback address to listen on")
	portFile := flag.String("port-file", "", "write the chosen port here")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		log.Fatalf("otlp-receiver: listen on loopback only, not %q", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("otlp-receiver: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := os.WriteFile(*portFile, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
			log.Fatalf("otlp-receiver: %v", err)
		}
	}
	r := &receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", r.traces)
	mux.HandleFunc("/received", r.received)
	mux.HandleFunc("/stats", r.stats)
	mux.HandleFunc("/control/fail", r.control)
	log.Printf("otlp-receiver: listening on 127.0.0.1:%d", port)
	log.Fatal(http.Serve(ln, mux))
}
