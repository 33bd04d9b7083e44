#!/usr/bin/env python3
"""test/real/faultproxy.py — the stand-in's fault injection, in front of a real
kube-apiserver, so the soak (bench/soak) can run against the real peers.

    faultproxy.py --upstream URL --ca FILE --cert FILE --key FILE
                  --port-file FILE --admin-port-file FILE [--seed N]
                  [--log FILE] [--max-seconds N]

It listens with TLS on 127.0.0.1 (the API server's own certificate, whose
subject names 127.0.0.1, so a client that trusts the API server's CA trusts
the proxy) and forwards every request to the upstream API server, passing the
client's credentials through unchanged: the API server still authenticates
and authorizes mlplat's ServiceAccount.  Watches are streamed.

Fault rules, set at run time on a plain-HTTP admin port (loopback only), are
the stand-in's (test/standin/lib/faults.js), drawn from a seeded PRNG:

    {method, path, status: 500|503|429, rate, retryAfter, latencyMs,
     latencyRate, drop, times, hold: "before"|"after"}

  status   answer with that Status instead of forwarding (429 carries
           Retry-After and details.retryAfterSeconds, as the API server's
           priority-and-fairness answers do)
  drop     forward the request (the write is applied), then close the
           connection without an answer: the answer is lost
  hold     park the request before it is forwarded, or its answer after,
           until the admin API releases it (a release with drop closes the
           connection; a held-before request is then never forwarded)

Admin API:  GET|PUT|DELETE /faults, POST /faults (one rule), DELETE /faults/ID,
            GET /holds, POST /holds/release {"rule": ID, "drop": bool},
            GET /writes   {"Kind/ns/name": {"create": n, "delete": n}}: what the
                          API server answered to the writes that went through
            GET /requests the request log (also written to --log as JSON lines)

Bounded: it exits after --max-seconds (default 3600) whatever happens.
"""
import argparse
import http.client
import http.server
import json
import os
import random
import re
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument('--upstream', required=True)
ap.add_argument('--ca', required=True)
ap.add_argument('--cert', required=True)
ap.add_argument('--key', required=True)
ap.add_argument('--port-file', required=True)
ap.add_argument('--admin-port-file', required=True)
ap.add_argument('--seed', type=int, default=7)
ap.add_argument('--log')
ap.add_argument('--max-seconds', type=int, default=3600)
ARGS = ap.parse_args()
UP = urllib.parse.urlsplit(ARGS.upstream)
UP_CTX = ssl.create_default_context(cafile=ARGS.ca)
LOCK = threading.Lock()
RNG = random.Random(ARGS.seed)
RULES = []
NEXT_ID = [1]
HOLDS = []          # parked requests: dicts with an Event and the release verdict
NEXT_HOLD = [1]
WRITES = {}
REQUESTS = []
LOG = open(ARGS.log, 'a', buffering=1) if ARGS.log else None
# not forwarded: hop-by-hop, and Expect (the proxy answered the 100-continue itself)
HOP = {'connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host', 'te', 'trailer', 'upgrade',
       'proxy-connection', 'expect'}


def status_body(code, reason, message, details=None):
    s = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': 'Failure', 'message': message,
         'reason': reason, 'code': code}
    if details:
        s['details'] = details
    return s


def add_rule(r):
    if not isinstance(r, dict):
        raise ValueError('a rule is an object')
    if 'path' in r:
        re.compile(r['path'])
    if 'method' in r:
        re.compile(r['method'])
    if 'status' in r and int(r['status']) not in (500, 503, 429):
        raise ValueError('status must be 500, 503 or 429')
    if 'hold' in r and r['hold'] not in ('before', 'after'):
        raise ValueError('hold must be "before" or "after"')
    with LOCK:
        rule = dict(r, id=NEXT_ID[0], fired=0)
        NEXT_ID[0] += 1
        RULES.append(rule)
    return rule


def draw(rate):
    return RNG.random() < (1.0 if rate is None or rate is True else float(rate))


def evaluate(method, path):
    """As faults.js evaluate(): latency adds up, the first error wins, one hold, one drop."""
    out = {'latency': 0.0, 'error': None, 'drop': False, 'hold': None, 'rules': []}
    with LOCK:
        for r in RULES:
            if 'times' in r and r['fired'] >= r['times']:
                continue
            if r.get('method') and not re.fullmatch(f"(?:{r['method']})", method, re.I):
                continue
            if r.get('path') and not re.search(r['path'], path):
                continue
            fired = False
            if r.get('latencyMs') and ('latencyRate' not in r or draw(r['latencyRate'])):
                out['latency'] += float(r['latencyMs']) / 1000
                fired = True
            if not out['error'] and r.get('status') and draw(r.get('rate')):
                s = int(r['status'])
                if s == 429:
                    secs = int(r.get('retryAfter', 1))
                    out['error'] = (429, status_body(429, 'TooManyRequests', 'Too many requests, please try again later.',
                                                     {'retryAfterSeconds': secs}), {'Retry-After': str(secs)})
                elif s == 503:
                    out['error'] = (503, status_body(503, 'ServiceUnavailable',
                                                     'the server is currently unable to handle the request'), {})
                else:
                    out['error'] = (500, status_body(500, 'InternalError', 'Internal error occurred: injected fault',
                                                     {'causes': [{'message': 'injected fault'}]}), {})
                fired = True
            if not out['hold'] and r.get('hold'):
                out['hold'] = {'phase': r['hold'], 'rule': r['id']}
                fired = True
            if not out['drop'] and r.get('drop') not in (None, False) and draw(r['drop']):
                out['drop'] = True
                fired = True
            if fired:
                r['fired'] += 1
                out['rules'].append(r['id'])
    return out


