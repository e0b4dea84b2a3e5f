#!/usr/bin/env python3
"""A stand-in Docker Engine API that records the build context the docker CLI uploads.

Usage: fake_engine.py SOCKET OUTDIR

It answers `/_ping` (API 1.41, legacy builder) and `POST /v*/build`: the request body (the
tar stream the CLI built from the context directory after applying .dockerignore) is saved
as OUTDIR/context-N.tar, N counting from 1, and the CLI is told the build succeeded. Every
other request gets a 404. It never builds anything; it exists so that the oracle records
exactly what the CLI sends, byte for byte, without a daemon's own post-processing (the
20.10 legacy builder deletes .dockerignore and the Dockerfile from the context when the
.dockerignore excludes them).
"""
import http.server
import json
import os
import socketserver
import sys

SOCKET, OUTDIR = sys.argv[1], sys.argv[2]
COUNTER = [0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # unix sockets have no client address
        sys.stderr.write("fake-engine: " + (fmt % args) + "\n")

    def _headers(self, status, length, ctype="text/plain"):
        self.send_response(status)
        self.send_header("Api-Version", "1.41")
        self.send_header("Ostype", "linux")
        self.send_header("Docker-Experimental", "false")
        self.send_header("Builder-Version", "1")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_HEAD(self):
        self._headers(200 if self.path.endswith("/_ping") else 404, 0)

    def do_GET(self):
        if self.path.endswith("/_ping"):
            self._headers(200, 2)
            self.wfile.write(b"OK")
        else:
            self._headers(404, 0)

    def do_POST(self):
        body = self._body()
        if "/build" not in self.path:
            self._headers(404, 0)
            return
        COUNTER[0] += 1
        with open(os.path.join(OUTDIR, "context-%d.tar" % COUNTER[0]), "wb") as f:
            f.write(body)
        msgs = [{"stream": "context captured\n"}, {"aux": {"ID": "sha256:" + "0" * 64}}]
        out = "".join(json.dumps(m) + "\r\n" for m in msgs).encode()
        self._headers(200, len(out), "application/json")
        self.wfile.write(out)


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


if os.path.exists(SOCKET):
    os.unlink(SOCKET)
with Server(SOCKET, Handler) as srv:
    srv.serve_forever()
