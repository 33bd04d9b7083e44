#!/usr/bin/env python3
"""Loopback HTTP server for test/http/run.sh (stdlib only, threaded).

Routes:
  /ok                         200 "ok"
  /slow?ms=N                  sleep N ms, then 200 "slow"
  /status?code=C&retry_after=S  status C (with Retry-After: S when given)
  /big?bytes=N[&stream=1]     200 with N bytes of body (stream: no Content-Length)
  /close                      drop the connection without a response
  /redirect                   302 to /ok
  /echo                       200 with "METHOD len=<body length>"
  /api/..., /apis/...          a tiny in-memory Kubernetes API (see Kube below)
  /_debug/conflict_next_put   the next Kubernetes PUT answers 409 Conflict
  /_debug/last                JSON of the last Kubernetes request (method, path,
                              query, content type, authorization)
Also opens a "blackhole" port: a listening socket whose backlog is full and is
never accepted, so connecting to it times out.

Usage: server.py PORTFILE [CERT KEY [CERT2 KEY2]]
Writes "<http_port> <blackhole_port> [<https_port> [<https_port2>]]" to PORTFILE
once ready; each CERT/KEY pair serves the same routes over TLS on its own port.
"""
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Kube:
    """Just enough of the Kubernetes REST protocol for the client's tests:
    objects by (group/version, namespace, plural, name), resourceVersion with
    409 Conflict on PUT, AlreadyExists on POST, SSA (must carry
    fieldManager=mlplat&force=true), merge patch, DELETE (must ask for
    propagationPolicy=Background), LIST with equality label selectors,
    limit/continue ("expired" as a token answers 410), Status error bodies."""

    def __init__(self):
        self.lock = threading.Lock()
        self.objs = {}
        self.rv = 100
        self.last = {}
        self.conflict_next_put = False

    @staticmethod
    def status(code, reason, message):
        return code, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Failure", "message": message, "reason": reason, "code": code}

    @staticmethod
    def parse(path):
        p = path.strip("/").split("/")
        if p[0] == "api":
            gv, rest = p[1], p[2:]
        else:
            gv, rest = p[1] + "/" + p[2], p[3:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        return gv, ns, plural, name

    @staticmethod
    def merge(dst, src):
        for k, v in src.items():
            if v is None:
                dst.pop(k, None)
            elif isinstance(v, dict) and isinstance(dst.get(k), dict):
                Kube.merge(dst[k], v)
            else:
                dst[k] = v
        return dst

    def handle(self, method, path, q, ctype, auth, body):
        self.last = {"method": method, "path": path, "query": q, "content_type": ctype,
                     "authorization": auth}
        if "echoauth" in path:
            return 500, "backend error; auth was: %s" % auth
        gv, ns, plural, name = self.parse(path)
        with self.lock:
            coll = {k: v for k, v in self.objs.items() if k[0] == gv and k[2] == plural
                    and (ns is None or k[1] == ns)}
            key = (gv, ns, plural, name)
            what = "%s \"%s\"" % (plural, name)
            if method == "GET" and name:
                if key not in self.objs:
                    return self.status(404, "NotFound", what + " not found")
                return 200, self.objs[key]
            if method == "GET":
                if q.get("continue") == "expired":
                    return self.status(410, "Expired", "The provided continue parameter is too old")
                sel = {}
                for term in filter(None, q.get("labelSelector", "").split(",")):
                    k, v = term.split("=", 1)
                    sel[k] = v
                items = [o for k, o in sorted(coll.items(), key=lambda kv: (kv[0][1] or "", kv[0][3]))
                         if all(o.get("metadata", {}).get("labels", {}).get(a) == b for a, b in sel.items())]
                start = int(q.get("continue", "c-0")[2:])
                limit = int(q.get("limit", "0")) or len(items)
                page = items[start:start + limit]
                meta = {"resourceVersion": str(self.rv)}
                if start + limit < len(items):
                    meta["continue"] = "c-%d" % (start + limit)
                return 200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page}
            if method == "POST":
                name = body.get("metadata", {}).get("name")
                key = (gv, ns, plural, name)
                if key in self.objs:
                    return self.status(409, "AlreadyExists", "%s \"%s\" already exists" % (plural, name))
                self.rv += 1
                body.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
                self.objs[key] = body
                return 201, body
            if method == "PUT" and self.conflict_next_put:
                self.conflict_next_put = False  # as if another writer got in first
                return self.status(409, "Conflict", "Operation cannot be fulfilled on %s: the object has been modified" % what)
            if method == "PUT":
                if key not in self.objs:
                    return self.status(404, "NotFound", what + " not found")
                if body.get("metadata", {}).get("resourceVersion") != self.objs[key]["metadata"]["resourceVersion"]:
                    return self.status(409, "Conflict", "Operation cannot be fulfilled on %s: the object has been modified; please apply your changes to the latest version and try again" % what)
                self.rv += 1
                body["metadata"]["resourceVersion"] = str(self.rv)
                self.objs[key] = body
                return 200, body
            if method == "PATCH" and ctype == "application/apply-patch+yaml":
                if q.get("fieldManager") != "mlplat" or q.get("force") != "true":
                    return self.status(400, "BadRequest", "fieldManager and force are required")
                obj = self.merge(json.loads(json.dumps(self.objs.get(key, {}))), body)
                self.rv += 1
                obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
                code = 200 if key in self.objs else 201
                self.objs[key] = obj
                return code, obj
            if method == "PATCH" and ctype == "application/merge-patch+json":
                if key not in self.objs:
                    return self.status(404, "NotFound", what + " not found")
                self.rv += 1
                obj = self.merge(self.objs[key], body)
                obj["metadata"]["resourceVersion"] = str(self.rv)
                return 200, obj
            if method == "DELETE":
                if q.get("propagationPolicy") != "Background":
                    return self.status(400, "BadRequest", "propagationPolicy=Background expected")
                if key not in self.objs:
                    return self.status(404, "NotFound", what + " not found")
                del self.objs[key]
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
            return self.status(405, "MethodNotAllowed", "not supported here")


