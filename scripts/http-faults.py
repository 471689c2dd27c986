#!/usr/bin/env python3
"""Reproduces the HTTP-layer faults of issue #11 against a `tiler serve` binary and prints
what happened (times, statuses, CPU seconds, RSS). Used for docs/reliability.md's rows.

    scripts/http-faults.py TILER ROOT ID FAULT

ROOT holds a pyramid ID cut from a large image (scripts/make-sample-image 8000 6000, then
`tiler cut --format png`, as the tile paths below are PNG's): renders draw 2000-px-wide IIIF regions of it. FAULT is one of
  blank-lines   20 clients send "\\r\\n" every 0.5 s (--header-timeout 3): how long they live
  starvation    40 renders in flight, then a tile read that missed the page cache: its latency
  abandoned     40 render requests whose clients close at once: server CPU seconds spent
  sigterm       30 renders in flight, SIGTERM: how many got an answer, and which
  overlay       ROOT through overlayfs (root only): cached tiles, and how many read threads start
  settings      absurd numeric settings: exit status and message
Each run starts its own server on a free port and stops it.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time


def start(tiler, root, *flags, env=None):
    p = subprocess.Popen([tiler, "serve", root, "--port", "0", *flags], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    line = p.stdout.readline().decode()
    m = re.search(r":(\d+)/$", line.strip())
    if not m:
        p.kill()
        raise SystemExit(f"no start-up line: {line!r}")
    return p, int(m.group(1))


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0


def request(port, path, timeout=120):
    """One GET on a fresh connection: (status, headers text, seconds) or (None, error, seconds)."""
    started = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None, "closed without an answer", time.monotonic() - started
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
        while len(body) < length:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            body += chunk
        return int(head.split()[1]), head.decode(errors="replace"), time.monotonic() - started
    except OSError as e:
        return None, str(e), time.monotonic() - started
    finally:
        s.close()


def render_path(ident, i):
    return f"/iiif/3/{ident}/{i},0,4000,3000/2000,/0/default.png"  # i < 4000: a distinct region each


def drop_from_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def blank_lines(tiler, root, ident):
    p, port = start(tiler, root, "--header-timeout", "3", "--max-connections", "20")
    lived = []
    lock = threading.Lock()

    def client():
        s = socket.create_connection(("127.0.0.1", port))
        started = time.monotonic()
        answer = b""
        try:
            while time.monotonic() - started < 30:
                s.sendall(b"\r\n")
                s.settimeout(0.5)
                try:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
                except socket.timeout:
                    pass
        except OSError:
            pass
        with lock:
            lived.append((time.monotonic() - started, answer.split(b"\r\n", 1)[0].decode()))
        s.close()

    threads = [threading.Thread(target=client) for _ in range(20)]
    for t in threads:
        t.start()
    time.sleep(1)
    refused = request(port, f"/images/{ident}")
    for t in threads:
        t.join()
    after = request(port, f"/images/{ident}")
    p.send_signal(signal.SIGTERM)
    p.wait()
    times = sorted(t for t, _ in lived)
    print(f"blank-lines: 20 clients lived {times[0]:.1f}–{times[-1]:.1f} s (30 s cap); answers {sorted(set(a for _, a in lived))}")
    print(f"  a 21st client while they lived: {refused[0]}; after: {after[0]}")


def starvation(tiler, root, ident, renders=40):
    p, port = start(tiler, root)
    tile = f"{root}/{ident}/5/3/4.png"
    request(port, f"/images/{ident}")  # manifest loaded
    results = []

    def render(i):
        results.append(request(port, render_path(ident, i)))

    threads = [threading.Thread(target=render, args=(i,)) for i in range(renders)]
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(1.5)
    drop_from_page_cache(tile)
    status, _, cold = request(port, f"/images/{ident}/tiles/5/3/4.png")
    _, _, warm = request(port, f"/images/{ident}/tiles/5/3/4.png")
    peak = rss_mb(p.pid)
    for t in threads:
        t.join()
    total = time.monotonic() - started
    p.send_signal(signal.SIGTERM)
    p.wait()
    statuses = {}
    for s, _, _ in results:
        statuses[s] = statuses.get(s, 0) + 1
    print(f"starvation: {renders} renders in flight; cold tile read {status} in {cold:.2f} s, then warm in {warm * 1000:.1f} ms;"
          f" renders {statuses} in {total:.1f} s; RSS {peak:.0f} MB")


def abandoned(tiler, root, ident, renders=40):
    p, port = start(tiler, root)
    request(port, f"/images/{ident}")
    before = cpu_seconds(p.pid)
    for i in range(renders):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET {render_path(ident, 1000 + i)} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.close()
    # Until the server has been idle for 2 s.
    last, idle_since, started = cpu_seconds(p.pid), time.monotonic(), time.monotonic()
    while time.monotonic() - idle_since < 2 and time.monotonic() - started < 300:
        time.sleep(0.25)
        now = cpu_seconds(p.pid)
        if now - last > 0.02:
            idle_since = time.monotonic()
        last = now
    spent = cpu_seconds(p.pid) - before
    busy = idle_since - started
    peak = rss_mb(p.pid)
    p.send_signal(signal.SIGTERM)
    p.wait()
    print(f"abandoned: {renders} renders whose clients left cost {spent:.1f} CPU-seconds over {busy:.1f} s; RSS after {peak:.0f} MB")


def sigterm(tiler, root, ident, renders=30):
    p, port = start(tiler, root)
    request(port, f"/images/{ident}")
    results = []
    lock = threading.Lock()

    def render(i):
        r = request(port, render_path(ident, 2000 + i))
        with lock:
            results.append(r)

    threads = [threading.Thread(target=render, args=(i,)) for i in range(renders)]
    for t in threads:
        t.start()
    time.sleep(1)
    started = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.wait()
    exited = time.monotonic() - started
    for t in threads:
        t.join()
    counts = {}
    for status, head, _ in results:
        key = f"{status}" + (" close" if head and "Connection: close" in head else "") if status else "no answer"
        counts[key] = counts.get(key, 0) + 1
    print(f"sigterm: {renders} renders in flight; exit {p.returncode} {exited:.1f} s after SIGTERM; answers {counts}")


def overlay(tiler, root, ident):
    """ROOT seen through overlayfs (as in a container; needs root): tiles in the page cache,
    tiler's own cache off. Counts the pool's threads after 2 rounds over every tile of a
    level: a read sent to the pool starts one."""
    import tempfile
    base = tempfile.mkdtemp(prefix="tiler-overlay-")
    for part in ("upper", "work", "merged"):
        os.mkdir(f"{base}/{part}")
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={root},upperdir={base}/upper,workdir={base}/work", f"{base}/merged"], check=True)
    try:
        p, port = start(tiler, f"{base}/merged", "--cache-mb", "0", "--threads", "1")
        paths = []
        for dirpath, _, files in os.walk(f"{root}/{ident}/5"):
            for f in files:
                paths.append(os.path.relpath(f"{dirpath}/{f}", f"{root}/{ident}/5"))
                open(f"{dirpath}/{f}", "rb").read()  # into the page cache
        started = time.monotonic()
        s = socket.create_connection(("127.0.0.1", port))
        statuses = {}
        for _ in range(2):
            for rel in paths:
                row, name = rel.split("/")
                s.sendall(f"GET /images/{ident}/tiles/5/{row}/{name} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                data = b""
                while b"\r\n\r\n" not in data:
                    data += s.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                while len(body) < length:
                    body += s.recv(1 << 20)
                code = int(head.split()[1])
                statuses[code] = statuses.get(code, 0) + 1
        seconds = time.monotonic() - started
        s.close()
        names = [open(f"/proc/{p.pid}/task/{t}/comm").read().strip() for t in os.listdir(f"/proc/{p.pid}/task")]
        pool = [n for n in names if n.startswith(("tiler-blocking", "tiler-read"))]
        print(f"  threads: {len(names)} {sorted(names)}")
        p.send_signal(signal.SIGTERM)
        p.wait()
        print(f"overlay: {sum(statuses.values())} cached tiles {statuses} in {seconds:.2f} s;"
              f" read-pool threads started: {len(pool)}")
    finally:
        subprocess.run(["umount", f"{base}/merged"])
        subprocess.run(["rm", "-rf", base])


def settings(tiler, root, ident):
    cases = [["--idle-timeout", "1e16"], ["--header-timeout", "inf"], ["--cache-mb", str(1 << 45)],
             ["--max-request-line", str(1 << 62)], ["--threads", "100000"]]
    env_cases = [{"TILER_IDLE_TIMEOUT": "1e16"}, {"TILER_CACHE_MB": str(1 << 45)}]
    def run(flags, env, label):
        try:
            r = subprocess.run([tiler, "serve", root, "--port", "0", *flags], capture_output=True, timeout=5,
                               env={**os.environ, **env})
            print(f"settings: {label}: exit {r.returncode}: {r.stderr.decode().strip().splitlines()[:1]}")
        except subprocess.TimeoutExpired:
            print(f"settings: {label}: accepted (still serving after 5 s)")

    for flags in cases:
        run(flags, {}, " ".join(flags))
    for env in env_cases:
        run([], env, str(env))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    tiler, root, ident, fault = sys.argv[1:]
    {"blank-lines": blank_lines, "starvation": starvation, "abandoned": abandoned, "sigterm": sigterm,
     "overlay": overlay, "settings": settings}[fault](tiler, root, ident)