def park(hold, info):
    """Wait until released; returns 'go' or 'drop'. Bounded by the proxy's lifetime."""
    ev = threading.Event()
    with LOCK:
        h = dict(info, id=NEXT_HOLD[0], rule=hold['rule'], phase=hold['phase'],
                 at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()), _ev=ev, _how='go')
        NEXT_HOLD[0] += 1
        HOLDS.append(h)
    ev.wait(ARGS.max_seconds)
    return h['_how']


def release(rule=None, drop=False):
    with LOCK:
        out = [h for h in HOLDS if rule is None or h['rule'] == rule]
        for h in out:
            HOLDS.remove(h)
    for h in out:
        h['_how'] = 'drop' if drop else 'go'
        h['_ev'].set()
    return len(out)

def route(path):
    """(resource, namespace, name, subresource) of an API path, or None."""
    seg = [x for x in path.split('/') if x]
    if len(seg) >= 3 and seg[0] == 'api':
        rest = seg[2:]
    elif len(seg) >= 4 and seg[0] == 'apis':
        rest = seg[3:]
    else:
        return None
    if rest[0] == 'namespaces' and len(rest) >= 3:
        return rest[2], rest[1], (rest[3:4] or [None])[0], (rest[4:5] or [None])[0]
    return rest[0], '', (rest[1:2] or [None])[0], (rest[2:3] or [None])[0]


def record_write(method, path, code, body):
    """Count creates and deletes per object (resource/namespace/name) from the
    API server's answers to the writes that went through."""
    rt = route(path)
    if not rt or rt[3] or method not in ('POST', 'PUT', 'PATCH', 'DELETE'):
        return None
    res, ns, name, _ = rt
    if not name:
        try:
            name = ((json.loads(body) or {}).get('metadata') or {}).get('name')
        except (ValueError, AttributeError):
            name = None
    if method != 'DELETE' and code == 201:
        what = 'create'
    elif method == 'DELETE' and code in (200, 202):
        what = 'delete'
    elif method != 'DELETE' and code == 200:
        what = 'update'
    else:
        return None
    if not name:
        return None
    key = f'{res}/{ns}/{name}' if ns else f'{res}/{name}'
    with LOCK:
        w = WRITES.setdefault(key, {})
        w[what] = w.get(what, 0) + 1
    return what


