#!/usr/bin/env python3
"""Replays the hostile probe of issue 31 against a real daemon and prints what it cost.

Each step starts `atc daemon` on a fresh state dir (port 0, agents that cannot hang), does what
the probe did, and measures the daemon from the outside (`/proc/<pid>`, the state dir, its
API). Nothing here asserts: the tests in tests/ do that; this prints the figures the closing
note quotes, for the binary it is given.

    contrib/proof/hostile.py                      # target/release/atc, else target/debug/atc
    ATC_BIN=target/debug/atc contrib/proof/hostile.py trail slow_heads

Steps (all by default): trail, reporter_memory, slow_heads, emfile, session_cap.
"""

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIG = {"agents": {
    "cat": {"bin": "cat"},
    # A Claude-kind agent that is a plain shell: its reports map as Claude's do.
    "claude": {"bin": "/bin/sh", "kind": "claude", "args": ["-c", "exec /bin/sh", "agent"],
               "env": {"PS1": ""}},
}}


def atc_bin():
    given = os.environ.get("ATC_BIN")
    if given:
        return os.path.abspath(given)
    for profile in ("release", "debug"):
        path = os.path.join(ROOT, "target", profile, "atc")
        if os.path.exists(path):
            return path
    sys.exit("no atc binary: build one, or set ATC_BIN")


