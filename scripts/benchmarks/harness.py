"""What every benchmark shares: running and timing commands, the machine's record, the
servers' lifecycle (a free port, waiting for an answer, stopping), CPU per process, the
pinning of servers and client to cores (taskset), wrk, and the medians of rounds. What
the client asks for (wrk's Lua scripts, a cold pass) is in loads.py.

Not a test: see scripts/bench and docs/benchmarks.md.
"""

import datetime
import http.client
import json
import math
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

# The repository: scripts/benchmarks/harness.py is two folders below it.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE_ID = "noise"
TILE = 256
# tiler's default qualities (TileEncoder), used for both tools.
JPEG_Q = 85
WEBP_Q = 80
EXTENSIONS = {"png": ".png", "png-c1": ".png", "jpeg": ".jpg", "webp": ".webp"}
# A format "FMT-archive" is the pyramid in one file: tiler cut --archive (PMTiles), dzsave
# container=zip (tiles stored).
ARCHIVE = "-archive"
# The tools: tiler, the system's `vips dzsave` (Debian's libvips 8.14) and dzsave of the
# newest libvips (pyvips-binary from PyPI, in a virtual environment under OUT).
TOOLS = {"tiler": "tiler", "dzsave": "dzsave 8.14", "dzsave818": "dzsave 8.18"}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, text=True, **kw)


def out_of(cmd):
    try:
        return subprocess.run(cmd, text=True, capture_output=True, shell=isinstance(cmd, str)).stdout.strip()
    except OSError:
        return ""


class TilerError(Exception):
    """tiler could not do what a leg asked; the leg is reported as an error."""


# --------------------------------------------------------------------------- geometry

