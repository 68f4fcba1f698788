#!/usr/bin/env python3
"""Schemathesis against a real daemon's /v1/openapi.json (issue 12, item 4).

Makes a venv under target/schemathesis with a pinned schemathesis, starts `atc daemon` on a
fresh state dir, port 0, with agents that cannot hang (cat and /bin/sh; never an interactive
bash), reads its URL and token from the state dir, and runs schemathesis with the token over
every route but POST /v1/daemon/quit (the daemon's off switch: it would end the run, and
tests/daemon.rs covers it) until about REQUESTS requests are sent. Checks: no 5xx, answers
that match the document's schemas, statuses the document lists, and a per-request timeout
(a hung connection counts). Then it checks the daemon is alive and answers, stops it, and
prints one JSON line and a short table.

    contrib/proof/schemathesis.py                  # 10,000 requests
    REQUESTS=1000 contrib/proof/schemathesis.py    # the CI run

Environment: REQUESTS (10000), ATC_BIN (target/release/atc, else target/debug/atc),
REQUEST_TIMEOUT seconds (10), SEED (random). Exits non-zero when any figure is not 0 or the
daemon died. Reports (HAR of every request, schemathesis's JSON) stay in
target/schemathesis/run-*/.
"""

import glob
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SCHEMATHESIS = "schemathesis==4.32.5"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORK = os.path.join(ROOT, "target", "schemathesis")
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"
EXCLUDED = ["/v1/daemon/quit"]
CONFIG = {"agents": {"cat": {"bin": "cat"}, "shell": {"bin": "/bin/sh"}}}


def log(msg):
    print(f"schemathesis.py: {msg}", file=sys.stderr, flush=True)