class Daemon:
    """`atc daemon` on a fresh state dir; `nofile` lowers its open-file limit before it starts."""

    def __init__(self, nofile=None, config=None):
        self.tmp = tempfile.TemporaryDirectory()
        self.state = os.path.join(self.tmp.name, "state")
        cfg = os.path.join(self.tmp.name, "config.json")
        with open(cfg, "w") as f:
            json.dump(config or CONFIG, f)
        self.log = open(os.path.join(self.tmp.name, "daemon.log"), "w")

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [atc_bin(), "daemon", "--state-dir", self.state, "--listen", "127.0.0.1:0",
             "--config", cfg],
            stdout=subprocess.DEVNULL, stderr=self.log, preexec_fn=limit,
            env={**os.environ, "RUST_LOG": "warn"})
        deadline = time.time() + 20
        while True:
            try:
                with open(os.path.join(self.state, "daemon.json")) as f:
                    info = json.load(f)
                if info.get("pid") == self.proc.pid:
                    break
            except (OSError, ValueError):
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                sys.exit("the daemon did not start")
            time.sleep(0.05)
        self.url = info["url"]
        host, port = self.url.split("//")[1].split(":")
        self.addr = (host, int(port))
        with open(os.path.join(self.state, "token")) as f:
            self.token = f.read().split()[0]

    def call(self, method, path, body=None, timeout=10):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def status(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0

    def cpu_ticks(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.tmp.cleanup()


def wait(what, pred, within=60):
    deadline = time.time() + within
    while not pred():
        if time.time() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.05)


def sqlite_count(db, query):
    import sqlite3
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return c.execute(query).fetchone()[0]


def trail():
    """1,000 Notification reports of 100 KB from inside one session (the probe: 97 MB)."""
    d = Daemon()
    _, s = d.call("POST", "/v1/sessions", {"agent": "claude", "cwd": d.tmp.name})
    sid = s["session"]["id"]
    big = os.path.join(d.tmp.name, "big.json")
    with open(big, "w") as f:
        json.dump({"hook_event_name": "Notification", "message": "m" * 100_000}, f)
    db = os.path.join(d.state, "atc.db")
    before = os.path.getsize(db) + os.path.getsize(db + "-wal")
    started = time.time()
    d.call("POST", f"/v1/sessions/{sid}/submit",
           {"text": f"for i in $(seq 1000); do {atc_bin()} hook-report < {big}; done; echo DONE"})

    def counts():
        r = d.call("GET", "/v1/daemon")[1]["reporter"]
        return r["accepted"] + r["dropped"]

    wait("1,000 reports", lambda: counts() >= 1000, within=300)
    took = time.time() - started
    _, info = d.call("GET", "/v1/daemon")
    rows = sqlite_count(db, f"SELECT COUNT(*) FROM events WHERE atc_id = '{sid}'")
    _, sess = d.call("GET", f"/v1/sessions/{sid}")
    after = os.path.getsize(db) + os.path.getsize(db + "-wal")
    out = {"step": "trail", "reports": 1000, "seconds": round(took, 1),
           "accepted": info["reporter"]["accepted"], "dropped": info["reporter"]["dropped"],
           "trail_rows": rows, "db_growth_kib": (after - before) // 1024,
           "last_msg_chars": len(sess["session"]["lastMsg"])}
    d.stop()
    return out


def reporter_memory():
    """200 reporters each hold a 1 MiB line open (the probe: 801 reads, 98 → 895 MiB)."""
    d = Daemon()
    before = d.status("VmHWM")
    sock = os.path.join(d.state, "atc.sock")

    def hold():
        c = socket.socket(socket.AF_UNIX)
        try:
            c.connect(sock)
            c.settimeout(60)
            c.sendall(b"x" * (1024 * 1024 - 1))
            c.recv(1)
        except OSError:
            pass
        finally:
            c.close()

    threads = [threading.Thread(target=hold) for _ in range(200)]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = {"step": "reporter_memory", "connections": 200, "line_mib": 1,
           "seconds": round(time.time() - started, 1),
           "peak_rss_growth_mib": (d.status("VmHWM") - before) // 1024}
    d.stop()
    return out


def slow_heads():
    """200 keep-alive connections send one good request, then the next head a byte every 2 s
    (the probe: 200 of 200 open after 80 s)."""
    d = Daemon()
    conns = []
    for _ in range(200):
        c = socket.create_connection(d.addr)
        c.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        c.settimeout(5)
        c.recv(65536)
        conns.append(c)
    head = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    answered = {}
    started = time.time()
    for i in range(12):
        for n, c in enumerate(conns):
            if n in answered:
                continue
            try:
                c.sendall(head[i:i + 1])
                c.settimeout(0.001)
                got = c.recv(65536)
                answered[n] = got.split(b" ", 2)[1].decode() if got else "closed"
            except socket.timeout:
                pass
            except OSError:
                answered[n] = "closed"
        time.sleep(2)
    still_open = 200 - len(answered)
    codes = {}
    for v in answered.values():
        codes[v] = codes.get(v, 0) + 1
    for c in conns:
        c.close()
    out = {"step": "slow_heads", "connections": 200, "seconds": round(time.time() - started, 1),
           "still_open": still_open, "answers": codes}
    d.stop()
    return out


def emfile():
    """The daemon's descriptor table full, reporters waiting: its CPU over two seconds (the
    probe: 90-95 % of a core)."""
    d = Daemon()
    hard = resource.prlimit(d.proc.pid, resource.RLIMIT_NOFILE)[1]
    resource.prlimit(d.proc.pid, resource.RLIMIT_NOFILE, (d.fds() + 2, hard))
    sock = os.path.join(d.state, "atc.sock")
    held = []
    for _ in range(10):
        c = socket.socket(socket.AF_UNIX)
        c.connect(sock)
        held.append(c)
    time.sleep(0.5)
    ticks = os.sysconf("SC_CLK_TCK")
    before = d.cpu_ticks()
    time.sleep(2)
    used = d.cpu_ticks() - before
    for c in held:
        c.close()
    out = {"step": "emfile", "window_s": 2, "cpu_percent_of_a_core": round(100 * used / ticks / 2, 1)}
    d.stop()
    return out


def session_cap():
    """At 512 descriptors: spawns until refused, then a fresh connection (the probe: 237
    spawns, then the table stayed full and a fresh connection timed out)."""
    d = Daemon(nofile=512)
    spawned, refusal = 0, None
    while spawned < 1000:
        status, body = d.call("POST", "/v1/sessions", {"agent": "cat", "cwd": d.tmp.name})
        if status != 201:
            refusal = {"status": status, "code": body["error"]["code"],
                       "problem": body["error"]["data"].get("problem")}
            break
        spawned += 1
    fds = d.fds()
    started = time.time()
    status, body = d.call("GET", "/v1/sessions", timeout=5)
    out = {"step": "session_cap", "nofile": 512, "spawned": spawned, "refusal": refusal,
           "daemon_fds": fds, "fresh_list_status": status,
           "fresh_list_ms": round(1000 * (time.time() - started), 1),
           "listed": len(body.get("sessions", []))}
    d.stop()
    return out


STEPS = {"trail": trail, "reporter_memory": reporter_memory, "slow_heads": slow_heads,
         "emfile": emfile, "session_cap": session_cap}

if __name__ == "__main__":
    names = sys.argv[1:] or list(STEPS)
    print(f"# {atc_bin()}")
    for name in names:
        print(json.dumps(STEPS[name]()), flush=True)
