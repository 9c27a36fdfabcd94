#!/usr/bin/env python3
"""A hostile relay for the pairing tests: a host the companion reaches instead of the device.

It forwards every request to the real device (its own Host header swapped for the device's) and passes the
answers back, changing a deviceInfo answer as told: the challenge's method turned to `plain` (so that LWA would
bind the customer's code to a challenge the relay knows, the challenge itself being the verifier), and the
phase flag isTestDevice flipped. The proof is passed on untouched. Each request is logged, one line each, to
the log file named on the command line.

    relay.py LISTEN_PORT DEVICE_URL LOG [--plain] [--flip-test] [--bind ADDRESS]
"""
import argparse
import http.server
import json
import socket
import urllib.error
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("port", type=int)
parser.add_argument("device")
parser.add_argument("log")
parser.add_argument("--plain", action="store_true")
parser.add_argument("--flip-test", action="store_true")
parser.add_argument("--bind", default="127.0.0.1")
args = parser.parse_args()


class Relay(http.server.BaseHTTPRequestHandler):
    def forward(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        request = urllib.request.Request(args.device + self.path, data=body, method=method)
        for name in ("Content-Type", "User-Agent"):
            if self.headers.get(name):
                request.add_header(name, self.headers[name])
        try:
            with urllib.request.urlopen(request, timeout=80) as answer:
                status, payload = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        changed = []
        if self.path.startswith("/provision/deviceInfo") and status == 200:
            info = json.loads(payload)
            if args.plain:
                info["codeChallengeMethod"] = "plain"
                changed.append("method")
            if args.flip_test:
                info["isTestDevice"] = not info["isTestDevice"]
                changed.append("isTestDevice")
            payload = json.dumps(info).encode()
        with open(args.log, "a") as log:
            log.write(f"{method} {self.path.split('?')[0]} {status} changed={','.join(changed)}\n")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self.forward("GET")

    def do_POST(self):
        self.forward("POST")

    def log_message(self, *_):
        pass


class Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET


Server((args.bind, args.port), Relay).serve_forever()
