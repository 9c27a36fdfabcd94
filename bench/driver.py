#!/usr/bin/env python3
"""The hot loops of scripts/bench.sh, in one process each so that no process start per press distorts a figure.

  driver.py presses  --target agent|c ...   presses a button N times, one order each, and times every press from
                                            the first edge to the emulator's receipt of the replenish call
  driver.py ready    --count N -- CMD...    starts CMD N times and times exec to READY=1 on $NOTIFY_SOCKET
  driver.py footprint [--settle S] -- CMD... starts CMD once and, S seconds after its READY=1, prints its resident
                                            memory (VmRSS, RssAnon, RssFile) and the resident part of its
                                            executable's code mapping, in kB (scripts/swift-floor.sh)

One order per press: before the next press the emulator's order in progress is delivered
(`POST /admin/deliver/{slot}`, so the next replenish places a new order rather than ORDER_INPROGRESS) and the
program under test has finished with the answer (the agent's outbox holds nothing for the slot; the C floor's
status file counts the order), so no press is coalesced with a pending one and none falls in a cooldown (the
agent's button has `cooldownSeconds: 0`). A press is counted only when the emulator logged it as `placed`.
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class Emulator:
    def __init__(self, url):
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=30)

    def request(self, method, path):
        for attempt in range(3):
            try:
                self.connection.request(method, path)
                response = self.connection.getresponse()
                return json.loads(response.read() or b"null")
            except (http.client.HTTPException, ConnectionError):
                self.connection.close()
                if attempt == 2:
                    raise

    def events_since(self, seq):
        return self.request("GET", f"/admin/events?since={seq}")["replenish"]

    def last_seq(self):
        return int(self.request("GET", "/admin/events")["lastSeq"])


def wait_until(what, predicate, limit=30.0, pause=0.001):
    deadline = time.monotonic() + limit
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            sys.exit(f"driver: timed out waiting for {what}")
        time.sleep(pause)


def read_json(path):
    try:
        with open(path, "rb") as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def presses(args):
    emulator = Emulator(args.emulator)
    hold = args.hold_ms / 1000
    if args.target == "c":
        fifo = os.open(args.fifo, os.O_WRONLY)
    seq = emulator.last_seq()
    latencies, placed, other = [], 0, {}
    for index in range(args.count):
        start = time.time()
        if args.target == "agent":
            connection = UnixHTTPConnection(args.control)
            body = json.dumps({"input": args.input, "holdSeconds": hold})
            connection.request("POST", "/press", body, {"Content-Type": "application/json"})
            answer = json.loads(connection.getresponse().read())
            connection.close()
            if not answer.get("ok") or "queued" not in answer.get("message", ""):
                sys.exit(f"driver: press {index + 1} was not queued: {answer}")
        else:
            os.write(fifo, b"1" + struct.pack("=q", time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
            time.sleep(hold)
            os.write(fifo, b"0" + struct.pack("=q", time.clock_gettime_ns(time.CLOCK_MONOTONIC)))
        events = wait_until(f"the replenish call of {args.target} press {index + 1}", lambda: emulator.events_since(seq),
                            pause=0.002)
        if len(events) != 1:
            sys.exit(f"driver: press {index + 1} made {len(events)} replenish calls")
        event = events[0]
        seq = event["seq"]
        if event["outcome"] == "placed":
            placed += 1
        else:
            other[event["outcome"]] = other.get(event["outcome"], 0) + 1
        if index < args.latency_count:
            latencies.append((event["at"] - start) * 1000)
        emulator.request("POST", f"/admin/deliver/{args.slot}")
        if args.target == "agent":
            outbox = os.path.join(args.state, "outbox.json")
            wait_until(
                "the agent to finish the order",
                lambda: (lambda box: box is not None and not any(e["slot"] == args.slot for e in box["entries"]))(
                    read_json(outbox)))
        else:
            status = os.path.join(args.state, "status.json")
            wait_until("the C floor to finish the order",
                       lambda: (read_json(status) or {}).get("orders", 0) >= args.first_order + index)
    latencies.sort()
    result = {"presses": args.count, "placed": placed, "other": other}
    if latencies:
        result["latency"] = {
            "count": len(latencies),
            "p50": round(statistics.median(latencies), 2),
            "p99": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 2),
            "max": round(latencies[-1], 2),
        }
    print(json.dumps(result))


def notify_listener():
    folder = tempfile.mkdtemp(prefix="bench-notify.")
    path = os.path.join(folder, "notify.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(30)
    return folder, path, listener


def wait_ready(listener):
    while True:
        message = listener.recv(4096).decode(errors="replace")
        if "READY=1" in message.split("\n"):
            return


def ready(args):
    folder, path, listener = notify_listener()
    environment = dict(os.environ, NOTIFY_SOCKET=path)
    times = []
    for _ in range(args.count):
        start = time.monotonic()
        process = subprocess.Popen(args.command, env=environment, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, close_fds=False)
        wait_ready(listener)
        times.append((time.monotonic() - start) * 1000)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        # Whatever else it sent while stopping (STOPPING=1) must not count for the next start.
        listener.setblocking(False)
        try:
            while listener.recv(4096):
                pass
        except BlockingIOError:
            pass
        listener.settimeout(30)
    os.unlink(path)
    os.rmdir(folder)
    times.sort()
    print(json.dumps({"starts": len(times), "median": round(statistics.median(times), 2),
                      "min": round(times[0], 2), "max": round(times[-1], 2)}))


def footprint(args):
    folder, path, listener = notify_listener()
    process = subprocess.Popen(args.command, env=dict(os.environ, NOTIFY_SOCKET=path),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False)
    try:
        wait_ready(listener)
        time.sleep(args.settle)
        fields = {}
        with open(f"/proc/{process.pid}/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "RssAnon", "RssFile"):
                    fields[name] = int(value.split()[0])
        executable = os.path.realpath(f"/proc/{process.pid}/exe")
        code, in_code = 0, False
        with open(f"/proc/{process.pid}/smaps") as smaps:
            for line in smaps:
                parts = line.split()
                if re.match(r"^[0-9a-f]+-[0-9a-f]+$", parts[0]):
                    in_code = len(parts) >= 6 and parts[1].startswith("r-x") and parts[5] == executable
                elif in_code and parts[0] == "Rss:":
                    code += int(parts[1])
        print(json.dumps({"rss": fields["VmRSS"], "anon": fields["RssAnon"], "file": fields["RssFile"],
                          "code": code}))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        os.unlink(path)
        os.rmdir(folder)


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="mode", required=True)
    press = commands.add_parser("presses")
    press.add_argument("--target", choices=["agent", "c"], required=True)
    press.add_argument("--emulator", required=True)
    press.add_argument("--slot", required=True)
    press.add_argument("--state", required=True, help="the state folder of the program under test")
    press.add_argument("--control", help="the agent's control socket")
    press.add_argument("--input", default="button")
    press.add_argument("--fifo", help="the C floor's line")
    press.add_argument("--count", type=int, required=True)
    press.add_argument("--first-order", type=int, default=1, help="the C floor's order number of the first press")
    press.add_argument("--latency-count", type=int, default=0)
    press.add_argument("--hold-ms", type=float, required=True)
    start = commands.add_parser("ready")
    start.add_argument("--count", type=int, required=True)
    start.add_argument("command", nargs=argparse.REMAINDER)
    resident = commands.add_parser("footprint")
    resident.add_argument("--settle", type=float, default=1.0, help="seconds to wait after READY=1")
    resident.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.mode == "presses":
        presses(args)
    else:
        args.command = [part for part in args.command if part != "--"]
        ready(args) if args.mode == "ready" else footprint(args)


if __name__ == "__main__":
    main()
