#!/usr/bin/env python3
"""A strict OTLP/HTTP JSON trace receiver for tests (stdlib only, loopback).

It behaves as the OTLP specification asks of a server, and checks what a
client must send:
  - only POST /v1/traces (else 404/405); Content-Type application/json (else 415);
  - the headers it requires (POST /admin/require {"name": ["value", ...]}),
    else 401 with a google.rpc.Status body;
  - an ExportTraceServiceRequest in proto3 JSON: resourceSpans/scopeSpans/spans,
    traceId 32 and spanId 16 lowercase hex, parentSpanId empty or 16 hex, a
    name, kind 0..5, start/end as decimal nanosecond strings with end >= start,
    attributes as {key, value: {<one>Value}}, status.code 0..2; else 400 with a
    Status message naming the first fault;
  - scripted answers first (POST /admin/script [{"status": 429,
    "retry_after": "3", "body": {...}}, ...]), one per request, in order.
A success is 200 with an empty ExportTraceServiceResponse ({}).
GET /admin/requests lists every /v1/traces request: t (monotonic seconds),
status answered, headers (lower-case names), span ids, span status codes and
names, and the fault when it was refused.

Usage: otlp_receiver.py PORTFILE   (writes the port once listening)
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
NANOS = re.compile(r"^[0-9]+$")
VALUE_KEYS = {"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"}

lock = threading.Lock()
script = []
required = {}
requests = []


def check_attrs(attrs, where):
    if not isinstance(attrs, list):
        return where + ": attributes is not a list"
    for a in attrs:
        if not isinstance(a, dict) or not isinstance(a.get("key"), str) or not a["key"]:
            return where + ": an attribute has no key"
        v = a.get("value")
        if not isinstance(v, dict) or len(v) != 1 or next(iter(v)) not in VALUE_KEYS:
            return where + ": attribute %s has no single typed value" % a["key"]
        if "intValue" in v and not (isinstance(v["intValue"], str) and re.match(r"^-?[0-9]+$", v["intValue"])):
            return where + ": intValue of %s is not a decimal string" % a["key"]
    return None


def check(doc):
    """The first fault of an ExportTraceServiceRequest, or None; and its spans."""
    spans = []
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        return "no resourceSpans list", spans
    for rs in doc["resourceSpans"]:
        err = check_attrs(rs.get("resource", {}).get("attributes", []), "resource")
        if err:
            return err, spans
        if not isinstance(rs.get("scopeSpans"), list):
            return "no scopeSpans list", spans
        for ss in rs["scopeSpans"]:
            for s in ss.get("spans", []):
                if not HEX32.match(str(s.get("traceId", ""))):
                    return "traceId is not 32 lowercase hex digits", spans
                if not HEX16.match(str(s.get("spanId", ""))):
                    return "spanId is not 16 lowercase hex digits", spans
                p = s.get("parentSpanId", "")
                if p != "" and not HEX16.match(str(p)):
                    return "parentSpanId is neither empty nor 16 hex digits", spans
                if not isinstance(s.get("name"), str) or not s["name"]:
                    return "a span has no name", spans
                if s.get("kind", 0) not in range(6):
                    return "kind is not 0..5", spans
                st, en = s.get("startTimeUnixNano"), s.get("endTimeUnixNano")
                if not (isinstance(st, str) and NANOS.match(st) and isinstance(en, str) and NANOS.match(en)):
                    return "start/end times are not decimal nanosecond strings", spans
                if int(en) < int(st):
                    return "a span ends before it starts", spans
                err = check_attrs(s.get("attributes", []), "span " + s["name"])
                if err:
                    return err, spans
                status = s.get("status", {})
                if not isinstance(status, dict) or status.get("code", 0) not in (0, 1, 2):
                    return "status.code is not 0..2", spans
                spans.append({"id": s["spanId"], "name": s["name"], "code": status.get("code", 0)})
    return None, spans


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body, extra=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        if self.path == "/admin/requests":
            with lock:
                return self.answer(200, {"items": requests})
        self.answer(404, {"code": 5, "message": "not found"})

    def do_POST(self):
        raw = self.body()
        if self.path == "/admin/script":
            with lock:
                script.extend(json.loads(raw))
            return self.answer(200, {})
        if self.path == "/admin/require":
            with lock:
                required.clear()
                required.update({k.lower(): v for k, v in json.loads(raw).items()})
            return self.answer(200, {})
        if self.path != "/v1/traces":
            return self.answer(404, {"code": 5, "message": "not found"})
        rec = {"t": time.monotonic(), "headers": {k.lower(): v for k, v in self.headers.items()}}
        fault, spans = None, []
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            status, body, extra, fault = 415, {"code": 3, "message": "unsupported media type"}, None, "content type"
        else:
            try:
                fault, spans = check(json.loads(raw))
            except ValueError:
                fault = "body is not JSON"
            with lock:
                missing = [k for k, vals in required.items() if self.headers.get(k) not in vals]
                scripted = script.pop(0) if script else None
            if missing:
                status, body, extra, fault = 401, {"code": 16, "message": "unauthenticated"}, None, "missing " + ",".join(missing)
            elif scripted:
                status, body = scripted["status"], scripted.get("body", {})
                extra = {"Retry-After": scripted["retry_after"]} if "retry_after" in scripted else None
            elif fault:
                status, body, extra = 400, {"code": 3, "message": fault}, None
            else:
                status, body, extra = 200, {}, None
        rec.update(status=status, fault=fault, spans=[s["id"] for s in spans],
                   codes=[s["code"] for s in spans], names=[s["name"] for s in spans])
        with lock:
            requests.append(rec)
        self.answer(status, body, extra)

    def do_PUT(self):
        self.answer(405, {"code": 12, "message": "method not allowed"})


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
