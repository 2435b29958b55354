#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A scripted webhook receiver for tests/unit/test_webhook.c.

Usage: webhook_server.py LOG.jsonl [--time-limit SECONDS] [--exit-on-stdin-eof]

Listens on 127.0.0.1 on a free port and prints that port as the first line
of stdout.  Every request is appended to LOG.jsonl before it is answered,
as one JSON object: {"t": unix time, "method", "path", "headers": {lower-case
name: value}, "body": text}.  The behaviour is picked by the first path
segment; the state of "first time / later" is kept per full path, so a
test uses a path of its own (/flaky/sig, /flaky/2 ...):

  /ok/...         200 "ok"
  /flaky/...      503 with Retry-After: 1 the first time, then 200
  /ratelimit/...  429 with Retry-After: 1 the first time, then 200
  /date/...       503 with Retry-After as an HTTP date 2 s ahead (whole
                  seconds, so at least 1 s ahead), then 200
  /stale/...      503 with Retry-After: 1, then 503 without one, then 200
  /down/N/...     503 with Retry-After: 1 the first N times, then 200: a
                  webhook that is down for N attempts (a series of
                  retries), then back
  /garbage/...    503 with Retry-After: soon the first time, then 200
  /slow/...       sleeps 3 s, then 200 (longer than the client's timeout)
  /bad/...        400 "invalid_payload"
  /redirect/...   302 to /ok/
  /shutdown       200, then the server stops
  anything else   404

The server stops by itself after --time-limit seconds (default 120), on
/shutdown, on SIGTERM, or with --exit-on-stdin-eof when stdin reaches EOF
(the test's end of a pipe closes when the test dies, however it dies).
Python's standard library only; binds 127.0.0.1 only.
"""
import email.utils
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW_S = 3.0


class State:
    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.seen = {}
        self.log = open(log_path, "a", encoding="utf-8")

    def record(self, entry):
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()

    def count(self, path):
        with self.lock:
            n = self.seen.get(path, 0)
            self.seen[path] = n + 1
            return n


class Handler(BaseHTTPRequestHandler):
    server_version = "webhook-test/1"

    def log_message(self, fmt, *args):  # keep the test's output clean
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 64 << 20)) if length > 0 else b""
        st = self.server.state
        st.record({
            "t": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body.decode("utf-8", "replace"),
        })
        n = st.count(self.path)     # requests to this path before this one
        first = n == 0
        kind = self.path.split("/")[1] if self.path.startswith("/") else ""
        if kind == "ok":
            self.reply(200, b"ok")
        elif kind == "flaky":
            if first:
                self.reply(503, b"try later", [("Retry-After", "1")])
            else:
                self.reply(200, b"ok")
        elif kind == "ratelimit":
            if first:
                self.reply(429, b'{"retry_after": 1.0}', [("Retry-After", "1")])
            else:
                self.reply(200, b"ok")
        elif kind == "date":
            if first:
                when = email.utils.formatdate(int(time.time()) + 2, usegmt=True)
                self.reply(503, b"maintenance", [("Retry-After", when)])
            else:
                self.reply(200, b"ok")
        elif kind == "stale":
            if n < 2:
                self.reply(503, b"busy", [("Retry-After", "1")] if n == 0 else [])
            else:
                self.reply(200, b"ok")
        elif kind == "down":
            parts = self.path.split("/")
            down_for = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 1 << 30
            if n < down_for:
                self.reply(503, b"down", [("Retry-After", "1")])
            else:
                self.reply(200, b"ok")
        elif kind == "garbage":
            if first:
                self.reply(503, b"busy", [("Retry-After", "soon")])
            else:
                self.reply(200, b"ok")
        elif kind == "slow":
            time.sleep(SLOW_S)
            try:
                self.reply(200, b"ok")
            except OSError:
                pass  # the client gave up: expected
        elif kind == "bad":
            self.reply(400, b"invalid_payload")
        elif kind == "redirect":
            self.reply(302, b"", [("Location", "/ok/")])
        elif self.path == "/shutdown":
            self.reply(200, b"bye")
            threading.Thread(target=self.server.shutdown, daemon=True).start()
        else:
            self.reply(404, b"no such path")

    do_POST = do_GET = do_PUT = handle_any


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    log_path = args[0]
    limit = 120.0
    watch_stdin = False
    i = 1
    while i < len(args):
        if args[i] == "--time-limit" and i + 1 < len(args):
            limit = float(args[i + 1])
            i += 2
        elif args[i] == "--exit-on-stdin-eof":
            watch_stdin = True
            i += 1
        else:
            sys.stderr.write("webhook_server.py: unknown argument '%s'\n" % args[i])
            return 2

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.state = State(log_path)
    stop = threading.Event()

    def shutdown():
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    timer = threading.Timer(limit, shutdown)
    timer.daemon = True
    timer.start()
    if watch_stdin:
        def watch():
            # os.read, not sys.stdin: a daemon thread blocked in the
            # buffered reader holds its lock, and the interpreter aborts
            # with "could not acquire lock" when it exits (SIGTERM, /shutdown).
            while os.read(0, 4096):
                pass
            shutdown()
        threading.Thread(target=watch, daemon=True).start()

    import signal
    signal.signal(signal.SIGTERM, lambda *a: shutdown())

    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
