#!/usr/bin/env python3
"""Many bad clients against the agent's pairing port while a good companion pairs.

Runs N concurrent bad clients for S seconds against a running agent whose pairing window is open. Each
client repeats its misbehaviour (reconnecting after every close) until the time is up:

  slowloris    sends a request head one byte every 2 s (never finishes)
  oversized    POSTs companionInfo with a 5 MB body, sent as fast as the server reads it
  garbage      sends random bytes
  half-open    connects and never sends anything
  deviceinfo   calls GET /provision/deviceInfo in a loop (proper Host), as a script on another machine would
  rebinding    a browser after DNS rebinding: Host names another site, with an Origin

The bad clients come from 127.0.0.2 to 127.0.0.251 (other machines on the network). When the S seconds are
up, the good companion (`replenish-emulator companion`, from 127.0.0.1) pairs while the flood goes on; it
must succeed; then the bad clients stop. The agent's RSS (VmRSS of --agent-pid) is sampled every second and
printed at the start, at 1/4 (the flood is established), at its peak and at the end of the S seconds; the
script fails when the peak is more than --rss-slack-kib above the 1/4 figure. It prints, per kind of
client, how each attempt was answered or closed, and one JSON line (`RESULT {...}`) for tests. An attempt
cut when the port closed after pairing is counted as such.
"""
import argparse
import asyncio
import json
import os
import random
import resource
import socket
import sys
import time

KINDS = ["slowloris", "oversized", "garbage", "half-open", "deviceinfo", "rebinding"]
BIG = 5 * 1000 * 1000
CHUNK = b"x" * 65536


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Tally:
    def __init__(self):
        self.counts = {kind: {} for kind in KINDS}
        # When the good companion paired: the agent closes the port then, cutting what is in flight.
        self.window_closed_at = None
        self.companion_started_at = None

    def add(self, kind, outcome):
        cut = ("reset" in outcome or "closed without" in outcome or "no answer" in outcome)
        if cut and self.window_closed_at is not None and time.monotonic() >= self.window_closed_at - 0.5:
            outcome = "cut when the window closed (paired)"
        if outcome.startswith("connection refused") and self.companion_started_at is not None:
            outcome = "refused: port closed after pairing"
        bucket = self.counts[kind]
        bucket[outcome] = bucket.get(outcome, 0) + 1


async def connect(host, port, source):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.bind((source, 0))
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


def status_of(data):
    if data.startswith(b"HTTP/1.1 "):
        return "answered " + data[9:12].decode(errors="replace")
    return "closed without answer" if not data else "answered garbage"


async def read_answer(reader, timeout):
    """The server's answer up to its close: (first bytes, how it ended)."""
    data = b""
    try:
        while len(data) < 65536:
            chunk = await asyncio.wait_for(reader.read(4096), timeout)
            if not chunk:
                return data, "closed"
            data += chunk
            if b"\r\n\r\n" in data and b"Content-Length: " in data:
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                if len(body) >= length:
                    return data, "answered"
    except asyncio.TimeoutError:
        return data, "timeout"
    except ConnectionResetError:
        return data, "reset"
    return data, "answered"


class Stop:
    """When the bad clients stop: once the good companion is done."""

    def __init__(self, at):
        self.at = at