KUBE = Kube()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, fmt, *args):  # keep the TAP output clean
        pass

    def reply(self, code, body=b"", headers=None):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if u.path.startswith("/api/") or u.path.startswith("/apis/"):
            try:
                parsed = json.loads(body) if body else {}
            except ValueError:
                parsed = {}
            code, out = KUBE.handle(self.command, u.path, q, self.headers.get("Content-Type"),
                                    self.headers.get("Authorization"), parsed)
            if isinstance(out, str):
                self.reply(code, out.encode())
            else:
                data = json.dumps(out).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
        elif u.path == "/_debug/conflict_next_put":
            KUBE.conflict_next_put = True
            self.reply(200, b"armed")
        elif u.path == "/_debug/last":
            data = json.dumps(KUBE.last).encode()
            self.reply(200, data)
        elif u.path == "/ok":
            self.reply(200, b"ok")
        elif u.path == "/slow":
            time.sleep(int(q.get("ms", "100")) / 1000.0)
            self.reply(200, b"slow")
        elif u.path == "/status":
            h = {}
            if "retry_after" in q:
                h["Retry-After"] = q["retry_after"]
            self.reply(int(q.get("code", "200")), b"status", h)
        elif u.path == "/big" and q.get("stream"):
            # no Content-Length: the client only learns the size while reading
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            left = int(q.get("bytes", "1024"))
            try:
                while left > 0:
                    n = min(left, 65536)
                    self.wfile.write(b"x" * n)
                    left -= n
            except OSError:
                pass
            self.close_connection = True
        elif u.path == "/big":
            self.reply(200, b"x" * int(q.get("bytes", "1024")))
        elif u.path == "/close":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif u.path == "/redirect":
            self.reply(302, b"moved", {"Location": "/ok"})
        elif u.path == "/echo":
            self.reply(200, ("%s len=%d" % (self.command, len(body))).encode())
        else:
            self.reply(404, b"not found")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # 50 concurrent connects must not hit a full backlog

    def handle_error(self, request, client_address):
        pass  # clients hanging up (timeouts, cancels) are part of the tests


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    hole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    fillers = []
    # fill the accept queue (and the SYN queue's tolerance) so later connects hang
    for _ in range(4):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(hole.getsockname())
        except (BlockingIOError, OSError):
            pass
        fillers.append(s)
    time.sleep(0.2)
    ports = [srv.server_address[1], hole.getsockname()[1]]
    certs = sys.argv[2:]
    for i in range(0, len(certs) - 1, 2):
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certs[i], certs[i + 1])
        tls = Server(("127.0.0.1", 0), Handler)
        tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
        threading.Thread(target=tls.serve_forever, daemon=True).start()
        ports.append(tls.server_address[1])
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(" ".join(str(p) for p in ports) + "\n")
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
