#!/usr/bin/env python3
"""Reproduces the route, store and renderer faults of issue #11 against a `tiler serve`
binary and prints what happened (statuses, times, RSS, logs). Used for
docs/reliability.md's rows; `scripts/bench-listing` measures item 11.

    scripts/server-faults.py TILER FAULT [WORK]

WORK (default bench-out/server-faults) holds the pyramids, made on first use with the
binary itself: `a`, the IIIF validator's 1000 x 1000 test image (Tests/Fixtures), `ext`, a
red image cut outside ROOT, and for `memory` and `rounds` `big`, 10000 x 10000 RGB noise
(the worst case for every encoder). FAULT is one of
  links     a tile linked out of ROOT, a level folder linked, a FIFO where a tile was:
            drawn images over each, then SIGTERM
  devzero   a tile linked to /dev/zero, drawn: the answer and the RSS (stops at 4 GB)
  damaged   an empty tile and one cut in half, served and drawn
  manifests a 2^40 x 1 pyramid of 16 px tiles, one of 1024 px tiles, and pct: with 24
            digits: the answer, and whether /healthz answers afterwards
  memory    /iiif/3/big/full/5000,5000/44/color.webp once, then 4 at once: peak RSS
  rounds    12 rotated 3000 x 3000 PNGs, 4 at once: peak RSS and RSS afterwards
  logs      a pyramid folder the server may not open (server run as nobody when root):
            its stderr after 5 requests and 3.5 s
Each run starts its own server on a free port and stops it. Flags after FAULT go to
`tiler serve` (e.g. --render-memory-mb 2048 for `memory`, which an old binary lacks).
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "Tests", "Fixtures", "67352ccc-d1b0-11e1-89ae-279075081939.png")


def start(tiler, root, *flags, launcher=()):
    p = subprocess.Popen([*launcher, tiler, "serve", root, "--port", "0", *flags], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    m = re.search(r":(\d+)/", p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit("no start-up line")
    return p, int(m.group(1))


def rss(p, field="VmRSS"):
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return 0


def get(port, path, timeout=10):
    t = time.time()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        return r.status, round((time.time() - t) * 1000, 1), r.getheader("Cache-Control"), body
    except Exception as e:  # a hang or a dead server is the answer
        return type(e).__name__, round((time.time() - t) * 1000, 1), None, b""


def show(path, answer):
    status, ms, cache, body = answer
    text = body[:150].decode(errors="replace") if status != 200 else f"{len(body)} bytes"
    print(f"  {path}: {status} in {ms} ms, Cache-Control {cache}: {text}")


def stop(p):
    t = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
        return f"exit {p.returncode} {time.time() - t:.2f} s after SIGTERM"
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return "still running 10 s after SIGTERM (killed)"


def prepare(tiler, work, big=False):
    pristine, outside = os.path.join(work, "pristine"), os.path.join(work, "outside")
    if not os.path.exists(os.path.join(pristine, "a", "pyramid.json")):
        subprocess.run([tiler, "cut", FIXTURE, "--output", pristine, "--name", "a", "--format", "png", "--quiet"], check=True)
        black, red = os.path.join(work, "black.v"), os.path.join(work, "red.png")
        subprocess.run(["vips", "black", black, "1000", "1000", "--bands", "3"], check=True)
        subprocess.run(["vips", "linear", black, red, "1 1 1", "255 0 0", "--uchar"], check=True)
        subprocess.run([tiler, "cut", red, "--output", outside, "--name", "ext", "--format", "png", "--quiet"], check=True)
    bigroot = os.path.join(work, "big")
    if big and not os.path.exists(os.path.join(bigroot, "big", "pyramid.json")):
        n, g, png = (os.path.join(work, f) for f in ("noise.v", "grey.v", "big.png"))
        subprocess.run(["vips", "gaussnoise", n, "10000", "10000", "--mean", "128", "--sigma", "40"], check=True)
        subprocess.run(["vips", "cast", n, g, "uchar"], check=True)
        subprocess.run(["vips", "bandjoin", f"{g} {g} {g}", png], check=True)
        subprocess.run([tiler, "cut", png, "--output", bigroot, "--name", "big", "--format", "png", "--quiet"], check=True)
        for f in (n, g, png):
            os.remove(f)
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(pristine, root, symlinks=True)
    return root, outside, bigroot


def concurrently(port, paths, n):
    answers = []
    lock = threading.Lock()

    def one(path):
        a = get(port, path, timeout=600)
        with lock:
            answers.append(a[0])
    for path in paths:
        threads = [threading.Thread(target=one, args=(path,)) for _ in range(n)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    return {s: answers.count(s) for s in set(answers)}


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    tiler, fault = os.path.abspath(sys.argv[1]), sys.argv[2]
    rest = sys.argv[3:]
    work = os.path.join(ROOT, "bench-out", "server-faults")
    if rest and not rest[0].startswith("-"):
        work, rest = os.path.abspath(rest[0]), rest[1:]
    flags = rest
    os.makedirs(work, exist_ok=True)
    root, outside, bigroot = prepare(tiler, work, big=fault in ("memory", "rounds"))
    a = os.path.join(root, "a")
    if fault == "links":
        os.remove(f"{a}/2/0/0.png")
        os.symlink(f"{outside}/ext/2/0/0.png", f"{a}/2/0/0.png")
        shutil.rmtree(f"{a}/1")
        os.symlink(f"{outside}/ext/1", f"{a}/1")
        os.remove(f"{a}/0/0/0.png")
        os.mkfifo(f"{a}/0/0/0.png")
        p, port = start(tiler, root, *flags)
        for path in ["/iiif/3/a/0,0,256,256/200,/0/default.png", "/iiif/3/a/full/500,/0/default.png",
                     "/iiif/3/a/full/100,/0/default.png"]:
            show(path, get(port, path))
        print("  " + stop(p))
    elif fault == "devzero":
        os.remove(f"{a}/2/3/3.png")
        os.symlink("/dev/zero", f"{a}/2/3/3.png")
        p, port = start(tiler, root, *flags)
        box = {}
        path = "/iiif/3/a/768,768,232,232/200,/0/default.png"
        t = threading.Thread(target=lambda: box.setdefault("answer", get(port, path, timeout=60)), daemon=True)
        t.start()
        began, peak = time.time(), 0
        while t.is_alive() and time.time() - began < 30 and peak < 4000:
            peak = max(peak, rss(p))
            time.sleep(0.1)
        if "answer" in box:
            show(path, box["answer"])
        print(f"  peak RSS {peak} MB, {time.time() - began:.1f} s")
        p.kill()
        p.wait()
    elif fault == "damaged":
        whole = open(f"{a}/2/1/1.png", "rb").read()
        open(f"{a}/2/1/1.png", "wb").write(whole[: len(whole) // 2])
        open(f"{a}/2/0/1.png", "wb").close()
        p, port = start(tiler, root, *flags)
        for path in ["/images/a/tiles/2/0/1.png", "/images/a/tiles/2/1/1.png", "/iiif/3/a/256,256,256,256/200,/0/default.png"]:
            show(path, get(port, path))
        stop(p)
        print("  stderr: " + p.stderr.read().strip().replace("\n", "\n          "))
    elif fault == "manifests":
        for pid, w, h, t in [("wide16", 1 << 40, 1, 16), ("wide", 1 << 40, 1, 1024)]:
            os.makedirs(f"{root}/{pid}")
            top = 0
            while t << top < max(w, h):
                top += 1
            levels = []
            for z in range(top + 1):
                f = 1 << (top - z)
                lw, lh = -(-w // f), -(-h // f)
                levels.append({"level": z, "width": lw, "height": lh, "columns": -(-lw // t), "rows": -(-lh // t), "downscale": f})
            json.dump({"formatVersion": 1, "id": pid, "width": w, "height": h, "tileSize": t, "format": "png", "maxLevel": top,
                       "levels": levels, "thumbnail": {"file": "thumbnail.png", "width": 256, "height": 1}},
                      open(f"{root}/{pid}/pyramid.json", "w"))
        p, port = start(tiler, root, *flags)
        for path in ["/iiif/3/wide16/full/max/0/default.png", "/iiif/3/wide/full/max/0/default.png",
                     "/iiif/3/a/full/^pct:999999999999999999999999/0/default.png"]:
            show(path, get(port, path))
            alive = get(port, "/healthz", timeout=3)[0]
            print(f"    then /healthz: {alive}")
            if alive != 200:
                p.wait()
                p, port = start(tiler, root, *flags)
        stop(p)
    elif fault in ("memory", "rounds"):
        paths = (["/iiif/3/big/full/5000,5000/44/color.webp"] if fault == "memory" else
                 [f"/iiif/3/big/full/3000,3000/{d}/default.png" for d in (10, 20, 30)])
        for n in ([1, 4] if fault == "memory" else [4]):
            p, port = start(tiler, bigroot, *flags)
            began, base = time.time(), rss(p)
            statuses = concurrently(port, paths, n)
            peak, after = rss(p, "VmHWM"), rss(p)
            print(f"  {n} at once: {statuses} in {time.time() - began:.1f} s; RSS {base} MB at start, "
                  f"peak {peak} MB, {after} MB afterwards")
            stop(p)
    elif fault == "logs":
        os.chmod(root, 0o755)
        for dirpath, dirs, files in os.walk(root):
            for d in dirs:
                os.chmod(os.path.join(dirpath, d), 0o755)
            for f in files:
                os.chmod(os.path.join(dirpath, f), 0o644)
        shutil.copytree(a, f"{root}/locked")
        os.chmod(f"{root}/locked", 0)
        launcher = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups") if os.geteuid() == 0 else ()
        p, port = start(tiler, root, *flags, launcher=launcher)
        print("  /images/locked x5:", [get(port, "/images/locked")[0] for _ in range(5)])
        time.sleep(3.5)  # three scans at the default interval, and the requests' own checks
        stop(p)
        os.chmod(f"{root}/locked", 0o755)
        print("  stderr: " + (p.stderr.read().strip().replace("\n", "\n          ") or "(nothing)"))
    else:
        raise SystemExit(__doc__)


main()
