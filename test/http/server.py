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
Also opens a "blackhole" port: a listening socket whose backlog is full and is
never accepted, so connecting to it times out.

Usage: server.py PORTFILE   (writes "<http_port> <blackhole_port>" there once ready)
"""
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


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
        if u.path == "/ok":
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
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write("%d %d\n" % (srv.server_address[1], hole.getsockname()[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