def levels_for(width, height, tile=TILE):
    """Level sizes as in the product contract (docs: product.md, 'Pyramid geometry')."""
    longest = max(width, height)
    max_level = max(0, math.ceil(math.log2(longest / tile))) if longest > tile else 0
    out = []
    for z in range(max_level + 1):
        f = 2 ** (max_level - z)
        wz, hz = -(-width // f), -(-height // f)
        out.append({"level": z, "width": wz, "height": hz,
                    "columns": -(-wz // tile), "rows": -(-hz // tile)})
    return out


def tile_count(width, height):
    return sum(l["columns"] * l["rows"] for l in levels_for(width, height))


# --------------------------------------------------------------------------- machine

def machine_info():
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    model = ""
    for line in out_of(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": int(out_of(["nproc"]) or 0),
        "cpu": model,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "git": out_of(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
        "branch": out_of(["git", "-C", ROOT, "rev-parse", "--abbrev-ref", "HEAD"]),
        "swift": out_of("swift --version 2>&1 | head -1"),
        "vips": out_of(["vips", "--version"]),
        "nginx": out_of("nginx -v 2>&1"),
        "wrk": out_of("wrk -v 2>&1 | head -1"),
        "iipsrv": out_of("dpkg-query -W -f='${Version}' iipimage-server"),
        "load_start": os.getloadavg(),
        "uptime_start": out_of(["uptime"]),
    }


def free_disk(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# --------------------------------------------------------------------------- measuring

def tree_size(path):
    total = files = 0
    for d, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(d, n)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def timed(cmd, workdir, env=None):
    """Runs cmd under /usr/bin/time; returns wall s, user s, sys s, peak RSS MB."""
    tf = os.path.join(workdir, ".time")
    p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf] + cmd,
                       text=True, capture_output=True, env=env)
    if p.returncode != 0:
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip()] or ["(no output)"]
        why = next((l for l in lines if "rror" in l), lines[0])
        raise TilerError(f"`{' '.join(cmd[:2])}` exited {p.returncode}: {why}")
    with open(tf) as f:
        wall, user, sys_, rss = f.read().split()[-4:]
    os.unlink(tf)
    return {"wall": float(wall), "user": float(user), "sys": float(sys_),
            "cpu": round(float(user) + float(sys_), 2), "rss_mb": round(int(rss) / 1024, 1)}


def clear(path):
    if os.path.exists(path):
        shutil.rmtree(path)


def median_or_none(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def median_legs(rs, **more):
    """One server's figures over its rounds of wrk (or of cold passes): the medians of
    req/s, p50 and p99, every error, then `more`, then the rounds themselves."""
    return {"rps": statistics.median(x["rps"] for x in rs),
            "p50_ms": statistics.median(x["p50_ms"] for x in rs),
            "p99_ms": statistics.median(x["p99_ms"] for x in rs),
            "errors": sum(x["errors"] for x in rs), **more, "runs": rs}


# --------------------------------------------------------------------------- servers

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path, timeout=30.0, proc=None):
    """Polls GET path in a tight loop until it answers 200; returns seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise TilerError(f"server exited with {proc.returncode} before answering")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.0005)
    raise TilerError(f"nothing answered 200 on port {port}{path} within {timeout:.0f} s")


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), body


def process_tree(pid):
    """pid and its descendants (nginx's master and its worker)."""
    pids, todo = [], [pid]
    while todo:
        q = todo.pop()
        pids.append(q)
        try:
            for task in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return pids


def cpu_seconds(pids):
    """User + system CPU seconds used so far by these processes (all their threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for q in pids:
        try:
            with open(f"/proc/{q}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / tick


# Where the servers under test and wrk run (`--server-cpus`, `--client-cpus`): taskset
# CPU lists, or None for anywhere. On this project's 2-core machines wrk shares the
# servers' cores; on a larger one, apart, wrk's own CPU no longer caps the servers.
PINNING = {"server": None, "client": None}


def pinned(role, argv):
    """argv under `taskset -c CPUS` when `role` ("server" or "client") is pinned."""
    cpus = PINNING[role]
    return ["taskset", "-c", cpus] + argv if cpus else argv


def cpu_list(cpus):
    """The CPUs a taskset list such as `0-1,4` names; ValueError for a range that runs
    backwards."""
    named = set()
    for part in cpus.split(","):
        a, _, b = part.strip().partition("-")
        lo, hi = int(a), int(b) if b else int(a)
        if hi < lo:
            raise ValueError(f"the range {part} runs backwards")
        named.update(range(lo, hi + 1))
    return named


def server_cores():
    """The cores the servers under test may use: their pinned CPUs, or every core."""
    return len(cpu_list(PINNING["server"])) if PINNING["server"] else (os.cpu_count() or 2)


def wrk(port, script, seconds, threads=2, conns=32, pid=None):
    """wrk's figures; with pid, also the server's CPU time per response (pid and its
    children, every thread: user + system), in microseconds."""
    pids = process_tree(pid) if pid else []
    cpu0 = cpu_seconds(pids)
    own0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = run(pinned("client", ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{seconds}s", "--latency", "-s",
                              script, f"http://127.0.0.1:{port}"]), capture_output=True, check=False)
    line = next((l for l in p.stdout.splitlines() if l.startswith("BENCHJSON ")), None)
    if not line:
        raise TilerError(f"wrk gave no result: {p.stdout[-300:]} {p.stderr[-300:]}")
    j = json.loads(line[len("BENCHJSON "):])
    cpu = cpu_seconds(pids) - cpu0
    # wrk's own CPU (user + system of the finished child): the load generator shares the
    # cores, so a server's ceiling here is cores / (its CPU + wrk's CPU) per response.
    own1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk_cpu = own1.ru_utime + own1.ru_stime - own0.ru_utime - own0.ru_stime
    secs = j["duration_us"] / 1e6
    errs = sum(j["errors"].values())
    return {"cpu_us_per_response": round(cpu * 1e6 / max(1, j["requests"]), 1) if pid else None,
            "wrk_cpu_us_per_response": round(wrk_cpu * 1e6 / max(1, j["requests"]), 1),
            "rps": round(j["requests"] / secs), "p50_ms": j["p50_us"] / 1000, "p99_ms": j["p99_us"] / 1000,
            "p999_ms": j["p999_us"] / 1000, "mean_ms": round(j["mean_us"] / 1000, 3), "errors": errs,
            "errors_detail": j["errors"], "requests": j["requests"], "mb_per_s": round(j["bytes"] / secs / 1e6, 1),
            "bytes_per_response": round(j["bytes"] / max(1, j["requests"]))}


def vm_hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def tiler_serve_log(sdir, lines=20):
    """The last lines `tiler serve` wrote to its log in the serve folder."""
    try:
        with open(os.path.join(sdir, "tiler-serve.log"), errors="replace") as f:
            return f.read().strip().splitlines()[-lines:]
    except OSError:
        return []


def check_alive(name, proc, sdir):
    """Stops the run when a server under test has exited: its figures would be wrk's
    failed connections, not a measurement. For tiler, with the last lines of its log."""
    if proc is None or proc.poll() is None:
        return
    code = proc.returncode
    how = f"signal {-code}" if code < 0 else f"exit status {code}"
    last = "; its last messages:\n  " + "\n  ".join(tiler_serve_log(sdir)) if name == "tiler" else ""
    raise TilerError(f"{name} exited during the run ({how}){last}")


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