def venv():
    """The pinned schemathesis, installed once into target/schemathesis/venv."""
    bin_dir = os.path.join(WORK, "venv", "bin")
    st = os.path.join(bin_dir, "schemathesis")
    stamp = os.path.join(WORK, "venv", "installed")
    if os.path.exists(stamp) and open(stamp).read().strip() == SCHEMATHESIS:
        return st
    os.makedirs(WORK, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", os.path.join(WORK, "venv")], check=True)
    subprocess.run([os.path.join(bin_dir, "pip"), "install", "-q", SCHEMATHESIS], check=True)
    with open(stamp, "w") as f:
        f.write(SCHEMATHESIS + "\n")
    return st


def atc_bin():
    given = os.environ.get("ATC_BIN")
    if given:
        return given
    for profile in ("release", "debug"):
        path = os.path.join(ROOT, "target", profile, "atc")
        if os.access(path, os.X_OK):
            return path
    sys.exit("schemathesis.py: no target/{release,debug}/atc; build it or set ATC_BIN")


def start_daemon(run_dir):
    state = os.path.join(run_dir, "state")
    config = os.path.join(run_dir, "config.json")
    with open(config, "w") as f:
        json.dump(CONFIG, f)
    out = open(os.path.join(run_dir, "daemon.log"), "w")
    proc = subprocess.Popen(
        [atc_bin(), "daemon", "--listen", "127.0.0.1:0", "--state-dir", state, "--config", config],
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"schemathesis.py: the daemon exited with {proc.returncode}; see {out.name}")
        try:
            with open(os.path.join(state, "daemon.json")) as f:
                url = json.load(f)["url"]
            with open(os.path.join(state, "token")) as f:
                token = f.read().strip()
            if token and answers(url, token):
                return proc, url, token
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("schemathesis.py: the daemon did not come up within 60 s")


def answers(url, token):
    req = urllib.request.Request(f"{url}/v1/health", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


def operations(url, token):
    req = urllib.request.Request(
        f"{url}/v1/openapi.json", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        doc = json.load(r)
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    return sum(
        1
        for path, ops in doc["paths"].items()
        if path not in EXCLUDED
        for method in ops
        if method in methods
    )


def run_round(st, url, token, run_dir, n, seed, timeout):
    report = os.path.join(run_dir, f"round-{len(glob.glob(os.path.join(run_dir, 'round-*')))}")
    cmd = [
        st, "run", f"{url}/v1/openapi.json",
        "--header", f"Authorization: Bearer {token}",
        "--checks", CHECKS,
        "--max-examples", str(n),
        "--phases", "examples,coverage,fuzzing",
        "--request-timeout", str(timeout),
        "--workers", "1",
        "--no-shrink",
        "--continue-on-failure",
        "--suppress-health-check", "all",
        "--report", "json,har",
        "--report-dir", report,
        "--no-color",
    ]
    for path in EXCLUDED:
        cmd += ["--exclude-path", path]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    with open(f"{report}.out", "w") as out:
        # In the run's folder: schemathesis keeps its example database in its working dir.
        subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=run_dir
        )
    return report


def tally(report, figures):
    for har in glob.glob(os.path.join(report, "har-*.json")):
        with open(har) as f:
            entries = json.load(f)["log"]["entries"]
        figures["requests"] += len(entries)
        figures["5xx"] += sum(1 for e in entries if e["response"]["status"] >= 500)
    for path in glob.glob(os.path.join(report, "json-*.json")):
        with open(path) as f:
            doc = json.load(f)
        for group in doc.get("failures", []):
            words = f"{group.get('type', '')} {group.get('title', '')}".lower()
            if "schema" in words:
                figures["schema_violations"] += group["count"]
            elif "status code" in words or "undocumented" in words:
                figures["undocumented_status"] += group["count"]
            elif "server error" in words:
                pass  # counted from the HAR as 5xx
            else:
                figures["other_failures"] += group["count"]
            figures["failure_titles"].append(f"{group['count']} x {group.get('title')}")
        for err in doc.get("errors", []):
            title = err.get("title", "")
            if "timeout" in title.lower() or "timed out" in title.lower():
                figures["hung"] += err["count"]
            else:
                figures["errors"] += err["count"]
            figures["failure_titles"].append(f"{err['count']} x error: {title}")


def main():
    wanted = int(os.environ.get("REQUESTS", "10000"))
    timeout = float(os.environ.get("REQUEST_TIMEOUT", "10"))
    seed = os.environ.get("SEED")
    st = venv()
    os.makedirs(WORK, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="run-", dir=WORK)
    started = time.monotonic()
    proc, url, token = start_daemon(run_dir)
    figures = {
        "requests": 0,
        "5xx": 0,
        "schema_violations": 0,
        "undocumented_status": 0,
        "hung": 0,
        "errors": 0,
        "other_failures": 0,
        "failure_titles": [],
    }
    try:
        ops = operations(url, token)
        # Several operations have fewer distinct inputs than --max-examples, so a round sends
        # less than n x ops; further rounds, each with its own seed, make up the rest.
        for round_no in range(4):
            missing = wanted - figures["requests"]
            if missing <= 0 or proc.poll() is not None:
                break
            n = max(1, math.ceil(missing / ops))
            round_seed = None if seed is None else int(seed) + round_no
            log(f"round {round_no}: {ops} operations, up to {n} examples each ({missing} to go)")
            report = run_round(st, url, token, run_dir, n, round_seed, timeout)
            tally(report, figures)
        crashed = proc.poll() is not None
        alive = not crashed and answers(url, token)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    figures["daemon_crashed"] = crashed or not alive
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["operations"] = ops
    figures["reports"] = run_dir
    titles = figures.pop("failure_titles")
    print(json.dumps(figures), flush=True)
    rows = [
        ("requests", figures["requests"]),
        ("5xx", figures["5xx"]),
        ("schema violations", figures["schema_violations"]),
        ("undocumented statuses", figures["undocumented_status"]),
        ("timeouts / hung", figures["hung"]),
        ("other errors", figures["errors"] + figures["other_failures"]),
        ("daemon crashed", "y" if figures["daemon_crashed"] else "n"),
        ("seconds", figures["seconds"]),
    ]
    for name, value in rows:
        print(f"{name:<24}{value:>10}")
    for t in titles:
        print(f"  {t}")
    bad = (
        figures["5xx"]
        + figures["schema_violations"]
        + figures["undocumented_status"]
        + figures["hung"]
        + figures["errors"]
        + figures["other_failures"]
    )
    if figures["daemon_crashed"] or bad or figures["requests"] == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