async def one_attempt(kind, host, port, source, stop):
    """One connection of a bad client; returns its outcome."""
    try:
        reader, writer = await connect(host, port, source)
    except ConnectionRefusedError:
        await asyncio.sleep(0.5)
        return "connection refused (port closed)"
    except OSError as error:
        await asyncio.sleep(0.2)
        return f"connect failed ({error.strerror or error})"
    started = time.monotonic()
    try:
        if kind == "slowloris":
            head = f"GET /provision/deviceInfo HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode()
            for byte in (head + b"a" * 10000):
                writer.write(bytes([byte]))
                await writer.drain()
                try:
                    chunk = await asyncio.wait_for(reader.read(4096), 2)
                except asyncio.TimeoutError:
                    chunk = None
                if chunk is not None:
                    return f"closed by server after {round(time.monotonic() - started)} s" if not chunk else status_of(chunk)
                if time.monotonic() > stop.at:
                    return "still open at the end"
            return "sent all"
        if kind == "half-open":
            chunk = await asyncio.wait_for(reader.read(4096), 15)
            if chunk:
                return status_of(chunk)
            return f"closed by server after {round(time.monotonic() - started)} s"
        if kind == "oversized":
            # A blind uploader: the whole body, 64 KiB at a time, before it reads anything.
            writer.write(
                f"POST /provision/companionInfo HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {BIG}\r\n\r\n".encode()
            )
            try:
                for offset in range(0, BIG, len(CHUNK)):
                    writer.write(CHUNK[: min(len(CHUNK), BIG - offset)])
                    await asyncio.wait_for(writer.drain(), 10)
            except (ConnectionResetError, BrokenPipeError):
                pass
            except asyncio.TimeoutError:
                pass
            data, ended = await read_answer(reader, 10)
            return status_of(data) if data else f"no answer ({ended})"
        if kind == "garbage":
            writer.write(os.urandom(random.randint(16, 4096)))
            await writer.drain()
            data, ended = await read_answer(reader, 12)
            return status_of(data) if data else f"no answer ({ended})"
        if kind == "deviceinfo":
            writer.write(f"GET /provision/deviceInfo HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            await writer.drain()
            data, ended = await read_answer(reader, 12)
            return status_of(data) if data else f"no answer ({ended})"
        if kind == "rebinding":
            writer.write(
                b"POST /provision/companionInfo HTTP/1.1\r\nHost: attacker.example\r\n"
                b"Origin: http://attacker.example\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}"
            )
            await writer.drain()
            data, ended = await read_answer(reader, 12)
            return status_of(data) if data else f"no answer ({ended})"
    except (ConnectionResetError, BrokenPipeError):
        if os.environ.get("LOAD_DEBUG"):
            import traceback; traceback.print_exc()
        return "reset"
    except asyncio.TimeoutError:
        return "timeout"
    finally:
        writer.close()
    return "?"


async def bad_client(index, kind, args, tally, stop):
    source = f"127.0.0.{2 + index % 250}"
    while time.monotonic() < stop.at:
        outcome = await one_attempt(kind, args.host, args.port, source, stop)
        tally.add(kind, outcome)
        if kind == "deviceinfo":
            await asyncio.sleep(0.05)


async def companion(args):
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        args.companion, "companion", "--device", f"http://{args.host}:{args.port}", "--lwa", args.lwa,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 60)
    except asyncio.TimeoutError:
        process.kill()
        out, err = await process.communicate()
        text = (out + err).decode(errors="replace").strip()
        return {"paired": False, "seconds": round(time.monotonic() - started, 2), "output": f"timed out after 60 s: {text}"}
    return {
        "paired": process.returncode == 0,
        "seconds": round(time.monotonic() - started, 2),
        "output": (out + err).decode(errors="replace").strip(),
    }


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lwa", required=True, help="the emulator's base URL")
    parser.add_argument("--companion", required=True, help="path to replenish-emulator")
    parser.add_argument("--agent-pid", type=int, required=True)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rss-slack-kib", type=int, default=8192)
    parser.add_argument("--kinds", default=",".join(KINDS), help="which kinds of bad client (comma-separated)")
    args = parser.parse_args()
    kinds = [kind for kind in args.kinds.split(",") if kind in KINDS]

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, args.clients * 2 + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))

    tally = Tally()
    started = time.monotonic()
    flood_end = started + args.seconds
    stop = Stop(flood_end + 120)
    samples = [(0.0, rss_kib(args.agent_pid))]

    async def sample():
        while time.monotonic() < stop.at:
            await asyncio.sleep(1)
            samples.append((round(time.monotonic() - started, 1), rss_kib(args.agent_pid)))

    sampler = asyncio.create_task(sample())
    clients = [
        asyncio.create_task(bad_client(i, kinds[i % len(kinds)], args, tally, stop)) for i in range(args.clients)
    ]
    # The flood for the whole time; then the good companion pairs while it goes on; then the clients stop.
    await asyncio.sleep(max(0, flood_end - time.monotonic()))
    rss_end_of_flood = rss_kib(args.agent_pid)
    tally.companion_started_at = time.monotonic()
    good = await companion(args)
    if good["paired"]:
        tally.window_closed_at = time.monotonic()
    stop.at = time.monotonic()
    await asyncio.gather(*clients, return_exceptions=True)
    sampler.cancel()

    quarter = next((kib for at, kib in samples if at >= args.seconds / 4), samples[-1][1])
    under_load = [kib for at, kib in samples if args.seconds / 4 <= at <= args.seconds and kib]
    peak = max(under_load + [rss_end_of_flood or 0]) if under_load else quarter
    flat = quarter is not None and rss_end_of_flood is not None and peak - quarter <= args.rss_slack_kib
    rss = {
        "startKiB": samples[0][1], "quarterKiB": quarter, "peakUnderLoadKiB": peak,
        "endOfFloodKiB": rss_end_of_flood, "afterPairingKiB": rss_kib(args.agent_pid), "flat": flat,
    }
    print(f"pairing-load: {args.clients} bad clients for {args.seconds:g} s against {args.host}:{args.port}")
    for index, kind in enumerate(kinds):
        counts = tally.counts[kind]
        total = sum(counts.values())
        detail = ", ".join(f"{outcome}: {count}" for outcome, count in sorted(counts.items(), key=lambda x: -x[1]))
        clients = args.clients // len(kinds) + (1 if index < args.clients % len(kinds) else 0)
        print(f"  {kind:<11} {clients:>4} clients, {total:>6} attempts: {detail}")
    print(f"  good companion: {'paired' if good['paired'] else 'FAILED'} in {good['seconds']} s ({good['output']})")
    print(
        f"  agent RSS: start {rss['startKiB']} KiB, at 1/4 {rss['quarterKiB']} KiB, peak under load "
        f"{rss['peakUnderLoadKiB']} KiB, end of the {args.seconds:g} s {rss['endOfFloodKiB']} KiB, after pairing "
        f"{rss['afterPairingKiB']} KiB "
        f"({'flat' if flat else 'GREW'}: slack {args.rss_slack_kib} KiB)"
    )
    print("RESULT " + json.dumps({"companion": good, "rss": rss, "clients": tally.counts}))
    return 0 if good["paired"] and flat else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