def log_request(entry):
    with LOCK:
        REQUESTS.append(entry)
        del REQUESTS[:-20000]   # bounded memory; the file keeps everything
    if LOG:
        LOG.write(json.dumps(entry) + '\n')


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    timeout = 300   # an idle keep-alive connection is closed after this long

    def setup(self):
        self.request.settimeout(30)
        try:
            self.request.do_handshake()
        finally:
            self.request.settimeout(None)
        super().setup()

    def log_message(self, *a):
        pass

    def _body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            data = b''
            while True:
                n = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
                if n == 0:
                    while self.rfile.readline() not in (b'\r\n', b'\n', b''):
                        pass
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        n = int(self.headers.get('Content-Length') or 0)
        return self.rfile.read(n) if n else b''

    def _drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send(self, code, headers, body):
        self.send_response(code)
        for k, v in headers:
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self):
        t0 = time.time()
        method, target = self.command, self.path
        path = urllib.parse.urlsplit(target).path
        body = self._body()
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
        watch = q.get('watch', ['0'])[0] in ('1', 'true')
        entry = {'ts': t0, 'method': method, 'path': target}
        f = evaluate(method, path)
        if f['rules']:
            entry['faults'] = f['rules']
        if f['latency']:
            time.sleep(f['latency'])
        if f['hold'] and f['hold']['phase'] == 'before':
            entry['held'] = 'before'
            if park(f['hold'], {'method': method, 'path': path}) == 'drop':
                entry.update(status=0, dropped=True)
                log_request(entry)
                return self._drop()
        if f['error']:
            code, st, extra = f['error']
            entry.update(status=code, fault=st['reason'])
            log_request(entry)
            return self._send(code, [('Content-Type', 'application/json')] + list(extra.items()),
                              json.dumps(st).encode())
        conn = http.client.HTTPSConnection(UP.hostname, UP.port, context=UP_CTX,
                                           timeout=None if watch else 60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        try:
            conn.request(method, target, body=body if body or method in ('POST', 'PUT', 'PATCH') else None,
                         headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            entry.update(status=502, error=str(e))
            log_request(entry)
            return self._send(502, [('Content-Type', 'application/json')], json.dumps(
                status_body(502, 'InternalError', f'fault proxy: upstream: {e}')).encode())
        if watch and resp.status == 200 and (f['drop'] or (f['hold'] and f['hold']['phase'] == 'after')):
            # a watch's answer never ends on its own: dropped at once rather than held
            conn.close()
            entry.update(status=200, verb='watch', dropped=True)
            log_request(entry)
            return self._drop()
        if watch and resp.status == 200:
            entry.update(status=200, verb='watch')
            log_request(entry)
            self.send_response(200)
            for k, v in resp.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            try:
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(b'%x\r\n%s\r\n' % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b'0\r\n\r\n')
            except OSError:
                self.close_connection = True
            conn.close()
            return None
        data = resp.read()
        rheaders = resp.getheaders()
        conn.close()
        entry['status'] = resp.status
        w = record_write(method, path, resp.status, data)
        if w:
            entry['write'] = w
        if f['hold'] and f['hold']['phase'] == 'after':
            entry['held'] = 'after'
            if park(f['hold'], {'method': method, 'path': path, 'status': resp.status}) == 'drop':
                f['drop'] = True
        if f['drop']:
            entry['dropped'] = True
            log_request(entry)
            return self._drop()
        log_request(entry)
        return self._send(resp.status, rheaders, data)

    def _any(self):
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _any


class Admin(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _reply(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def _any(self):
        n = int(self.headers.get('Content-Length') or 0)
        raw = self.rfile.read(n) if n else b''
        try:
            body = json.loads(raw) if raw.strip() else {}
            u = urllib.parse.urlsplit(self.path)
            seg = [s for s in u.path.split('/') if s]
            m = self.command
            if seg == ['faults'] and m == 'GET':
                with LOCK:
                    return self._reply(200, {'rules': [dict(r) for r in RULES]})
            if seg == ['faults'] and m == 'PUT':
                with LOCK:
                    RULES.clear()
                for r in body.get('rules', []):
                    add_rule(r)
                with LOCK:
                    return self._reply(200, {'rules': [dict(r) for r in RULES]})
            if seg == ['faults'] and m == 'POST':
                return self._reply(200, {'rules': [add_rule(body)]})
            if seg == ['faults'] and m == 'DELETE':
                with LOCK:
                    RULES.clear()
                return self._reply(200, {'rules': []})
            if len(seg) == 2 and seg[0] == 'faults' and m == 'DELETE':
                with LOCK:
                    RULES[:] = [r for r in RULES if str(r['id']) != seg[1]]
                return self._reply(200, {'ok': True})
            if seg == ['holds'] and m == 'GET':
                with LOCK:
                    return self._reply(200, {'items': [{k: v for k, v in h.items() if not k.startswith('_')}
                                                       for h in HOLDS]})
            if seg == ['holds', 'release'] and m == 'POST':
                return self._reply(200, {'released': release(body.get('rule'), bool(body.get('drop')))})
            if seg == ['writes'] and m == 'GET':
                with LOCK:
                    return self._reply(200, dict(WRITES))
            if seg == ['requests'] and m == 'GET':
                with LOCK:
                    return self._reply(200, {'items': list(REQUESTS)})
            return self._reply(404, {'error': f'no admin route {m} {u.path}'})
        except (ValueError, re.error) as e:
            return self._reply(400, {'error': str(e)})

    do_GET = do_POST = do_PUT = do_DELETE = _any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    proxy = Server(('127.0.0.1', 0), Proxy)
    # the handshake happens in the request's own thread, not in the accept loop
    proxy.socket = ctx.wrap_socket(proxy.socket, server_side=True, do_handshake_on_connect=False)
    admin = Server(('127.0.0.1', 0), Admin)
    for srv in (proxy, admin):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    for f, srv in ((ARGS.admin_port_file, admin), (ARGS.port_file, proxy)):
        with open(f + '.tmp', 'w') as fh:
            fh.write(f'{srv.server_address[1]}\n')
        os.rename(f + '.tmp', f)
    print(f'faultproxy: {ARGS.upstream} on 127.0.0.1:{proxy.server_address[1]}, '
          f'admin on 127.0.0.1:{admin.server_address[1]}', flush=True)
    time.sleep(ARGS.max_seconds)
    print('faultproxy: --max-seconds reached, exiting', flush=True)
    os._exit(0)


if __name__ == '__main__':
    sys.exit(main())
