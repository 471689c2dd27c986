#!/usr/bin/env python3
"""tiler's benchmark suite: tiler against vips dzsave, nginx and iipsrv, in one run.

Run it through scripts/bench, which installs the peers first. Sections:

  cut      tiler cut vs vips dzsave on a 20000x20000 noise JPEG, PNG, JPEG Q85 and WebP
           Q80 tiles: dzsave of the newest libvips (8.18 or newer: pyvips-binary from
           PyPI, in a virtual environment under OUT) and of Debian's libvips 8.14 (PNG
           at its default and at compression=1, JPEG); wall, CPU, peak RSS, bytes, files.
  floor    each piece of that cut alone (Bench/'s cut-floor): the JPEG decode, the 2x2
           shrinks, the encoding of every tile per format (and with libspng and
           libdeflate), the creation of every file.
  scaling  tiler cut vs both dzsaves (PNG) on squares of 2k..40k px and on a tall strip
           of fixed width, drawn into docs/scaling.png; at 40k also JPEG and WebP
           against dzsave 8.18.
  serve    wrk, uniformly random tiles, against tiler serve, nginx (static files),
           the floor (scripts/floor-server.c: tiles in memory, one read and one write
           per request, the least any server does) and iipsrv (FastCGI behind nginx,
           DeepZoom on a pyramidal TIFF); tiler's visible endpoint; time from start to
           the first answered request; each server's and wrk's CPU per response.
  profile  perf (cpu-clock sampling) of tiler cut and dzsave on a 4000x4000 image, and
           of tiler serve under wrk after its measured runs; skipped without perf.
  archive  tiler cut --archive (one PMTiles file) vs the folder cut of the same image, PNG
           and JPEG Q85 tiles, alternating; then tiler pack and unpack of the results.
  iiif     IIIF drawings (regions and sizes that are no stored tile) against iipsrv, at
           equal resources: an 8000x6000 image, tiler's JPEG Q90 pyramid against a
           pyramidal JPEG Q90 TIFF, each server pinned to one core and the client to
           another; median latency over 120 distinct regions and 120 distinct sizes,
           then 3,000 distinct random ones at 8 connections (req/s, p99).
  serve-archives
           the serve section's archive legs: random tiles of a JPEG Q85 pyramid from its
           folder and from its archive without the response cache, and from the folder and
           from the archive in the local S3 server (moto) with a warm cache, alternating;
           cold-cache latency of a fresh server reading from S3.

`--server-cpus LIST` and `--client-cpus LIST` (taskset CPU lists) run the servers under
test and wrk on cores of their own, on a machine with cores to spare; by default they
share every core, and on 2 cores wrk's own CPU caps what any server can show.

Tools are alternated within each round (tiler first in even rounds, last in odd ones)
so that a drift in the machine's load hits both. No pyramid is deleted before the end
of the run (see Tools.discard: on this machine's journal-less ext4, deleting thousands
of files makes creating files nearby slow for minutes). Every tiler leg that fails is
reported as an error and its targets as MISS; the script then exits 1.
"""

import argparse
import datetime
import http.client
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
NEWEST_VIPS = (8, 18)


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


class Tools:
    def __init__(self, args, out):
        self.args, self.out = args, out
        self.tiler = None
        self.tiler_error = None
        self.newest = None      # the virtual environment's python, once checked
        self.newest_info = {}
        self.legs = 0
        # Every pyramid a leg wrote is moved here and only deleted at the end of the run.
        self.trash = os.path.join(out, "trash")

    # ---- the newest libvips
    def setup_newest_vips(self):
        """Makes OUT/pyvips-venv with pyvips and pyvips-binary from PyPI and checks that
        it loads the wheel's libvips, 8.18 or newer; exits the bench loudly otherwise."""
        venv = os.path.join(self.out, "pyvips-venv")
        py = os.path.join(venv, "bin", "python")
        if not os.path.exists(py):
            log(f"making {os.path.relpath(venv, ROOT)} for the newest libvips")
            run([sys.executable, "-m", "venv", venv], capture_output=True)
        log("pip install --upgrade pyvips pyvips-binary")
        p = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--upgrade", "pyvips",
                 "pyvips-binary"], check=False, capture_output=True)
        if p.returncode == 0:
            # With libvips-dev on the machine, installing pyvips builds its own _libvips
            # against the system's libvips (8.14) over the wheel's; put the wheel's back.
            p = run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--force-reinstall",
                     "--no-deps", "pyvips-binary"], check=False, capture_output=True)
        if p.returncode != 0:
            log("pip failed (offline?): " + (p.stderr or p.stdout).strip()[-300:] + "; checking what is installed")
        probe = run([py, "-c", NEWEST_PROBE], check=False, capture_output=True)
        try:
            info = json.loads(probe.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            sys.exit(f"bench: the pyvips environment {venv} does not load: {probe.stderr.strip()[-500:]}")
        version = tuple(info["version"])
        wheel = [l for l in info["libvips"] if "pyvips_binary.libs" in l]
        if version[:2] < NEWEST_VIPS or not wheel or len(info["libvips"]) != 1:
            sys.exit(f"bench: the pyvips environment {venv} loads libvips {'.'.join(map(str, version))} from "
                     f"{info['libvips']}; dzsave 8.18 legs need pyvips-binary's libvips, "
                     f"{NEWEST_VIPS[0]}.{NEWEST_VIPS[1]} or newer. Delete {venv} and run again.")
        self.newest, self.newest_info = py, info
        log(f"newest libvips: {'.'.join(map(str, version))} (pyvips {info['pyvips']}, pyvips-binary "
            f"{info['pyvips_binary']}), {wheel[0]}")
        # What the interpreter and the library cost before dzsave does anything.
        self.newest_info["baseline"] = timed([py, "-c", "import pyvips; pyvips.Image.black(1, 1).avg()"], self.out)

    # ---- tiler build
    def build_tiler(self):
        if self.args.tiler:
            self.tiler = self.args.tiler
        else:
            log("building tiler (swift build -c release)")
            p = run(["swift", "build", "-c", "release", "--product", "tiler"], check=False, cwd=ROOT,
                    capture_output=True)
            if p.returncode != 0:
                self.tiler_error = "swift build failed: " + (p.stderr or p.stdout).strip()[-300:]
                log("TILER BUILD FAILED: " + self.tiler_error)
                return
            binpath = out_of(["swift", "build", "-c", "release", "--show-bin-path"])
            self.tiler = os.path.join(binpath, "tiler")
        # A smoke cut: fails loudly while `tiler cut` is a stub.
        probe = os.path.join(self.out, "probe")
        clear(probe)
        os.makedirs(probe)
        img = os.path.join(probe, "probe.jpg")
        run(["vips", "black", img + "[Q=90]", "600", "400", "--bands", "3"], capture_output=True)
        p = run([self.tiler, "cut", img, "--output", os.path.join(probe, "t"), "--name", "p", "--quiet"],
                check=False, capture_output=True)
        if p.returncode != 0 or not os.path.exists(os.path.join(probe, "t", "p", "pyramid.json")):
            lines = [l.strip() for l in p.stderr.splitlines() if l.strip()] or ["no pyramid.json written"]
            msg = next((l for l in lines if "rror" in l), lines[0])
            self.tiler_error = f"tiler cut does not work: {msg}"
            log("TILER NOT USABLE: " + self.tiler_error)
        clear(probe)

    # ---- images
    def image(self, w, h):
        """A cached noise JPEG of w x h (Q90, 3 bands)."""
        gen = os.path.join(ROOT, "scripts", "make-sample-image")
        tag = "msi" if os.access(gen, os.X_OK) else "perlin"
        d = os.path.join(self.out, "images")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"noise-{tag}-{w}x{h}.jpg")
        if os.path.exists(path):
            return path
        log(f"making {w}x{h} noise JPEG ({tag})")
        tmp = path + ".tmp.jpg"
        t0 = time.time()
        if tag == "msi":
            run([gen, tmp, str(w), str(h)], capture_output=True)
        else:
            # Three bands of Perlin noise at different cell sizes, JPEG Q90: compresses
            # about as well as a detailed photograph (~1.1 bytes/pixel as dzsave PNG tiles).
            with tempfile.TemporaryDirectory(dir=d) as td:
                bands = []
                for seed, cell in ((1, 64), (2, 256), (3, 1024)):
                    b = os.path.join(td, f"b{seed}.v")
                    run(["vips", "perlin", b, str(w), str(h), "--uchar", "--cell-size", str(cell),
                         "--seed", str(seed)], capture_output=True)
                    bands.append(b)
                run(["vips", "bandjoin", " ".join(bands), tmp + "[Q=90,strip]"], capture_output=True)
        os.rename(tmp, path)
        log(f"  made in {time.time() - t0:.1f} s")
        return path

    def pyramidal_tiff(self, src, compression, quality=85):
        path = src[:-4] + f"-pyr-{compression}" + (f"-q{quality}" if compression == "jpeg" and quality != 85 else "") + ".tif"
        if not os.path.exists(path):
            log(f"making pyramidal TIFF ({compression}) for iipsrv")
            opts = ["--tile", "--pyramid", "--compression", compression,
                    "--tile-width", "256", "--tile-height", "256"]
            if compression == "jpeg":
                opts += ["--Q", str(quality)]
            run(["vips", "tiffsave", src, path + ".tmp.tif"] + opts, capture_output=True)
            os.rename(path + ".tmp.tif", path)
        return path

    # ---- cutting
    def cut_cmd(self, tool, fmt, src, dest, name=IMAGE_ID):
        if tool == "tiler":
            if self.tiler_error:
                raise TilerError(self.tiler_error)
            cmd = [self.tiler, "cut", src, "--output", dest, "--name", name, "--quiet", "--force"]
            cmd += ["--archive"] if fmt.endswith(ARCHIVE) else []
            return cmd + {"png": ["--format", "png"], "jpeg": ["--format", "jpeg", "--quality", str(JPEG_Q)],
                          "webp": ["--format", "webp", "--quality", str(WEBP_Q)]}[fmt.split("-")[0]]
        suffix = {"png": ".png", "png-c1": ".png[compression=1]", "jpeg": f".jpg[Q={JPEG_Q}]",
                  "webp": f".webp[Q={WEBP_Q}]"}[fmt.removesuffix(ARCHIVE)]
        if tool == "dzsave818":
            return [self.newest, os.path.join(ROOT, "scripts", "pyvips-dzsave"), src, os.path.join(dest, name), suffix] + \
                (["--zip"] if fmt.endswith(ARCHIVE) else [])
        return ["vips", "dzsave", src, os.path.join(dest, name), "--layout", "google",
                "--tile-size", "256", "--overlap", "0", "--suffix", suffix]

    def discard(self, path):
        """Moves a pyramid out of the way, to be deleted at the end of the run.

        This machine's root file system is ext4 without a journal. There, a new inode is
        never one that was freed recently (ext4's recently_deleted(): 60 s, 360 s while
        its inode table block is dirty), and each new file scans past all of them: after
        a pyramid of 8 380 files is deleted, writing the next one nearby costs seconds of
        kernel time (measured: 0.2 s to create 8 380 files of 11 KB in a quiet place,
        3 to 12 s right after deleting the same number next to it, even 6 minutes
        later). Deleting each leg's output before the next leg would hand that cost to
        whichever tool comes next, so nothing is deleted until every leg has run."""
        if os.path.exists(path):
            os.makedirs(self.trash, exist_ok=True)
            os.rename(path, os.path.join(self.trash, f"{len(os.listdir(self.trash))}-{os.path.basename(path)}"))

    def empty_trash(self):
        if os.path.exists(self.trash):
            log("deleting this run's pyramids")
            shutil.rmtree(self.trash)

    def measure_cut(self, tool, fmt, src, w, h, keep=None, name=IMAGE_ID):
        self.legs += 1
        dest = os.path.join(self.out, "legs", f"{self.legs}-{tool}-{fmt}")
        self.discard(dest)
        os.makedirs(dest)
        run(["sync"])
        try:
            r = timed(self.cut_cmd(tool, fmt, src, dest, name), self.out)
        except TilerError as e:
            self.discard(dest)
            if tool != "tiler":
                raise
            log(f"  {tool:9} {fmt:6} {w}x{h}: ERROR {e}")
            return {"error": str(e)}
        r["bytes"], r["files"] = tree_size(dest)
        r["tiles"] = (self.check_archive(tool, fmt, dest, name, w, h) if fmt.endswith(ARCHIVE)
                      else self.check_pyramid(tool, fmt, os.path.join(dest, name), w, h))
        if fmt == "jpeg":
            r["jpeg_tables"] = jpeg_tables(tile_path(os.path.join(dest, name), w, h, fmt))
        log(f"  {tool:9} {fmt:6} {w}x{h}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, "
            f"{r['rss_mb']:.0f} MB RSS, {r['bytes'] / 1e6:.0f} MB in {r['files']} files")
        if keep and not fmt.endswith(ARCHIVE):   # move the pyramid folder itself to `keep`
            self.discard(keep)
            os.makedirs(os.path.dirname(keep), exist_ok=True)
            os.rename(os.path.join(dest, name), keep)
        self.discard(dest)
        return r

    def check_archive(self, tool, fmt, dest, name, w, h):
        """An archive leg must leave one file holding every tile: tiler's PMTiles header
        counts them (addressed tiles, bytes 72-79), dzsave's zip lists them."""
        files = os.listdir(dest)
        want = tile_count(w, h)
        if tool == "tiler":
            if files != [name + ".pmtiles"]:
                raise TilerError(f"cut --archive left {files} in {dest}")
            with open(os.path.join(dest, files[0]), "rb") as f:
                head = f.read(127)
            n = int.from_bytes(head[72:80], "little") if head[:7] == b"PMTiles" else -1
        else:
            import zipfile
            if files != [name + ".zip"]:
                raise TilerError(f"dzsave container=zip left {files} in {dest}")
            ext = EXTENSIONS[fmt.removesuffix(ARCHIVE)]
            with zipfile.ZipFile(os.path.join(dest, files[0])) as z:
                n = sum(1 for x in z.namelist() if x.endswith(ext) and os.path.basename(x)[0].isdigit())
        if n != want:
            raise TilerError(f"{tool} archived {n} tiles, the pyramid has {want}")
        return n

    def check_pyramid(self, tool, fmt, d, w, h):
        """Every tool must have written every tile of the pyramid; a deepest-level tile is
        decoded to prove it is an image of the right size."""
        ext = EXTENSIONS[fmt]
        n = 0
        for dd, _, names in os.walk(d):
            n += sum(1 for x in names if x.endswith(ext) and x[0].isdigit())
        want = tile_count(w, h)
        if n != want:
            raise TilerError(f"{tool} wrote {n} tiles, the pyramid has {want}")
        top = len(levels_for(w, h)) - 1
        hdr = out_of(["vipsheader", tile_path(d, w, h, fmt)])
        if "256x256" not in hdr:
            raise TilerError(f"{tool}: tile {top}/0/0{ext} is not a 256x256 image: {hdr}")
        if tool == "tiler" and not os.path.exists(os.path.join(d, "pyramid.json")):
            raise TilerError("tiler wrote no pyramid.json")
        return n


NEWEST_PROBE = """
import json, importlib.metadata as m, pyvips
pyvips.Image.black(1, 1).avg()
maps = open("/proc/self/maps").read().splitlines()
libs = sorted({l.split()[-1] for l in maps if l.rsplit("/", 1)[-1].startswith("libvips") and "/" in l})
print(json.dumps({"version": [pyvips.version(i) for i in range(3)], "pyvips": m.version("pyvips"),
                  "pyvips_binary": m.version("pyvips-binary"), "libvips": libs}))
"""


def tile_path(d, w, h, fmt):
    """The first full-resolution tile: LEVEL/0/0.EXT of the deepest level."""
    return os.path.join(d, str(len(levels_for(w, h)) - 1), "0", "0" + EXTENSIONS[fmt])


def jpeg_tables(path):
    """The quantisation tables (DQT) and each component's sampling factors (SOF) of a
    JPEG file: equal for two encoders means equal quality settings (same Q, same
    tables, same chroma subsampling), whatever else differs."""
    with open(path, "rb") as f:
        b = f.read()
    tables, sampling, i = [], [], 2
    while i + 4 <= len(b) and b[i] == 0xFF:
        marker, size = b[i + 1], int.from_bytes(b[i + 2:i + 4], "big")
        if marker == 0xDB:
            tables.append(b[i + 4:i + 2 + size].hex())
        elif marker in (0xC0, 0xC1, 0xC2):
            n = b[i + 9]
            sampling = [f"{b[i + 11 + 3 * k] >> 4}x{b[i + 11 + 3 * k] & 15}" for k in range(n)]
        elif marker == 0xDA:
            break
        i += 2 + size
    return {"dqt": tables, "sampling": sampling}


def median_or_none(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def median_of(rounds, key):
    vals = [r[key] for r in rounds if "error" not in r]
    return statistics.median(vals) if vals else None


def summarise(rounds):
    ok = [r for r in rounds if "error" not in r]
    if not ok:
        return {"error": rounds[0]["error"] if rounds else "not run", "rounds": rounds}
    s = {k: median_of(ok, k) for k in ("wall", "cpu", "user", "sys", "rss_mb")}
    s.update({"bytes": ok[0]["bytes"], "files": ok[0]["files"], "tiles": ok[0]["tiles"], "rounds": rounds})
    if "jpeg_tables" in ok[0]:
        s["jpeg_tables"] = ok[0]["jpeg_tables"]
    return s


# --------------------------------------------------------------------------- sections

CUT_LEGS = [("tiler", "png"), ("dzsave818", "png"), ("dzsave", "png"), ("dzsave", "png-c1"),
            ("tiler", "jpeg"), ("dzsave818", "jpeg"), ("dzsave", "jpeg"),
            ("tiler", "webp"), ("dzsave818", "webp"),
            ("tiler", "png-archive"), ("dzsave818", "png-archive"), ("tiler", "jpeg-archive"),
            ("dzsave818", "jpeg-archive"), ("tiler", "webp-archive"), ("dzsave818", "webp-archive")]


def section_cut(t, res, args):
    side = args.cut_side
    src = t.image(side, side)
    legs = args.cut_legs
    rounds = {f"{a}/{b}": [] for a, b in legs}
    t.discard(os.path.join(t.out, "pyramids"))   # only this run's pyramids may be served
    for r in range(args.cut_rounds):
        order = legs if r % 2 == 0 else list(reversed(legs))
        log(f"cut round {r + 1}/{args.cut_rounds} ({side}x{side})")
        for tool, fmt in order:
            name = f"{IMAGE_ID}-{fmt.split('-')[0]}"
            # The last round's tiler PNG and JPEG pyramids are kept for the serve section.
            keep = (os.path.join(t.out, "pyramids", name)
                    if tool == "tiler" and fmt in ("png", "jpeg") and r == args.cut_rounds - 1 else None)
            rounds[f"{tool}/{fmt}"].append(t.measure_cut(tool, fmt, src, side, side, keep=keep, name=name))
    res["cut"] = {"image": f"{side}x{side}", "input_bytes": os.path.getsize(src),
                  "legs": {k: summarise(v) for k, v in rounds.items()}}
    # Larger squares (--cut-big): one round of the legs in --cut-big-legs, in the same run.
    res["cut"]["big"] = []
    for big in args.cut_big:
        src = t.image(big, big)
        legs = [tuple(x.split("/")) for x in args.cut_big_legs]
        log(f"cut {big}x{big}, one round: {', '.join(args.cut_big_legs)}")
        if getattr(args, "save", None):
            args.save()
        got = {f"{tool}/{fmt}": summarise([t.measure_cut(tool, fmt, src, big, big, name=f"{IMAGE_ID}-{fmt.split('-')[0]}")])
               for tool, fmt in legs}
        res["cut"]["big"].append({"image": f"{big}x{big}", "input_bytes": os.path.getsize(src), "legs": got})


def section_archive(t, res, args):
    """cut --archive against the folder cut: same image, same tiles, alternating."""
    if t.tiler_error:
        raise TilerError(t.tiler_error)
    side = args.cut_side
    src = t.image(side, side)
    legs = [("folder", "png"), ("archive", "png"), ("folder", "jpeg"), ("archive", "jpeg")]
    rounds = {f"{a}/{b}": [] for a, b in legs}
    work = os.path.join(t.out, "archive-cut")
    for r in range(args.cut_rounds):
        order = legs if r % 2 == 0 else list(reversed(legs))
        log(f"archive round {r + 1}/{args.cut_rounds} ({side}x{side})")
        for layout, fmt in order:
            dest = os.path.join(work, f"{r}-{layout}-{fmt}")
            t.discard(dest)
            os.makedirs(dest)
            run(["sync"])
            cmd = t.cut_cmd("tiler", fmt, src, dest) + (["--archive"] if layout == "archive" else [])
            m = timed(cmd, t.out)
            m["bytes"], m["files"] = tree_size(dest)
            if layout == "archive" and m["files"] != 1:
                raise TilerError(f"cut --archive left {m['files']} files in {dest}")
            log(f"  {layout:7} {fmt:4}: {m['wall']:.2f} s wall, {m['cpu']:.2f} s CPU, {m['rss_mb']:.0f} MB RSS, "
                f"{m['bytes'] / 1e6:.1f} MB in {m['files']} files")
            rounds[f"{layout}/{fmt}"].append(m)
    out = {"image": f"{side}x{side}", "legs": {}}
    for k, v in rounds.items():
        out["legs"][k] = {key: statistics.median(x[key] for x in v) for key in ("wall", "cpu", "rss_mb")}
        out["legs"][k].update({"bytes": v[-1]["bytes"], "files": v[-1]["files"], "rounds": v})
    # pack and unpack of the last round's PNG pyramid, each into a fresh root.
    last = args.cut_rounds - 1
    folder = os.path.join(work, f"{last}-folder-png", IMAGE_ID)
    m = timed([t.tiler, "pack", folder, "--force"], t.out)
    out["pack"] = m
    unpack_root = os.path.join(work, "unpack")
    t.discard(unpack_root)
    os.makedirs(unpack_root)
    shutil.copy(os.path.join(work, f"{last}-archive-png", IMAGE_ID + ".pmtiles"), unpack_root)
    run(["sync"])
    out["unpack"] = timed([t.tiler, "unpack", os.path.join(unpack_root, IMAGE_ID + ".pmtiles")], t.out)
    log(f"  pack {out['pack']['wall']:.2f} s, unpack {out['unpack']['wall']:.2f} s")
    t.discard(work)
    res["archive"] = out


def section_floor(t, res, args):
    """Each piece of a cut alone, on the cut section's image: Bench/'s cut-floor decodes
    it (libjpeg, one thread), makes every level with tiler's 2×2 shrink (one thread),
    encodes every tile with each encoder (all cores) and writes every file (all cores)."""
    side = args.cut_side
    src = t.image(side, side)
    log("floor: building Bench/ (cut-floor)")
    build = ["swift", "build", "-c", "release", "--package-path", "Bench", "--scratch-path", "Bench/.build"]
    p = run(build + ["--product", "cut-floor"], check=False, cwd=ROOT, capture_output=True)
    if p.returncode != 0:
        raise TilerError("cut-floor does not build: " + (p.stderr or p.stdout).strip()[-300:])
    binary = os.path.join(run(build + ["--show-bin-path"], cwd=ROOT, capture_output=True).stdout.strip(), "cut-floor")
    work = os.path.join(t.out, "floor")
    t.discard(work)
    run(["sync"])
    tf = os.path.join(t.out, ".time-floor")
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tf, binary, src, work], text=True, capture_output=True)
    if p.returncode != 0:
        raise TilerError("cut-floor failed: " + p.stderr.strip()[-300:])
    floor = json.loads(p.stdout)
    with open(tf) as f:
        floor["rss_mb"] = round(int(f.read().split()[-1]) / 1024, 1)
    os.unlink(tf)
    floor["image"]["name"] = f"{side}x{side}"
    t.discard(work)
    for name, x in floor["encode"].items():
        log(f"  encode {name:17}: {x['wall']:6.2f} s wall, {x['cpu']:6.2f} s CPU, {x['bytes'] / 1e6:6.0f} MB")
    log(f"  decode {floor['decode']['wall']:.2f} s, shrink {floor['shrink']['wall']:.2f} s, files png "
        f"{floor['files']['png']['wall']:.2f} s")
    res["floor"] = floor


def floor_estimate(floor, fmt, cores):
    """The shortest a cut to `fmt` tiles can take here: all its pieces' CPU time spread
    over every core, but never less than the decode, which runs on one."""
    pieces = [floor["decode"], floor["shrink"], floor["encode"][fmt], floor["files"][fmt]]
    return max(floor["decode"]["cpu"], sum(p["cpu"] for p in pieces) / cores)


SCALING_TOOLS = ("tiler", "dzsave818", "dzsave")
# At the largest square the JPEG and WebP legs are timed too, against dzsave 8.18.
BIG_FORMAT_LEGS = [("tiler", "jpeg"), ("dzsave818", "jpeg"), ("dzsave818", "webp"), ("tiler", "webp")]


def section_scaling(t, res, args):
    squares = args.scaling_sides
    strip_w, strip_hs = args.strip_width, args.strip_heights
    pts = [("square", s, s) for s in squares if s <= 20000] + [("strip", strip_w, h) for h in strip_hs]
    big = [s for s in squares if s > 20000]
    out = {"square": [], "strip": [], "skipped": []}
    res["scaling"] = out

    def point(kind, w, h, formats=False):
        row = {"width": w, "height": h, "mpx": round(w * h / 1e6, 2)}
        cut = res.get("cut", {})
        if kind == "square" and cut.get("image") == f"{w}x{h}" and "legs" in cut:
            # The same commands on the same image were just timed by the cut section:
            # its first round is this point (saves the longest cuts at 20k).
            for tool in SCALING_TOOLS:
                row[tool] = dict(cut["legs"][f"{tool}/png"]["rounds"][0], reused="cut round 1")
            log(f"  {w}x{h}: the cut section's first round")
        else:
            src = t.image(w, h)
            order = list(SCALING_TOOLS) if len(out[kind]) % 2 == 0 else list(reversed(SCALING_TOOLS))
            for tool in order:
                row[tool] = t.measure_cut(tool, "png", src, w, h)
            if formats:
                row["formats"] = {f"{tool}/{fmt}": t.measure_cut(tool, fmt, src, w, h) for tool, fmt in BIG_FORMAT_LEGS}
        out[kind].append(row)
        if kind == "square":
            out["square"].sort(key=lambda p: p["mpx"])
        plot_scaling(out, args.plot)
        if getattr(args, "save", None):
            args.save()
        return row

    log("scaling")
    for kind, w, h in pts:
        point(kind, w, h)
    for s in big:
        cut = res.get("cut", {}).get("legs", {})
        ref = next((p for p in out["square"] if p["width"] == 20000), None) or (out["square"][-1] if out["square"] else None)
        if ref:
            k = (s * s) / (ref["width"] * ref["height"])
            # Every leg's 20k figures, or the PNG leg's where a format was not measured.
            legs = [ref[x] for x in SCALING_TOOLS] + [cut.get(f"{a}/{b}") or ref[a] for a, b in BIG_FORMAT_LEGS]
            secs = sum(l.get("wall", ref["dzsave"].get("wall", 0)) for l in legs) * k * 1.1
            # Nothing is deleted before the end of the run: all the point's pyramids at once.
            disk = sum(l.get("bytes", 0) for l in legs) * k
            have = free_disk(t.out)
            log(f"  {s}x{s}: estimated {secs:.0f} s for its {len(legs)} cuts and {disk / 1e9:.1f} GB of pyramids; "
                f"{have / 1e9:.0f} GB free")
            if disk * 1.2 + 5e9 > have:
                out["skipped"].append({"side": s, "reason": f"disk: needs ~{disk / 1e9:.1f} GB, {have / 1e9:.0f} GB free"})
                continue
            if secs > args.max_point_seconds:
                out["skipped"].append({"side": s, "reason": f"time: estimated {secs:.0f} s > --max-point-seconds {args.max_point_seconds}"})
                continue
        point("square", s, s, formats=True)
    plot_scaling(out, args.plot)
    log(f"plot written to {os.path.relpath(args.plot, ROOT)}")


def plot_scaling(sc, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6), dpi=90)
    styles = {"tiler": dict(color="#1f77b4", marker="o"), "dzsave": dict(color="#d62728", marker="s"),
              "dzsave818": dict(color="#ff7f0e", marker="^")}
    for tool in SCALING_TOOLS:
        label = TOOLS[tool]
        pts = [p for p in sc["square"] if tool in p and "error" not in p[tool]]
        if pts:
            x = [p["mpx"] for p in pts]
            ax[0].plot(x, [p[tool]["wall"] for p in pts], label=f"{label} wall", **styles[tool])
            ax[0].plot(x, [p[tool]["cpu"] for p in pts], label=f"{label} CPU", linestyle="--", alpha=.6,
                       **styles[tool])
            ax[1].plot(x, [p[tool]["rss_mb"] for p in pts], label=label, **styles[tool])
        strip = [p for p in sc["strip"] if tool in p and "error" not in p[tool]]
        if strip:
            ax[2].plot([p["height"] / 1000 for p in strip], [p[tool]["rss_mb"] for p in strip],
                       label=label, **styles[tool])
    ax[0].set(title="cut time, PNG tiles (squares)", xlabel="megapixels", ylabel="seconds")
    ax[1].set(title="peak RSS (squares)", xlabel="megapixels", ylabel="MB")
    w = sc["strip"][0]["width"] if sc["strip"] else 0
    ax[2].set(title=f"peak RSS, width {w} px", xlabel="height (thousand px)", ylabel="MB")
    for a in ax:
        a.grid(alpha=.3)
        a.set_ylim(bottom=0)
        a.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


# ---- serving

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


def lua_tiles(path, levels, url_fmt, url_args, level_offset=0, seq=65536, pause_ms=None):
    """A wrk script requesting tiles uniformly at random over all tiles of the pyramid.
    Each thread draws its own sequence of `seq` random tiles in init() (so the per-request
    cost in wrk is a table lookup) and cycles through it; done() prints JSON. With
    `pause_ms`, each connection waits a random time (exponential, that mean) between an
    answer and its next request: an offered rate of about connections × 1000 / pause_ms
    requests a second, for latency at a given load rather than at saturation."""
    cum, acc = [], 0
    for l in levels:
        acc += l["columns"] * l["rows"]
        cum.append(f'{{{l["level"] + level_offset},{l["columns"]},{acc}}}')
    body = f"""
local levels = {{{",".join(cum)}}}
local total = {acc}
local fmt = "{url_fmt}"
local reqs, n, i = {{}}, {seq}, 0
local counter = 0
function setup(thread) counter = counter + 1; thread:set("tid", counter) end
function init(args)
  math.randomseed(tid * 7919 + os.time())
  for k = 1, n do
    local t = math.random(0, total - 1)
    local prev = 0
    for _, l in ipairs(levels) do
      if t < l[3] then
        local j = t - prev
        local row, col = math.floor(j / l[2]), j % l[2]
        reqs[k] = wrk.format("GET", string.format(fmt, {url_args}))
        break
      end
      prev = l[3]
    end
  end
end
function request() i = i % n + 1; return reqs[i] end
""" + ("" if pause_ms is None else f"""
function delay() return math.floor(-{pause_ms} * math.log(1 - math.random())) end
""") + LUA_DONE
    with open(path, "w") as f:
        f.write(body)


LUA_DONE = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.mean, latency.max))
end
"""


def lua_visible(path, image_id, w, h, max_level, seq=16384):
    """Random viewports: a 1920x1080 display at a random zoom, log-uniform between the
    image's width filling the display and 1:1, centred anywhere on the image, margin=1."""
    body = f"""
local W, H, L = {w}, {h}, {max_level}
local reqs, n, i = {{}}, {seq}, 0
local counter = 0
function setup(thread) counter = counter + 1; thread:set("tid", counter) end
function init(args)
  math.randomseed(tid * 104729 + os.time())
  for k = 1, n do
    local s = math.min(1, 1920 / W) ^ math.random()
    local vw, vh = 1920 / s, 1080 / s
    local x = math.random() * W - vw / 2
    local y = math.random() * H - vh / 2
    reqs[k] = wrk.format("GET", string.format(
      "/images/{image_id}/visible?x=%.1f&y=%.1f&width=%.1f&height=%.1f&scale=%.6f&margin=1", x, y, vw, vh, s))
  end
end
function request() i = i % n + 1; return reqs[i] end
""" + LUA_DONE
    with open(path, "w") as f:
        f.write(body)


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


NGINX_CONF = """
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  open_file_cache max=100000 inactive=60s;
  open_file_cache_valid 60s;
  keepalive_requests 100000000;
  keepalive_timeout 75s;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  types {{ image/png png; image/jpeg jpg; }}
  server {{
    listen 127.0.0.1:{port};
{locations}
  }}
  # A new FastCGI connection per request, as iipsrv's own nginx example has it: each
  # iipsrv process serves one connection at a time, so with fastcgi_keep_conn and an
  # upstream keepalive pool, a request nginx sends on a pooled connection to a process
  # busy with another connection waits for fastcgi_read_timeout (60 s), then fails
  # (seen: 31 of 8,380 requests, 502 after 60 s, in every each-tile-once pass).
  upstream iipsrv {{ {upstreams} }}
  server {{
    listen 127.0.0.1:{iip_port};
    location /fcgi-bin/iipsrv.fcgi {{
      include /etc/nginx/fastcgi_params;
      fastcgi_pass iipsrv;
    }}
  }}
}}
"""

SERVE_FORMATS = (("png", ".png"), ("jpeg", ".jpg"))


def http_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, r.getheader("Content-Type"), body


def start_floor_server(sdir, root, ports, procs, out):
    """Compiles scripts/floor-server.c with cc and starts it on `root` (one event loop per
    core). Returns False, with the reason in out["floor_error"], when it cannot."""
    exe = os.path.join(sdir, "floor-server")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        out["floor_error"] = "no C compiler (cc) to build scripts/floor-server.c"
        log("  " + out["floor_error"])
        return False
    p = run([cc, "-O2", "-Wall", "-Wextra", "-pthread", "-o", exe, os.path.join(ROOT, "scripts", "floor-server.c")],
            capture_output=True, check=False)
    if p.returncode != 0:
        out["floor_error"] = "scripts/floor-server.c did not compile: " + (p.stderr or "")[-300:]
        log("  " + out["floor_error"])
        return False
    ports["floor"] = free_port()
    procs["floor"] = subprocess.Popen(pinned("server", [exe, root, str(ports["floor"]), str(server_cores())]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True


def section_serve(t, res, args):
    side = args.serve_side
    src = t.image(side, side)
    levels = levels_for(side, side)
    sdir = os.path.join(t.out, "serve")
    clear(sdir)
    os.makedirs(sdir)
    root = os.path.join(t.out, "pyramids")
    os.makedirs(root, exist_ok=True)
    out = {"image": f"{side}x{side}", "tiles": tile_count(side, side), "wrk": "2 threads, 32 connections",
           "seconds": args.serve_seconds, "rounds": args.serve_rounds, "legs": {}}
    ids = {fmt: f"{IMAGE_ID}-{fmt}" for fmt, _ in SERVE_FORMATS}
    # The pyramids tiler and nginx both serve, one PNG and one JPEG Q85 image in one ROOT:
    # tiler's own, or dzsave's while tiler cut is missing (same paths; nginx and iipsrv
    # can then still be exercised).
    try:
        for fmt, _ in SERVE_FORMATS:
            man = os.path.join(root, ids[fmt], "pyramid.json")
            fresh = res.get("cut", {}).get("image") == f"{side}x{side}" and os.path.exists(man)
            if fresh:
                log(f"serve: {ids[fmt]}: the pyramid tiler cut in the cut section")
            else:
                log(f"serve: cutting the {side}x{side} {fmt} pyramid to serve")
                r = t.measure_cut("tiler", fmt, src, side, side, keep=os.path.join(root, ids[fmt]), name=ids[fmt])
                if "error" in r:
                    raise TilerError(r["error"])
            with open(man) as f:
                man = json.load(f)
            got = [(l["columns"], l["rows"]) for l in man["levels"]]
            if got != [(l["columns"], l["rows"]) for l in levels]:
                raise TilerError(f"pyramid.json levels {got} differ from the contract's geometry")
        out["pyramid"] = "tiler cut"
    except TilerError as e:
        log(f"  tiler cut unavailable ({e}); serving dzsave's pyramids to nginx")
        clear(root)
        os.makedirs(root)
        for fmt, _ in SERVE_FORMATS:
            t.measure_cut("dzsave", fmt, src, side, side, keep=os.path.join(root, ids[fmt]), name=ids[fmt])
        out["pyramid"] = "dzsave --layout google (tiler cut unavailable)"
    tif = t.pyramidal_tiff(src, args.iip_compression)
    out["iipsrv_tiff"] = f"vips tiffsave --tile --pyramid --compression {args.iip_compression} 256x256"

    scripts = {}
    for fmt, ext in SERVE_FORMATS:
        scripts[fmt] = os.path.join(sdir, f"tiles-{fmt}.lua")
        lua_tiles(scripts[fmt], levels, f"/images/{ids[fmt]}/tiles/%d/%d/%d{ext}", "l[1], row, col")
    maxdz = math.ceil(math.log2(side))
    offset = maxdz - (len(levels) - 1)   # DeepZoom level of our level 0
    dz = "/fcgi-bin/iipsrv.fcgi?DeepZoom=" + os.path.basename(tif) + "_files"
    scripts["iip"] = os.path.join(sdir, "iip.lua")
    lua_tiles(scripts["iip"], levels, dz + "/%d/%d_%d.jpg", "l[1], col, row", level_offset=offset)
    vis_lua = os.path.join(sdir, "visible.lua")
    lua_visible(vis_lua, ids["png"], side, side, len(levels) - 1)

    procs = {}
    try:
        # ---- nginx + iipsrv
        ports = {"nginx": free_port(), "iipsrv": free_port()}
        iip_ports = [free_port() for _ in range(args.iip_procs)]
        env = dict(os.environ, FILESYSTEM_PREFIX=os.path.dirname(tif) + "/", MAX_IMAGE_CACHE_SIZE="1024",
                   VERBOSITY="0", LOGFILE=os.path.join(sdir, "iipsrv.log"), JPEG_QUALITY="85")
        for i, p in enumerate(iip_ports):
            procs[f"iipsrv{i}"] = subprocess.Popen(
                pinned("server", ["/usr/lib/iipimage-server/iipsrv.fcgi", "--bind", f"127.0.0.1:{p}", "--backlog",
                                  "1024"]), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ndir = os.path.join(sdir, "nginx")
        os.makedirs(ndir)
        locations = "\n".join(f"    location /images/{i}/tiles/ {{ alias {root}/{i}/; }}" for i in ids.values())
        with open(os.path.join(ndir, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF.format(d=ndir, port=ports["nginx"], iip_port=ports["iipsrv"], locations=locations,
                                      upstreams=" ".join(f"server 127.0.0.1:{p};" for p in iip_ports)))
        procs["nginx"] = subprocess.Popen(pinned("server", ["nginx", "-p", ndir, "-c", os.path.join(ndir, "nginx.conf")]),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # ---- the floor: scripts/floor-server.c, the least a server can do per response
        # (tiles in memory, one read and one write each), on the same files and URLs
        floor_ok = start_floor_server(sdir, root, ports, procs, out)
        # ---- tiler: time from exec to the first answered /healthz, then keep the last one
        tiler_ok = t.tiler_error is None and out["pyramid"] == "tiler cut"
        if tiler_ok:
            try:
                ttfa = []
                for i in range(args.ttfa_runs):
                    ports["tiler"] = free_port()
                    t0 = time.perf_counter()
                    # Its messages go to a file: a pipe nobody reads would stop the server when full.
                    tiler_log = open(os.path.join(sdir, "tiler-serve.log"), "w")
                    pr = subprocess.Popen(pinned("server", [t.tiler, "serve", root, "--host", "127.0.0.1", "--port",
                                                           str(ports["tiler"])]),
                                          stdout=subprocess.DEVNULL, stderr=tiler_log)
                    tiler_log.close()
                    procs["tiler"] = pr
                    wait_http(ports["tiler"], "/healthz", proc=pr)
                    ttfa.append((time.perf_counter() - t0) * 1000)
                    if i < args.ttfa_runs - 1:
                        stop(pr)
                out["time_to_first_answer_ms"] = {"median": round(statistics.median(ttfa), 1),
                                                  "runs": [round(x, 1) for x in ttfa]}
                log(f"  tiler serve: first /healthz answer after {statistics.median(ttfa):.1f} ms (median of {len(ttfa)})")
            except TilerError as e:
                tiler_ok = False
                pr = procs.get("tiler")
                err = []
                if pr and pr.poll() is not None:
                    err = tiler_serve_log(sdir)
                out["tiler_error"] = f"tiler serve: {e}" + (f": {err[0]}" if err else "")
                log(f"  TILER SERVE FAILED: {out['tiler_error']}")
        else:
            out["tiler_error"] = t.tiler_error or "tiler cut unavailable, no tiler pyramid to serve"
        wait_http(ports["nginx"], f"/images/{ids['png']}/tiles/0/0/0.png")
        wait_http(ports["iipsrv"], f"{dz}/{offset}/0_0.jpg")
        if floor_ok:
            try:
                wait_http(ports["floor"], f"/images/{ids['png']}/tiles/0/0/0.png", timeout=300, proc=procs["floor"])
            except TilerError as e:
                floor_ok = False
                out["floor_error"] = f"floor-server: {e}"
                log("  " + out["floor_error"])

        # ---- every server must answer real, correct tiles before it is timed
        legs = [("tiler", "png"), ("nginx", "png"), ("floor", "png"),
                ("tiler", "jpeg"), ("nginx", "jpeg"), ("floor", "jpeg"), ("iipsrv", "jpeg")]
        if not tiler_ok:
            legs = [l for l in legs if l[0] != "tiler"]
        if not floor_ok:
            legs = [l for l in legs if l[0] != "floor"]
        rng = random.Random(1)
        samples = []
        for _ in range(40):
            l = rng.choice(levels)
            samples.append((l["level"], rng.randrange(l["rows"]), rng.randrange(l["columns"])))
        for name, fmt in list(legs):
            ext = dict(SERVE_FORMATS)[fmt]
            ctype_want = "image/png" if fmt == "png" else "image/jpeg"
            for z, row, col in samples:
                if name == "iipsrv":
                    path = f"{dz}/{z + offset}/{col}_{row}.jpg"
                else:
                    path = f"/images/{ids[fmt]}/tiles/{z}/{row}/{col}{ext}"
                st, ctype, body = http_get(ports[name], path)
                bad = None
                if st != 200:
                    bad = f"status {st}"
                elif name == "iipsrv":
                    if not body.startswith(b"\xff\xd8") or ctype != ctype_want:
                        bad = f"not a JPEG ({ctype})"
                else:
                    with open(os.path.join(root, ids[fmt], str(z), str(row), f"{col}{ext}"), "rb") as f:
                        if body != f.read() or ctype != ctype_want:
                            bad = f"body or Content-Type ({ctype}) differs from the file on disk"
                if bad:
                    msg = f"{name} answered {path} wrongly: {bad}"
                    if name == "floor":
                        out["floor_error"] = msg
                        legs = [l for l in legs if l[0] != "floor"]
                        log("  FLOOR SERVER WRONG: " + msg)
                        break
                    if name != "tiler":
                        raise TilerError(msg)
                    out["tiler_error"] = msg
                    legs = [l for l in legs if l[0] != "tiler"]
                    tiler_ok = False
                    log("  TILER SERVE WRONG: " + msg)
                    break
        log(f"  correct tiles from: {', '.join(f'{a}/{b}' for a, b in legs)}")

        # ---- warm up, then alternate
        def script(name, fmt):
            return scripts["iip"] if name == "iipsrv" else scripts[fmt]
        def load(name, lua, seconds, pid=None):
            """wrk against one server; if the server has exited, the run stops naming it."""
            proc = procs.get("nginx" if name == "iipsrv" else name)  # iipsrv is reached through nginx
            try:
                w = wrk(ports[name], lua, seconds, pid=pid)
            except TilerError:
                check_alive(name, proc, sdir)
                raise
            check_alive(name, proc, sdir)
            return w
        for name, fmt in legs:
            load(name, script(name, fmt), 2)
        runs = {f"{a}/{b}": [] for a, b in legs}
        vis_runs = []
        # CPU per response: tiler's process, nginx's master and worker (iipsrv's cost is
        # spread over nginx and its FastCGI processes: not measured).
        cpu_pids = {"nginx": procs["nginx"].pid}
        if floor_ok:
            cpu_pids["floor"] = procs["floor"].pid
        if tiler_ok:
            cpu_pids["tiler"] = procs["tiler"].pid
        if tiler_ok:
            st, ctype, body = http_get(ports["tiler"], f"/images/{ids['png']}/visible?x=0&y=0&width=1920&height=1080&scale=1")
            if st != 200 or b'"tiles"' not in body:
                out["visible_error"] = f"visible answered {st}: {body[:200]!r}"
                log("  TILER VISIBLE WRONG: " + out["visible_error"])
        for r in range(args.serve_rounds):
            order = legs if r % 2 == 0 else list(reversed(legs))
            for name, fmt in order:
                w = load(name, script(name, fmt), args.serve_seconds, pid=cpu_pids.get(name))
                runs[f"{name}/{fmt}"].append(w)
                log(f"  round {r + 1} {name:6} {fmt:4}: {w['rps']:>7} req/s, p50 {w['p50_ms']:.2f} ms, "
                    f"p99 {w['p99_ms']:.2f} ms, {w['errors']} errors, {w['bytes_per_response']} B/response, "
                    f"{w['cpu_us_per_response']} µs CPU/response, wrk {w['wrk_cpu_us_per_response']} µs")
            if tiler_ok and "visible_error" not in out:
                w = load("tiler", vis_lua, args.serve_seconds, pid=cpu_pids.get("tiler"))
                vis_runs.append(w)
                log(f"  round {r + 1} visible: {w['rps']:>7} req/s, p99 {w['p99_ms']:.2f} ms, {w['errors']} errors, "
                    f"{w['bytes_per_response']} B/response")
        for key, rs in runs.items():
            out["legs"][key] = {"rps": statistics.median(x["rps"] for x in rs),
                                "p50_ms": statistics.median(x["p50_ms"] for x in rs),
                                "p99_ms": statistics.median(x["p99_ms"] for x in rs),
                                "errors": sum(x["errors"] for x in rs),
                                "cpu_us_per_response": median_or_none([x["cpu_us_per_response"] for x in rs]),
                                "wrk_cpu_us_per_response": median_or_none([x["wrk_cpu_us_per_response"] for x in rs]),
                                "bytes_per_response": rs[0]["bytes_per_response"], "runs": rs}
        if vis_runs:
            out["visible"] = {"rps": statistics.median(x["rps"] for x in vis_runs),
                              "p99_ms": statistics.median(x["p99_ms"] for x in vis_runs),
                              "errors": sum(x["errors"] for x in vis_runs),
                              "cpu_us_per_response": median_or_none([x["cpu_us_per_response"] for x in vis_runs]),
                              "wrk_cpu_us_per_response": median_or_none([x["wrk_cpu_us_per_response"] for x in vis_runs]),
                              "bytes_per_response": vis_runs[0]["bytes_per_response"], "runs": vis_runs}
        if tiler_ok:
            out["tiler_rss_mb"] = vm_hwm_mb(procs["tiler"].pid)
        if args.profile_serve and tiler_ok:
            out["profile"] = profile_server(procs["tiler"].pid, ports["tiler"], scripts["png"], sdir)
            if vis_runs:
                out["profile_visible"] = profile_server(procs["tiler"].pid, ports["tiler"], vis_lua, sdir)
    finally:
        for p in procs.values():
            stop(p)
    res["serve"] = out



# ---- serving sources on the fly: tiler serve --sources against iipsrv, same pyramidal TIFF

def start_iipsrv(sdir, tif, nprocs, quality=85, cpus=None):
    """iipsrv as section_serve runs it: `nprocs` FastCGI processes behind nginx, reading
    the folder of `tif`, JPEG at `quality`; on `cpus` (a taskset list) when given, else
    where the server role is pinned. Returns (nginx port, {name: process})."""
    procs = {}
    port = free_port()
    iip_ports = [free_port() for _ in range(nprocs)]
    env = dict(os.environ, FILESYSTEM_PREFIX=os.path.dirname(tif) + "/", MAX_IMAGE_CACHE_SIZE="1024",
               VERBOSITY="0", LOGFILE=os.path.join(sdir, "iipsrv.log"), JPEG_QUALITY=str(quality))

    def on_cpus(argv):
        return ["taskset", "-c", cpus] + argv if cpus else pinned("server", argv)
    for i, p in enumerate(iip_ports):
        procs[f"iipsrv{i}"] = subprocess.Popen(
            on_cpus(["/usr/lib/iipimage-server/iipsrv.fcgi", "--bind", f"127.0.0.1:{p}", "--backlog", "1024"]),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ndir = os.path.join(sdir, "nginx-" + str(port))
    os.makedirs(ndir)
    with open(os.path.join(ndir, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(d=ndir, port=free_port(), iip_port=port, locations="",
                                  upstreams=" ".join(f"server 127.0.0.1:{p};" for p in iip_ports)))
    procs["nginx"] = subprocess.Popen(on_cpus(["nginx", "-p", ndir, "-c", os.path.join(ndir, "nginx.conf")]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return port, procs


def section_serve_sources(t, res, args):
    """tiler serve --sources against iipsrv on the same pyramidal TIFF (JPEG Q85 inside,
    256 px tiles), both answering DeepZoom JPEG Q85 tiles: random tiles over all levels
    with wrk at 32 connections (warm: alternating rounds after a warm-up), then the cold
    case (fresh servers, each tile of the pyramid asked once, 32 at a time), and each
    server's peak RSS (iipsrv: the sum over its processes)."""
    if t.tiler_error:
        raise TilerError(t.tiler_error)
    side = args.serve_side
    src = t.image(side, side)
    tif = t.pyramidal_tiff(src, "jpeg")
    work = os.path.join(t.out, "serve-sources")
    clear(work)
    sources, root = os.path.join(work, "sources"), os.path.join(work, "root")
    os.makedirs(sources)
    os.makedirs(root)
    image_id = "sources-image"
    served = os.path.join(sources, image_id + ".tif")
    try:
        os.link(tif, served)
    except OSError:
        shutil.copyfile(tif, served)
    levels = levels_for(side, side)
    maxdz = math.ceil(math.log2(side))
    offset = maxdz - (len(levels) - 1)
    dz_iip = "/fcgi-bin/iipsrv.fcgi?DeepZoom=" + os.path.basename(served) + "_files"
    dz_tiler = f"/images/{image_id}_files"
    scripts = {"tiler": os.path.join(work, "tiler.lua"), "iipsrv": os.path.join(work, "iip.lua")}
    lua_tiles(scripts["tiler"], levels, dz_tiler + "/%d/%d_%d.jpg", "l[1], col, row", level_offset=offset)
    lua_tiles(scripts["iipsrv"], levels, dz_iip + "/%d/%d_%d.jpg", "l[1], col, row", level_offset=offset)
    every = [(l["level"], r, c) for l in levels for r in range(l["rows"]) for c in range(l["columns"])]
    random.Random(7).shuffle(every)
    paths = {"tiler": [f"{dz_tiler}/{z + offset}/{c}_{r}.jpg" for z, r, c in every],
             "iipsrv": [f"{dz_iip}/{z + offset}/{c}_{r}.jpg" for z, r, c in every]}
    out = {"side": side, "tiff": "vips tiffsave --tile --pyramid --compression jpeg --Q 85, 256x256",
           "tiles": len(every), "seconds": args.serve_seconds, "rounds": args.serve_rounds, "legs": {},
           "cold": {}, "load_start": os.getloadavg()}

    # "tiler-small-cache": the same server with caches far smaller than this pyramid's
    # tiles (84 MB of JPEG, 1.6 GB of pixels), so most requests make their tile again
    # from the TIFF, as iipsrv makes every tile: what a pyramid too large to cache costs.
    small_cache = ["--cache-mb", "16", "--sources-cache-mb", "16"]

    def start(name):
        sdir = os.path.join(work, f"{name}-{len(os.listdir(work))}")
        os.makedirs(sdir)
        if name == "iipsrv":
            port, procs = start_iipsrv(sdir, served, args.iip_procs)
            wait_http(port, f"{dz_iip}/{offset}/0_0.jpg")
            return port, procs
        port = free_port()
        pr = subprocess.Popen(pinned("server", [t.tiler, "serve", root, "--sources", sources, "--sources-format", "jpeg",
                                                "--sources-quality", "85", "--host", "127.0.0.1", "--port", str(port)]
                                     + (small_cache if name == "tiler-small-cache" else [])),
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(sdir, "stderr"), "w"))
        wait_http(port, f"/images/{image_id}", proc=pr)
        return port, {"tiler": pr}

    def peak(procs):
        return round(sum(vm_hwm_mb(p.pid) or 0 for n, p in procs.items() if n != "nginx"), 1)

    # ---- cold: fresh servers, each tile once
    for name in ("tiler", "iipsrv"):
        port, procs = start(name)
        try:
            c = cold_run(port, paths[name])
            c["peak_rss_mb"] = peak(procs)
            c.pop("failed")
            out["cold"][name] = c
            log(f"  cold {name:6}: {c['rps']} req/s, p50 {c['p50_ms']} ms, p99 {c['p99_ms']} ms, "
                f"{c['errors']} errors, peak RSS {c['peak_rss_mb']} MB")
        finally:
            for p in procs.values():
                stop(p)
    # ---- warm: all running, answers checked, each tile asked once, a wrk warm-up,
    # then alternating rounds
    legs = ("tiler", "iipsrv", "tiler-small-cache")
    paths["tiler-small-cache"], scripts["tiler-small-cache"] = paths["tiler"], scripts["tiler"]
    ports, procs = {}, {}
    try:
        for name in legs:
            ports[name], ps = start(name)
            procs.update({f"{name}:{k}": v for k, v in ps.items()})
        for z, r, c in every[:40]:
            for name in legs:
                path = paths[name][every.index((z, r, c))]
                st, ctype, body = http_get(ports[name], path)
                if st != 200 or ctype != "image/jpeg" or not body.startswith(b"\xff\xd8"):
                    raise TilerError(f"{name} answered {path} with {st} {ctype}")
        # Warm means every tile has been asked for once: a server that keeps what it made
        # then answers from memory, one that does not makes it again.
        out["warm_up"] = {}
        for name in legs:
            c = cold_run(ports[name], paths[name])
            out["warm_up"][name] = {k: c[k] for k in ("rps", "p50_ms", "p99_ms", "errors")}
            log(f"  warm-up {name}: each tile once, {c['rps']} req/s, p99 {c['p99_ms']} ms, {c['errors']} errors")
            wrk(ports[name], scripts[name], 2)
        runs = {name: [] for name in legs}
        for rnd in range(args.serve_rounds):
            for name in (legs if rnd % 2 == 0 else tuple(reversed(legs))):
                w = wrk(ports[name], scripts[name], args.serve_seconds)
                runs[name].append(w)
                log(f"  round {rnd + 1} {name:6}: {w['rps']:>7} req/s, p50 {w['p50_ms']:.2f} ms, "
                    f"p99 {w['p99_ms']:.2f} ms, {w['errors']} errors")
        for name, rs in runs.items():
            out["legs"][name] = {"rps": statistics.median(x["rps"] for x in rs),
                                 "p50_ms": statistics.median(x["p50_ms"] for x in rs),
                                 "p99_ms": statistics.median(x["p99_ms"] for x in rs),
                                 "errors": sum(x["errors"] for x in rs), "runs": rs}
        # Latency at a given load: tiler offered three times iipsrv's rate (the issue's
        # "3x iipsrv's req/s"), each connection pausing between requests, for the p99
        # at that rate rather than at tiler's saturation (where 32 connections and wrk
        # share the two cores with it).
        iip_rps = statistics.median(x["rps"] for x in runs["iipsrv"])
        paced = os.path.join(work, "tiler-paced.lua")
        lua_tiles(paced, levels, dz_tiler + "/%d/%d_%d.jpg", "l[1], col, row", level_offset=offset,
                  pause_ms=round(32 * 1000 / (3.2 * iip_rps), 2))  # 3.2: the answers' own time
        w = wrk(ports["tiler"], paced, args.serve_seconds)
        out["paced"] = {"needed_rps": round(3 * iip_rps), **w}
        log(f"  tiler paced to about 3x iipsrv ({3 * iip_rps:.0f} req/s): {w['rps']} req/s, p50 {w['p50_ms']:.2f} ms, "
            f"p99 {w['p99_ms']:.2f} ms, {w['errors']} errors")
        # And the small-cache server offered iipsrv's own rate: tiles made again, at equal load.
        paced1 = os.path.join(work, "tiler-paced-1x.lua")
        lua_tiles(paced1, levels, dz_tiler + "/%d/%d_%d.jpg", "l[1], col, row", level_offset=offset,
                  pause_ms=round(32 * 1000 / iip_rps, 2))
        w = wrk(ports["tiler-small-cache"], paced1, args.serve_seconds)
        out["paced_small_cache"] = {"needed_rps": round(iip_rps), **w}
        log(f"  tiler-small-cache paced to about iipsrv's rate ({iip_rps:.0f} req/s): {w['rps']} req/s, "
            f"p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms, {w['errors']} errors")
        out["legs"]["tiler"]["peak_rss_mb"] = peak({k: v for k, v in procs.items() if k.startswith("tiler:")})
        out["legs"]["tiler-small-cache"]["peak_rss_mb"] = peak(
            {k: v for k, v in procs.items() if k.startswith("tiler-small-cache:")})
        out["legs"]["iipsrv"]["peak_rss_mb"] = peak({k.split(":")[1]: v for k, v in procs.items() if k.startswith("iipsrv:")})
    finally:
        for p in procs.values():
            stop(p)
    ti, ii = out["legs"]["tiler"], out["legs"]["iipsrv"]
    out["ratio_rps"] = round(ti["rps"] / max(1, ii["rps"]), 2)
    sm = out["legs"]["tiler-small-cache"]
    out["ratio_small_cache_rps"] = round(sm["rps"] / max(1, ii["rps"]), 2)
    out["ratio_cold_rps"] = round(out["cold"]["tiler"]["rps"] / max(1, out["cold"]["iipsrv"]["rps"]), 2)
    out["load_end"] = os.getloadavg()
    log(f"  tiler --sources / iipsrv: {out['ratio_rps']}x req/s warm (p99 {ti['p99_ms']:.2f} vs {ii['p99_ms']:.2f} ms), "
        f"{out['ratio_cold_rps']}x cold; small caches {out['ratio_small_cache_rps']}x "
        f"(p99 {sm['p99_ms']:.2f} ms); load {out['load_start'][0]:.1f} -> {out['load_end'][0]:.1f}")
    res["serve-sources"] = out

# ---- IIIF drawings: tiler against iipsrv, regions and sizes (issue 36)

IIIF_SIDE = (8000, 6000)
IIIF_Q = 90
IIIF_ID = "iiif-image"


def jpeg_size(body):
    """(width, height) of a JPEG from its first SOF marker, or None."""
    i = 2
    while i + 9 < len(body):
        if body[i] != 0xFF:
            return None
        marker, length = body[i + 1], int.from_bytes(body[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2):
            return int.from_bytes(body[i + 7:i + 9], "big"), int.from_bytes(body[i + 5:i + 7], "big")
        i += 2 + length
    return None


def iiif_requests(rng, width, height, regions, sizes, asked, square_sizes=True):
    """Distinct IIIF requests (region, size) not in `asked` (which they join): `regions`
    squares of 500 to 4000 full-resolution pixels anywhere in the image drawn to fit
    !300..700, and `sizes` of the whole image, `full/!W,W` (W 601..1400) when
    `square_sizes`, else `full/!W,H` with both from 601..1400. Returned shuffled, as
    (kind, "region/size") pairs; a server's URL is its prefix + this + "/0/default.jpg"."""
    made = []

    def add(kind, rs):
        if rs in asked:
            return False
        asked.add(rs)
        made.append((kind, rs))
        return True
    n = 0
    while n < regions:
        side = rng.randint(500, min(4000, width, height))
        x, y = rng.randint(0, width - side), rng.randint(0, height - side)
        out = rng.randint(300, min(700, side))
        n += add("region", f"{x},{y},{side},{side}/!{out},{out}")
    n = 0
    while n < sizes:
        w = rng.randint(601, 1400)
        h = w if square_sizes else rng.randint(601, 1400)
        n += add("size", f"full/!{w},{h}")
    rng.shuffle(made)
    return made


def warm_files(*paths):
    """Reads every file under `paths` once, so that neither server pays for the disk."""
    for p in paths:
        files = [p] if os.path.isfile(p) else [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
        for f in files:
            with open(f, "rb") as fh:
                while fh.read(1 << 20):
                    pass


def section_iiif(t, res, args):
    """IIIF drawings (regions and sizes that are no stored tile), tiler against iipsrv at
    equal resources, issue 36's benchmark: an 8000x6000 image, tiler's JPEG Q90 pyramid
    against a pyramidal JPEG Q90 TIFF (256 px tiles) served by iipsrv (JPEG Q90,
    one FastCGI process behind nginx); each server pinned to one core (tiler with one
    event loop; iipsrv and its nginx together), the client (this script) on another.
    Latency one request at a time over 120 distinct regions and 120 distinct sizes (the
    servers alternate on each URL), then 3,000 distinct random regions and sizes at 8
    connections (each URL asked once: no answer comes from a cache of answers)."""
    if t.tiler_error:
        raise TilerError(t.tiler_error)
    q = args.quick
    width, height = IIIF_SIDE
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise TilerError("the IIIF comparison needs two CPUs (servers on one, the client on the other)")
    server_cpu = PINNING["server"] or str(cpus[0])
    client_cpu = PINNING["client"] or str(cpus[1])
    if len(cpu_list(server_cpu)) != 1:
        raise TilerError(f"the IIIF comparison pins each server to one core; --server-cpus {server_cpu} names more")
    src = t.image(width, height)
    work = os.path.join(t.out, "iiif")
    clear(work)
    root, tifs = os.path.join(work, "root"), os.path.join(work, "tif")
    os.makedirs(tifs)
    log(f"cutting tiler's JPEG Q{IIIF_Q} pyramid of {width}x{height}")
    run([t.tiler, "cut", src, "--output", root, "--name", IIIF_ID, "--format", "jpeg", "--quality", str(IIIF_Q),
         "--quiet", "--force"], capture_output=True)
    tif = t.pyramidal_tiff(src, "jpeg", quality=IIIF_Q)
    served = os.path.join(tifs, IIIF_ID + ".tif")
    try:
        os.link(tif, served)
    except OSError:
        shutil.copyfile(tif, served)
    prefix = {"tiler": f"/iiif/3/{IIIF_ID}/", "iipsrv": f"/fcgi-bin/iipsrv.fcgi?IIIF={IIIF_ID}.tif/"}
    count = 40 if q else 120
    load_count = 600 if q else 3000
    rng = random.Random(36)
    asked = set()
    serial = iiif_requests(rng, width, height, count, count, asked)
    load = iiif_requests(rng, width, height, load_count // 2, load_count - load_count // 2, asked, square_sizes=False)
    warm = iiif_requests(rng, width, height, 6, 6, asked, square_sizes=False)
    out = {"image": f"{width}x{height} ({os.path.basename(src)})", "quality": IIIF_Q,
           "tiff": f"vips tiffsave --tile --pyramid --compression jpeg --Q {IIIF_Q}, 256x256",
           "pinning": {"servers": server_cpu, "client": client_cpu}, "distinct": {"serial": len(serial), "load": len(load)},
           "load_connections": 8, "load_start": os.getloadavg()}
    warm_files(root, served)
    procs, ports = {}, {}
    affinity = os.sched_getaffinity(0)
    try:
        sdir = os.path.join(work, "iipsrv")
        os.makedirs(sdir)
        # Debian's iipsrv (1.1) speaks IIIF 2.1; these requests (x,y,w,h regions, `!w,h`
        # sizes, rotation 0, default quality) mean the same in 2.1 and 3.0.
        ports["iipsrv"], ps = start_iipsrv(sdir, served, 1, quality=IIIF_Q, cpus=server_cpu)
        procs.update(ps)
        ports["tiler"] = free_port()
        procs["tiler"] = subprocess.Popen(
            ["taskset", "-c", server_cpu, t.tiler, "serve", root, "--host", "127.0.0.1", "--port", str(ports["tiler"]),
             "--threads", "1"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "tiler-serve.log"), "w"))
        wait_http(ports["tiler"], f"/iiif/3/{IIIF_ID}/info.json", proc=procs["tiler"])
        wait_http(ports["iipsrv"], prefix["iipsrv"] + "info.json")
        os.sched_setaffinity(0, cpu_list(client_cpu))
        # Both answer the same JPEG sizes; a few warm-up requests each.
        for kind, rs in warm:
            sizes = {}
            for name in ("tiler", "iipsrv"):
                st, ctype, body = http_get(ports[name], prefix[name] + rs + "/0/default.jpg")
                if st != 200 or ctype != "image/jpeg":
                    raise TilerError(f"{name} answered {rs} with {st} {ctype}: {body[:200]!r}")
                sizes[name] = jpeg_size(body)
            if abs(sizes["tiler"][0] - sizes["iipsrv"][0]) > 1 or abs(sizes["tiler"][1] - sizes["iipsrv"][1]) > 1:
                raise TilerError(f"{rs}: tiler drew {sizes['tiler']}, iipsrv {sizes['iipsrv']}")
        # ---- one request at a time, the servers alternating on each URL
        conns = {name: http.client.HTTPConnection("127.0.0.1", ports[name], timeout=120) for name in prefix}
        lat = {name: {"region": [], "size": []} for name in prefix}
        for n, (kind, rs) in enumerate(serial):
            for name in (("tiler", "iipsrv") if n % 2 == 0 else ("iipsrv", "tiler")):
                t0 = time.perf_counter()
                conns[name].request("GET", prefix[name] + rs + "/0/default.jpg")
                r = conns[name].getresponse()
                body = r.read()
                dt = time.perf_counter() - t0
                if r.status != 200:
                    raise TilerError(f"{name} answered {rs} with {r.status}: {body[:200]!r}")
                lat[name][kind].append(dt * 1000)
        for c in conns.values():
            c.close()

        def pct(v, p):
            v = sorted(v)
            return round(v[min(len(v) - 1, int(p / 100 * len(v)))], 2)
        out["serial"] = {name: {kind: {"median_ms": round(statistics.median(v), 2), "p90_ms": pct(v, 90), "n": len(v)}
                                for kind, v in lat[name].items()} for name in prefix}
        for kind in ("region", "size"):
            a, b = out["serial"]["tiler"][kind], out["serial"]["iipsrv"][kind]
            out[f"ratio_{kind}_median"] = round(a["median_ms"] / b["median_ms"], 3)
            log(f"  {kind}s, one at a time: tiler median {a['median_ms']} ms (p90 {a['p90_ms']}), iipsrv "
                f"{b['median_ms']} ms (p90 {b['p90_ms']}): {out[f'ratio_{kind}_median']}x")
        # ---- under load: each URL once, 8 at a time
        out["load"] = {}
        for name in ("tiler", "iipsrv"):
            c = cold_run(ports[name], [prefix[name] + rs + "/0/default.jpg" for _, rs in load], conns=8)
            c.pop("failed")
            out["load"][name] = c
            log(f"  load {name:6}: {c['rps']} req/s, p50 {c['p50_ms']} ms, p99 {c['p99_ms']} ms, {c['errors']} errors")
            check_alive(name, procs.get(name), work)
        a, b = out["load"]["tiler"], out["load"]["iipsrv"]
        out["ratio_load_rps"] = round(a["rps"] / max(1, b["rps"]), 3)
        out["ratio_load_p99"] = round(a["p99_ms"] / max(1e-9, b["p99_ms"]), 3)
        out["tiler_peak_rss_mb"] = vm_hwm_mb(procs["tiler"].pid)
    finally:
        os.sched_setaffinity(0, affinity)
        for p in procs.values():
            stop(p)
    out["load_end"] = os.getloadavg()
    log(f"  tiler / iipsrv: regions {out['ratio_region_median']}x, sizes {out['ratio_size_median']}x (medians); "
        f"load {out['ratio_load_rps']}x req/s, p99 {out['ratio_load_p99']}x")
    res["iiif"] = out


# ---- serving archives, local and from object storage

def start_s3_server():
    """scripts/s3-test-server (moto, signature checking on) on a free port, bucket 'tiles'."""
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "s3-test-server"), "--bucket", "tiles"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if not line:
        raise TilerError("scripts/s3-test-server did not start (scripts/install-deps test installs moto[server])")
    return p, json.loads(line)


def cold_run(port, paths, conns=32):
    """Requests each path once, `conns` at a time on keep-alive connections, and times
    every answer: what clients of a freshly started server see."""
    import threading
    lat, errors, failed, lock = [], [0], [], threading.Lock()
    it = iter(paths)

    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                path = next(it, None)
            if path is None:
                break
            t0 = time.perf_counter()
            try:
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                ok = r.status == 200
            except OSError:
                ok = False
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if not ok:
                    errors[0] += 1
                    failed.append(path)
        c.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(conns)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    lat.sort()
    def pct(q):
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2)
    return {"requests": len(lat), "rps": round(len(lat) / wall), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "max_ms": round(lat[-1] * 1000, 2), "errors": errors[0], "failed": failed}


def section_serve_archives(t, res, args):
    """The serve section's archive legs: random tiles of one cut pyramid (JPEG Q85) served
    from its folder, from its archive on the local disk, and from the archive in the local
    S3 server (moto), alternating within each round; and the cold-cache latency of a
    freshly started server reading from S3."""
    if t.tiler_error:
        raise TilerError(t.tiler_error)
    side = args.serve_side
    fmt, ext = "jpeg", ".jpg"
    levels = levels_for(side, side)
    image_id = f"{IMAGE_ID}-{fmt}"
    work = os.path.join(t.out, "serve-archives")
    clear(work)
    folders, archives = os.path.join(work, "folders"), os.path.join(work, "archives")
    os.makedirs(folders)
    os.makedirs(archives)
    src = t.image(side, side)
    log(f"serve-archives: cutting the {side}x{side} {fmt} pyramid, packing it, uploading it")
    r = t.measure_cut("tiler", fmt, src, side, side, keep=os.path.join(folders, image_id), name=image_id)
    if "error" in r:
        raise TilerError(r["error"])
    run([t.tiler, "pack", os.path.join(folders, image_id), "--force"])
    archive = os.path.join(archives, image_id + ".pmtiles")
    os.rename(os.path.join(folders, image_id + ".pmtiles"), archive)
    out = {"image": f"{side}x{side}", "format": "JPEG Q85", "tiles": tile_count(side, side),
           "archive_bytes": os.path.getsize(archive), "wrk": "2 threads, 32 connections",
           "seconds": args.serve_seconds, "rounds": args.serve_rounds, "legs": {}, "load_start": os.getloadavg()}
    script = os.path.join(work, "tiles.lua")
    lua_tiles(script, levels, f"/images/{image_id}/tiles/%d/%d/%d{ext}", "l[1], row, col")
    every = [f"/images/{image_id}/tiles/{l['level']}/{row}/{col}{ext}"
             for l in levels for row in range(l["rows"]) for col in range(l["columns"])]
    random.Random(7).shuffle(every)
    procs = {}
    s3proc = None
    try:
        s3proc, s3 = start_s3_server()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=s3["access_key_id"], AWS_SECRET_ACCESS_KEY=s3["secret_access_key"],
                   AWS_REGION=s3["region"], AWS_ENDPOINT_URL=s3["endpoint"])
        run([sys.executable, "-c", "import boto3,sys; boto3.client('s3').upload_file(sys.argv[1], 'tiles', sys.argv[2])",
             archive, f"bench/{image_id}.pmtiles"], env=env)
        bucket = "s3://tiles/bench"
        # Legs: (name, ROOT, extra flags). Without the response cache every request reads
        # the tile (folder: open + read per file; archive: pread in one open file; both
        # from the page cache); with it (the default 256 MiB holds this whole pyramid) a
        # warm server answers from memory, which is what a bucket-backed server is for.
        servers = {"folder/no-cache": (folders, ["--cache-mb", "0"]), "archive/no-cache": (archives, ["--cache-mb", "0"]),
                   "folder/warm": (folders, []), "bucket/warm": (bucket, [])}
        ports = {}
        for name, (root, flags) in servers.items():
            ports[name] = free_port()
            procs[name] = subprocess.Popen(pinned("server", [t.tiler, "serve", root, "--port", str(ports[name])] + flags),
                                           env=env,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_http(ports[name], f"/images/{image_id}", proc=procs[name], timeout=120)
        # Correct bytes from every server before anything is timed.
        for path in every[:40]:
            z, row, col = path.split("/")[-3:]
            with open(os.path.join(folders, image_id, z, row, col), "rb") as f:
                want = f.read()
            for name, port in ports.items():
                st, ctype, body = http_get(port, path)
                if st != 200 or body != want:
                    raise TilerError(f"{name} answered {path} with {st}, {len(body)} bytes, not the file's {len(want)}")
        # Cold: a fresh server reads every tile once from S3 (32 at a time, shuffled); this
        # is also the warm-up of the bucket server. The folder server is warmed the same way.
        out["cold_bucket"] = cold_run(ports["bucket/warm"], every)
        out["cold_folder"] = cold_run(ports["folder/warm"], every)
        # Answers that failed (503/504 while the store was overwhelmed) are not cached:
        # ask for them again, a few at a time, until every tile is warm.
        for name in ("bucket/warm", "folder/warm"):
            left = (out["cold_bucket"] if name == "bucket/warm" else out["cold_folder"]).pop("failed")
            for attempt in range(20):
                if not left:
                    break
                time.sleep(1)
                left = cold_run(ports[name], left, conns=4)["failed"]
            if left:
                raise TilerError(f"{name}: {len(left)} tiles still fail after 20 warm-up passes")
        log(f"  cold, every tile once: bucket p50 {out['cold_bucket']['p50_ms']} ms p99 {out['cold_bucket']['p99_ms']} ms "
            f"({out['cold_bucket']['rps']} req/s, {out['cold_bucket']['errors']} errors); folder p99 "
            f"{out['cold_folder']['p99_ms']} ms ({out['cold_folder']['rps']} req/s)")
        for name in servers:
            wrk(ports[name], script, 2)
        runs = {name: [] for name in servers}
        legs = list(servers)
        for r in range(args.serve_rounds):
            for name in (legs if r % 2 == 0 else list(reversed(legs))):
                w = wrk(ports[name], script, args.serve_seconds)
                runs[name].append(w)
                log(f"  round {r + 1} {name:16}: {w['rps']:>7} req/s, p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms, "
                    f"{w['errors']} errors")
        for name, rs in runs.items():
            out["legs"][name] = {"rps": statistics.median(x["rps"] for x in rs),
                                 "p50_ms": statistics.median(x["p50_ms"] for x in rs),
                                 "p99_ms": statistics.median(x["p99_ms"] for x in rs),
                                 "errors": sum(x["errors"] for x in rs), "runs": rs}
        out["load_end"] = os.getloadavg()
    finally:
        for p in procs.values():
            stop(p)
        if s3proc:
            s3proc.stdin.close()
            try:
                s3proc.wait(10)
            except subprocess.TimeoutExpired:
                s3proc.kill()
    clear(work)
    res["serve-archives"] = out


# ---- profiles

def perf_top(data, sort, n=15):
    rep = out_of(["perf", "report", "-i", data, "--no-children", "-g", "none", "--sort", sort, "--stdio",
                  "--percent-limit", "0.7"])
    rows = [l.strip() for l in rep.splitlines() if l.strip() and not l.startswith("#") and "%" in l[:10]]
    rows = [re.sub(r"(\s+-)+$", "", re.sub(r"\s+", " ", l)) for l in rows[:n]]
    # Swift symbols are mangled; swift demangle (from the toolchain) makes them readable.
    p = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(rows),
                       text=True, capture_output=True)
    return p.stdout.splitlines() if p.returncode == 0 and p.stdout.strip() else rows


def profile_server(pid, port, script, sdir):
    data = os.path.join(sdir, "serve.perf")
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-p", str(pid), "-o", data],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    wrk(port, script, 8)
    rec.send_signal(signal.SIGINT)
    rec.wait()
    return {"dso": perf_top(data, "dso"), "symbol": perf_top(data, "dso,symbol", 25)}


def perf_works():
    try:
        return subprocess.run(["perf", "stat", "-e", "cpu-clock", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def section_profile(t, res, args):
    if not perf_works():
        res["profile"] = {"error": "perf is not installed or cannot sample here (apt-get install linux-perf)"}
        return
    side = 4000
    src = t.image(side, side)
    out = {"image": f"{side}x{side}", "format": "png", "how": "perf record -e cpu-clock -F 999 -g"}
    for tool in ("tiler", "dzsave818", "dzsave"):
        if tool == "tiler" and t.tiler_error:
            out[tool] = {"error": t.tiler_error}
            continue
        if tool == "dzsave818" and not t.newest:
            continue
        dest = os.path.join(t.out, "profile-" + tool)
        t.discard(dest)
        os.makedirs(dest)
        data = os.path.join(t.out, f"cut-{tool}.perf")
        cmd = t.cut_cmd(tool, "png", src, dest)
        p = run(["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-o", data, "--"] + cmd,
                check=False, capture_output=True)
        t.discard(dest)
        if p.returncode != 0:
            out[tool] = {"error": p.stderr[-300:]}
            continue
        out[tool] = {"dso": perf_top(data, "dso"), "symbol": perf_top(data, "dso,symbol", 25)}
        log(f"profile {tool}:\n    " + "\n    ".join(out[tool]["dso"][:8]))
    res["profile"] = out


# --------------------------------------------------------------------------- report

def targets(res):
    """Each target is a ratio from this one run: (name, value text, ratio, pass)."""
    tg = []

    def leg(sec, name):
        return res.get(sec, {}).get("legs", {}).get(name, {})

    def ratio(a, b, key, limit, label, within=False):
        """a/b <= limit, or with `within` |a/b - 1| <= limit. A target whose legs were not
        run (left out by --cut-legs) is not reported; a leg that failed makes it MISS."""
        if (a is None or b is None) and "error" not in (a or {}) and "error" not in (b or {}):
            return
        if a is None or b is None or "error" in a or "error" in b or a.get(key) is None or b.get(key) is None:
            why = (a or {}).get("error") or (b or {}).get("error") or "not measured"
            tg.append((label, "error: " + why, None, False))
            return
        r = a[key] / b[key]
        unit = {"wall": ("s", 1), "bytes": ("MB", 1e6), "rss_mb": ("MB", 1)}[key]
        digits = 2 if key == "wall" else 0
        val = f"{a[key] / unit[1]:.{digits}f} vs {b[key] / unit[1]:.{digits}f} {unit[0]}"
        tg.append((label, val, round(r, 3), abs(r - 1) <= limit if within else r <= limit))

    def against_newest(get, where):
        """The issue's targets against dzsave 8.18, for one image size."""
        tp, dp = get("tiler/png"), get("dzsave818/png")
        ratio(tp, dp, "wall", 0.5, f"cut PNG wall <= 0.5x dzsave 8.18{where}")
        ratio(tp, dp, "bytes", 1.0, f"cut PNG bytes <= dzsave 8.18{where}")
        ratio(tp, dp, "rss_mb", 1.0, f"cut PNG peak RSS <= dzsave 8.18{where}")
        for fmt in ("jpeg", "webp"):
            a, b = get(f"tiler/{fmt}"), get(f"dzsave818/{fmt}")
            ratio(a, b, "wall", 0.5, f"cut {fmt.upper()} wall <= 0.5x dzsave 8.18{where}")
            ratio(a, b, "bytes", 0.05, f"cut {fmt.upper()} bytes within 5% of dzsave 8.18{where}", within=True)
        a, b = get("tiler/jpeg"), get("dzsave818/jpeg")
        if a and b and "jpeg_tables" in a and "jpeg_tables" in b:
            same = a["jpeg_tables"] == b["jpeg_tables"]
            tg.append((f"cut JPEG: dzsave 8.18's quantisation tables and chroma subsampling{where}",
                       f"sampling {','.join(a['jpeg_tables']['sampling'])} vs {','.join(b['jpeg_tables']['sampling'])}, "
                       f"DQT {'equal' if same else 'different'}", None, same))

    if "cut" in res and "legs" in res["cut"]:
        against_newest(lambda k: leg("cut", k) or None, "")
        for fmt in ("png", "jpeg", "webp"):
            a, f = leg("cut", f"tiler/{fmt}{ARCHIVE}"), leg("cut", f"tiler/{fmt}")
            if a and f:
                ratio(a, f, "wall", 1.1, f"cut --archive {fmt.upper()} wall <= 1.1x folder cut (cut section)")
        for b in res["cut"].get("big", []):
            against_newest(lambda k: b["legs"].get(k), f" at {b['image']}")
        # One file per pyramid: tiler cut --archive (PMTiles) against dzsave container=zip.
        against_newest(lambda k: leg("cut", k + ARCHIVE) or None, ", archives (PMTiles vs zip)")
        # The targets against Debian's libvips 8.14, as before.
        tp, dp, tj, dj = (leg("cut", k) or None for k in ("tiler/png", "dzsave/png", "tiler/jpeg", "dzsave/jpeg"))
        ratio(tp, dp, "wall", 0.5, "cut PNG wall <= 0.5x dzsave 8.14 default")
        ratio(tp, dp, "bytes", 1.0, "cut PNG bytes <= dzsave 8.14 default")
        ratio(tp, dp, "rss_mb", 1.0, "cut PNG peak RSS <= dzsave 8.14 default")
        ratio(tj, dj, "wall", 0.8, "cut JPEG wall <= 0.8x dzsave 8.14")
    big = [p for p in res.get("scaling", {}).get("square", []) if "formats" in p]
    for p in big:
        legs = dict(p["formats"], **{f"{tool}/png": p[tool] for tool in SCALING_TOOLS if tool in p})
        against_newest(lambda k: legs.get(k), f" at {p['width']}x{p['height']}")
    for sk in res.get("scaling", {}).get("skipped", []):
        tg.append((f"cut targets at {sk['side']}x{sk['side']}", "skipped: " + sk["reason"], None, False))
    if "archive" in res and "legs" in res["archive"]:
        lg = res["archive"]["legs"]
        for fmt in ("png", "jpeg"):
            a, f = lg[f"archive/{fmt}"], lg[f"folder/{fmt}"]
            r = a["wall"] / f["wall"]
            tg.append((f"cut --archive {fmt.upper()} wall <= 1.1x folder cut", f"{a['wall']:.2f} vs {f['wall']:.2f} s",
                       round(r, 3), r <= 1.1))
    elif "archive" in res:
        tg.append(("cut --archive wall <= 1.1x folder cut", "error: " + res["archive"].get("error", "not run"), None, False))
    if "serve" in res:
        s = res["serve"]
        lg = s.get("legs", {})
        err = s.get("tiler_error") or s.get("error") or "not measured"
        for fmt in ("png", "jpeg"):
            ti, ng = lg.get(f"tiler/{fmt}"), lg.get(f"nginx/{fmt}")
            F = fmt.upper()
            if ti and ng:
                r = ti["rps"] / ng["rps"]
                tg.append((f"serve {F} req/s >= 1.5x nginx", f"{ti['rps']:.0f} vs {ng['rps']:.0f}", round(r, 3), r >= 1.5))
                r = ti["p99_ms"] / ng["p99_ms"]
                tg.append((f"serve {F} p99 <= nginx p99", f"{ti['p99_ms']:.2f} vs {ng['p99_ms']:.2f} ms", round(r, 3), r <= 1.0))
            else:
                tg += [(f"serve {F} req/s >= 1.5x nginx", "error: " + err, None, False),
                       (f"serve {F} p99 <= nginx p99", "error: " + err, None, False)]
        for fmt in ("png", "jpeg"):
            fl, ng = lg.get(f"floor/{fmt}"), lg.get(f"nginx/{fmt}")
            if fl and ng:
                # Not a target: how far any server gets here, for reading the row above.
                r = fl["rps"] / ng["rps"]
                tg.append((f"(floor) serve {fmt.upper()} req/s, floor-server vs nginx",
                           f"{fl['rps']:.0f} vs {ng['rps']:.0f}", round(r, 3), None))
        ti, ii = lg.get("tiler/jpeg"), lg.get("iipsrv/jpeg")
        if ti and ii:
            r = ti["rps"] / ii["rps"]
            tg.append(("serve JPEG req/s >= 20x iipsrv", f"{ti['rps']:.0f} vs {ii['rps']:.0f}", round(r, 1), r >= 20))
        else:
            tg.append(("serve JPEG req/s >= 20x iipsrv", "error: " + err, None, False))
        v = s.get("visible")
        if v:
            tg.append(("visible >= 50k req/s", f"{v['rps']:.0f} req/s", round(v["rps"] / 50000, 3), v["rps"] >= 50000))
        else:
            tg.append(("visible >= 50k req/s", "error: " + s.get("visible_error", err), None, False))
    if "serve-archives" in res:
        sa = res["serve-archives"]
        lg = sa.get("legs", {})
        err = sa.get("error", "not measured")
        pairs = [("serve archive req/s >= 0.9x folder (no response cache)", "archive/no-cache", "folder/no-cache", 0.9),
                 ("serve S3 archive, warm cache, req/s >= 0.8x folder (warm)", "bucket/warm", "folder/warm", 0.8)]
        for label, a, b, limit in pairs:
            if a in lg and b in lg:
                r = lg[a]["rps"] / lg[b]["rps"]
                tg.append((label, f"{lg[a]['rps']:.0f} vs {lg[b]['rps']:.0f}", round(r, 3), r >= limit))
            else:
                tg.append((label, "error: " + err, None, False))
    if "serve-sources" in res:
        ss = res["serve-sources"]
        ti, ii = ss.get("legs", {}).get("tiler"), ss.get("legs", {}).get("iipsrv")
        if ti and ii:
            tg.append(("serve --sources req/s >= 3x iipsrv (same pyramidal TIFF)", f"{ti['rps']:.0f} vs {ii['rps']:.0f}",
                       ss["ratio_rps"], ss["ratio_rps"] >= 3))
            pc = ss.get("paced")
            if pc:
                tg.append(("serve --sources at >= 3x iipsrv's req/s, p99 <= iipsrv p99",
                           f"{pc['rps']:.0f} req/s (3x = {pc['needed_rps']}), p99 {pc['p99_ms']:.2f} vs "
                           f"{ii['p99_ms']:.2f} ms ({ii['errors']} iipsrv requests unanswered)",
                           round(pc["p99_ms"] / max(ii["p99_ms"], 1e-9), 2),
                           pc["rps"] >= pc["needed_rps"] and pc["p99_ms"] <= ii["p99_ms"] and pc["errors"] == 0))
            tg.append(("serve --sources p99 at saturation vs iipsrv p99", f"{ti['p99_ms']:.2f} vs {ii['p99_ms']:.2f} ms",
                       round(ti["p99_ms"] / max(ii["p99_ms"], 1e-9), 2), None))
            sm = ss["legs"].get("tiler-small-cache")
            if sm:
                tg.append(("serve --sources, caches 16 MB (tiles made again), req/s vs iipsrv", f"{sm['rps']:.0f} vs {ii['rps']:.0f}",
                           ss["ratio_small_cache_rps"], None))
                tg.append(("serve --sources, caches 16 MB, p99 at saturation vs iipsrv", f"{sm['p99_ms']:.2f} vs {ii['p99_ms']:.2f} ms",
                           round(sm["p99_ms"] / max(ii["p99_ms"], 1e-9), 2), None))
            ps = ss.get("paced_small_cache")
            if ps:
                tg.append(("serve --sources, caches 16 MB, at iipsrv's req/s, p99 vs iipsrv",
                           f"{ps['rps']:.0f} req/s, p99 {ps['p99_ms']:.2f} vs {ii['p99_ms']:.2f} ms",
                           round(ps["p99_ms"] / max(ii["p99_ms"], 1e-9), 2), None))
        else:
            tg.append(("serve --sources req/s >= 3x iipsrv (same pyramidal TIFF)", "error: " + ss.get("error", "not measured"),
                       None, False))
    if "iiif" in res:
        ii = res["iiif"]
        if "error" in ii:
            tg.append(("IIIF drawings against iipsrv", "error: " + ii["error"], None, False))
        else:
            s = ii["serial"]
            for kind in ("region", "size"):
                a, b = s["tiler"][kind]["median_ms"], s["iipsrv"][kind]["median_ms"]
                r = ii[f"ratio_{kind}_median"]
                tg.append((f"IIIF {kind}s, median latency <= 0.75x iipsrv", f"{a:.1f} vs {b:.1f} ms", r, r <= 0.75))
            a, b = ii["load"]["tiler"], ii["load"]["iipsrv"]
            tg.append(("IIIF random regions and sizes at 8 connections, req/s >= 1.5x iipsrv",
                       f"{a['rps']} vs {b['rps']}", ii["ratio_load_rps"], ii["ratio_load_rps"] >= 1.5))
            tg.append(("IIIF random regions and sizes at 8 connections, p99 <= iipsrv",
                       f"{a['p99_ms']:.1f} vs {b['p99_ms']:.1f} ms", ii["ratio_load_p99"],
                       a["p99_ms"] <= b["p99_ms"] and a["errors"] == 0))
    return tg


def fmt_cut_row(name, leg, refs=()):
    """A cut leg's row; `refs` are (label, leg) whose wall times it is compared with."""
    if not leg or "error" in leg:
        return f"| {name} | error: {(leg or {}).get('error', 'not run')} | | | | | |"
    ratios = [f"{leg['wall'] / r['wall']:.2f}× {label}" for label, r in refs if r and "error" not in r]
    ratio = f" ({', '.join(ratios)})" if ratios else ""
    rounds = len(leg["rounds"]) if "rounds" in leg else 1
    return (f"| {name} | {leg['wall']:.2f}{ratio} | {leg['cpu']:.1f} | {leg['rss_mb']:.0f} | "
            f"{leg['bytes'] / 1e6:.0f} | {leg['files']} | {rounds} |")


CUT_LABELS = {"png": "PNG", "png-c1": "PNG compression=1", "jpeg": f"JPEG Q{JPEG_Q}", "webp": f"WebP Q{WEBP_Q}",
              "png-archive": "PNG, one file", "jpeg-archive": f"JPEG Q{JPEG_Q}, one file",
              "webp-archive": f"WebP Q{WEBP_Q}, one file"}


def cut_rows(get):
    """The cut table's rows for legs found by `get(tool/fmt)`: tiler first, each compared
    with both dzsaves."""
    L = []
    for fmt in ("png", "png-c1", "jpeg", "webp", "png-archive", "jpeg-archive", "webp-archive"):
        for tool in ("tiler", "dzsave818", "dzsave"):
            x = get(f"{tool}/{fmt}")
            if x is None:
                continue
            name = f"{TOOLS[tool]} {CUT_LABELS[fmt]}" + (" (default, compression 6)" if tool != "tiler" and fmt == "png" else "")
            if fmt.endswith(ARCHIVE):
                name += " (--archive, PMTiles)" if tool == "tiler" else " (container=zip)"
            refs = [("8.18", get(f"dzsave818/{fmt}")), ("8.14", get(f"dzsave/{fmt}"))] if tool == "tiler" else []
            L.append(fmt_cut_row(name, x, refs))
    return L


def serve_ceiling(g, machine):
    """The req/s at which a server and wrk, at their measured CPU per response, would
    fill every core: cores × 10⁶ / (server µs + wrk µs) when they share the cores; with
    each pinned to its own (`pinning` in the machine's record), the lower of server
    cores × 10⁶ / server µs and client cores × 10⁶ / wrk µs. None when either is missing."""
    cpu, wcpu = g.get("cpu_us_per_response"), g.get("wrk_cpu_us_per_response")
    if not cpu or not wcpu:
        return None
    pin = machine.get("pinning") or {}
    if pin.get("server") and pin.get("client"):
        return min(len(cpu_list(pin["server"])) * 1e6 / cpu, len(cpu_list(pin["client"])) * 1e6 / wcpu)
    return (machine.get("nproc") or os.cpu_count() or 2) * 1e6 / (cpu + wcpu)


def report_md(res):
    m = res["machine"]
    L = [f"# tiler benchmark results, {m['date']}", "",
         f"Machine: {m['nproc']} × {m['cpu']}, {m['memory_gb']} GB, Linux {m['kernel']}. "
         f"Load before: {' '.join(f'{x:.2f}' for x in m['load_start'])}; after: "
         f"{' '.join(f'{x:.2f}' for x in m.get('load_end', []))}.",
         f"tiler {m['branch']}@{m['git']}, {m['swift']}; {m['vips']}; {m['nginx']}; {m['wrk']}; iipsrv {m['iipsrv']}."
         + (f" Newest libvips: {'.'.join(map(str, res['newest_vips']['version']))} (pyvips "
            f"{res['newest_vips']['pyvips']}, pyvips-binary {res['newest_vips']['pyvips_binary']})."
            if res.get("newest_vips") else ""),
         f"Command: `{res['command']}` ({res['elapsed_s']:.0f} s).", ""]
    if "cut" in res:
        c = res["cut"]
        L += [f"## Cut, {c['image']} noise JPEG ({c['input_bytes'] / 1e6:.0f} MB), median of rounds", "",
              "| leg | wall s | CPU s | peak RSS MB | MB written | files | rounds |", "|---|---|---|---|---|---|---|"]
        lg = c["legs"]
        L += cut_rows(lg.get)
        L.append("")
        base = res.get("newest_vips", {}).get("baseline")
        if base:
            L += [f"dzsave 8.18 runs in Python (pyvips): the interpreter with pyvips and libvips loaded and a 1×1 "
                  f"image computed costs {base['wall']:.2f} s wall, {base['cpu']:.2f} s CPU and {base['rss_mb']:.0f} MB "
                  f"peak RSS, included in its legs.", ""]
        tp, c1 = lg.get("tiler/png"), lg.get("dzsave/png-c1")
        if tp and c1 and "error" not in tp and "error" not in c1:
            L += [f"tiler PNG against dzsave `compression=1`: wall {tp['wall'] / c1['wall']:.2f}×, "
                  f"bytes {tp['bytes'] / c1['bytes']:.2f}×, peak RSS {tp['rss_mb'] / c1['rss_mb']:.2f}×.", ""]
        for b in c.get("big", []):
            L += [f"## Cut, {b['image']} noise JPEG ({b['input_bytes'] / 1e6:.0f} MB), one round", "",
                  "| leg | wall s | CPU s | peak RSS MB | MB written | files | rounds |", "|---|---|---|---|---|---|---|"]
            L += cut_rows(b["legs"].get) + [""]
    if "scaling" in res:
        sc = res["scaling"]
        L += ["## Scaling (PNG tiles, one round)", "",
              "| image | Mpx | tiler wall s | tiler RSS MB | dzsave 8.18 wall s | dzsave 8.18 RSS MB | "
              "dzsave 8.14 wall s | dzsave 8.14 RSS MB |", "|---|---|---|---|---|---|---|---|"]
        for p in sc["square"] + sc["strip"]:
            cells = []
            for tool in SCALING_TOOLS:
                x = p.get(tool, {"error": "not run"})
                cells.append(f"{x['wall']:.2f} | {x['rss_mb']:.0f}" if "error" not in x else "error | ")
            note = f" ({p['tiler']['reused']})" if p.get("tiler", {}).get("reused") else ""
            L.append(f"| {p['width']}×{p['height']}{note} | {p['mpx']} | {' | '.join(cells)} |")
        for s in sc["skipped"]:
            L.append(f"| {s['side']}×{s['side']} | skipped: {s['reason']} | | | | | | |")
        L.append("")
        for p in sc["square"]:
            if "formats" not in p:
                continue
            legs = dict(p["formats"], **{f"{tool}/png": p[tool] for tool in SCALING_TOOLS if tool in p})
            L += [f"### Cut, {p['width']}x{p['height']} noise JPEG, one round", "",
                  "| leg | wall s | CPU s | peak RSS MB | MB written | files | rounds |", "|---|---|---|---|---|---|---|"]
            L += cut_rows(legs.get) + [""]
    if "floor" in res and "encode" in res["floor"]:
        f = res["floor"]
        cores = m["nproc"] or 2
        L += [f"## The floor: each piece of a {f['image']['name']} cut alone ({f['image']['tiles']} tiles)", "",
              "| piece | threads | wall s | CPU s | MB |", "|---|---|---|---|---|",
              f"| decode (libjpeg, the decoder libvips calls) | 1 | {f['decode']['wall']:.2f} | {f['decode']['cpu']:.2f} | |",
              f"| 2×2 shrinks of every level (tiler's AreaAverage) | 1 | {f['shrink']['wall']:.2f} | {f['shrink']['cpu']:.2f} | |"]
        names = {"png": "encode PNG (tiler: libdeflate 1, Up filter)", "jpeg": f"encode JPEG Q{JPEG_Q} (tiler: libjpeg)",
                 "webp": f"encode WebP Q{WEBP_Q} (tiler: libwebp, effort 4)",
                 "png-libpng-paeth": "encode PNG, libpng, Paeth, zlib 2 Z_RLE (tiler before libdeflate)",
                 "png-libpng-average": "encode PNG, libpng, Average filter, zlib 2 Z_RLE",
                 "png-libpng-up": "encode PNG, libpng, Up filter, zlib 2 Z_RLE",
                 "png-libspng": "encode PNG with libspng (Paeth, zlib 2 Z_RLE)",
                 "png-libdeflate-1": "encode PNG with libdeflate level 1 (Paeth, own PNG writer)",
                 "png-libdeflate-6": "encode PNG with libdeflate level 6 (Paeth, own PNG writer)"}
        for name, x in f["encode"].items():
            L.append(f"| {names.get(name, name)} | {cores} | {x['wall']:.2f} | {x['cpu']:.2f} | {x['bytes'] / 1e6:.0f} |")
        for name, x in f["files"].items():
            L.append(f"| create the {name.upper()} pyramid's {x['count']} files | {cores} | {x['wall']:.2f} | "
                     f"{x['cpu']:.2f} | {x['bytes'] / 1e6:.0f} |")
        L.append("")
        cut = res.get("cut", {}).get("legs", {})
        rows = []
        for fmt in ("png", "jpeg", "webp"):
            if fmt not in f["encode"] or fmt not in f["files"]:
                continue
            est = floor_estimate(f, fmt, cores)
            cells = [f"{fmt.upper()}", f"{est:.2f}"]
            for tool in ("tiler", "dzsave818", "dzsave"):
                leg = cut.get(f"{tool}/{fmt}")
                cells.append(f"{leg['wall']:.2f} ({leg['wall'] / est:.1f}×)" if leg and "error" not in leg else "")
            rows.append("| " + " | ".join(cells) + " |")
        if rows:
            L += [f"Floor of a cut = the larger of the decode and all pieces' CPU time over {cores} cores:", "",
                  "| tiles | floor s | tiler wall s (× floor) | dzsave 8.18 wall s (× floor) | dzsave 8.14 wall s (× floor) |",
                  "|---|---|---|---|---|"] + rows + [""]
    if "serve" in res and "legs" in res["serve"]:
        s = res["serve"]
        L += [f"## Serve, {s['image']} pyramids ({s['tiles']} tiles each; {s['pyramid']}), wrk {s['wrk']}, "
              f"{s['seconds']} s × {s['rounds']} rounds, uniformly random tiles, median of rounds", "",
              "| server | tiles | req/s | p50 ms | p99 ms | errors | bytes/response | CPU µs/response | "
              "wrk CPU µs/response | ceiling req/s |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        labels = {"tiler": "tiler serve", "nginx": "nginx (1 worker, sendfile, open_file_cache)",
                  "floor": "floor (`scripts/floor-server.c`, tiles in memory)",
                  "iipsrv": "iipsrv (FastCGI behind nginx, DeepZoom)"}
        for key in ("tiler/png", "nginx/png", "floor/png", "tiler/jpeg", "nginx/jpeg", "floor/jpeg", "iipsrv/jpeg"):
            name, fmt = key.split("/")
            what = {"png": "PNG", "jpeg": "JPEG Q85"}[fmt] + (" from pyramidal TIFF" if name == "iipsrv" else "")
            g = s["legs"].get(key)
            if g:
                cpu, wcpu = g.get("cpu_us_per_response"), g.get("wrk_cpu_us_per_response")
                ceiling = serve_ceiling(g, m)
                L.append(f"| {labels[name]} | {what} | {g['rps']:.0f} | {g['p50_ms']:.2f} | {g['p99_ms']:.2f} | "
                         f"{g['errors']} | {g['bytes_per_response']} | {cpu if cpu is not None else ''} | "
                         f"{wcpu if wcpu is not None else ''} | {f'{ceiling:.0f}' if ceiling else ''} |")
            elif name == "floor":
                L.append(f"| {labels[name]} | {what} | not run: {s.get('floor_error', 'not run')} | | | | | | | |")
            else:
                L.append(f"| {labels[name]} | {what} | error: {s.get('tiler_error', 'not run')} | | | | | | | |")
        v = s.get("visible")
        if v:
            ceiling = serve_ceiling(v, m)
            L.append(f"| tiler `/visible` | random 1920×1080 viewports, margin 1 | {v['rps']:.0f} | | {v['p99_ms']:.2f} | "
                     f"{v['errors']} | {v['bytes_per_response']} | {v.get('cpu_us_per_response') or ''} | "
                     f"{v.get('wrk_cpu_us_per_response') or ''} | {f'{ceiling:.0f}' if ceiling else ''} |")
        L.append("")
        pin = m.get("pinning") or {}
        if pin.get("server") and pin.get("client"):
            L += [f"Pinned with taskset: the servers to CPUs {pin['server']}, wrk to CPUs {pin['client']}. "
                  f"CPU µs/response: the server's processes (every thread, user + system) over the run; wrk CPU: "
                  f"wrk's own; ceiling = the lower of server CPUs × 10⁶ / server µs and wrk CPUs × 10⁶ / wrk µs "
                  f"per response.", ""]
        else:
            L += [(f"Pinned with taskset: servers to CPUs {pin.get('server') or 'any'}, wrk to CPUs "
                   f"{pin.get('client') or 'any'}. " if pin else "")
                  + f"CPU µs/response: the server's processes (every thread, user + system) over the run; wrk CPU: "
                  f"wrk's own, which shares the {m['nproc']} cores; ceiling = cores × 10⁶ / (server + wrk µs per "
                  f"response), the req/s at which the two together fill every core.", ""]
        for fmt in ("png", "jpeg"):
            ng, fl = s["legs"].get(f"nginx/{fmt}"), s["legs"].get(f"floor/{fmt}")
            if ng and fl:
                L.append(f"{fmt.upper()}: the floor answers {fl['rps'] / ng['rps']:.2f}× nginx's req/s "
                         f"(1.5× is the target for tiler).")
        L.append("")
        if "time_to_first_answer_ms" in s:
            L.append(f"tiler serve: first `/healthz` answer {s['time_to_first_answer_ms']['median']} ms after start "
                     f"(median of {len(s['time_to_first_answer_ms']['runs'])}); peak RSS (VmHWM) after all runs "
                     f"{s.get('tiler_rss_mb')} MB.")
            L.append("")
    if "archive" in res and "legs" in res["archive"]:
        a = res["archive"]
        L += [f"## Archive vs folder, {a['image']} noise JPEG, median of rounds", "",
              "| leg | wall s | CPU s | peak RSS MB | MB written | files | rounds |", "|---|---|---|---|---|---|---|"]
        for fmt, label in (("png", "PNG"), ("jpeg", "JPEG Q85")):
            f, x = a["legs"][f"folder/{fmt}"], a["legs"][f"archive/{fmt}"]
            L.append(fmt_cut_row(f"tiler cut, {label}, folder", f))
            L.append(fmt_cut_row(f"tiler cut --archive, {label}", x, [("folder", f)]))
        L += ["", f"tiler pack (PNG folder → archive): {a['pack']['wall']:.2f} s wall, {a['pack']['rss_mb']:.0f} MB RSS; "
              f"tiler unpack (archive → folder): {a['unpack']['wall']:.2f} s wall, {a['unpack']['rss_mb']:.0f} MB RSS.", ""]
    if "serve-archives" in res and "legs" in res["serve-archives"]:
        sa = res["serve-archives"]
        L += [f"## Serving archives, {sa['image']} {sa['format']} pyramid ({sa['tiles']} tiles; archive "
              f"{sa['archive_bytes'] / 1e6:.0f} MB), wrk {sa['wrk']}, {sa['seconds']} s × {sa['rounds']} rounds, "
              f"uniformly random tiles, median of rounds; load {sa['load_start'][0]:.1f} before, "
              f"{sa.get('load_end', [0])[0]:.1f} after", "",
              "| ROOT | response cache | req/s | p50 ms | p99 ms | errors |", "|---|---|---|---|---|---|"]
        labels = {"folder/no-cache": ("folder", "off (--cache-mb 0)"), "archive/no-cache": ("local archive", "off (--cache-mb 0)"),
                  "folder/warm": ("folder", "256 MiB, warm"), "bucket/warm": ("s3:// (moto on loopback)", "256 MiB, warm")}
        for key, (root, cache) in labels.items():
            g = sa["legs"].get(key)
            if g:
                L.append(f"| {root} | {cache} | {g['rps']:.0f} | {g['p50_ms']:.2f} | {g['p99_ms']:.2f} | {g['errors']} |")
        cb, cf = sa["cold_bucket"], sa["cold_folder"]
        L += ["", f"Cold cache, every tile once (shuffled, 32 at a time) from a freshly started server: from S3 "
              f"p50 {cb['p50_ms']} ms, p99 {cb['p99_ms']} ms, max {cb['max_ms']} ms, {cb['rps']} req/s, {cb['errors']} errors; "
              f"from the folder p99 {cf['p99_ms']} ms, {cf['rps']} req/s.", ""]
    if "iiif" in res and "serial" in res["iiif"]:
        ii = res["iiif"]
        L += [f"## IIIF drawings against iipsrv, {ii['image']}, JPEG Q{ii['quality']}; servers on CPU "
              f"{ii['pinning']['servers']}, client on CPU {ii['pinning']['client']}; load {ii['load_start'][0]:.1f} before, "
              f"{ii['load_end'][0]:.1f} after", "",
              "| | tiler | iipsrv | tiler / iipsrv |", "|---|---|---|---|"]
        for kind in ("region", "size"):
            a, b = ii["serial"]["tiler"][kind], ii["serial"]["iipsrv"][kind]
            L.append(f"| {a['n']} distinct {kind}s, median (p90), one at a time | {a['median_ms']:.1f} ms ({a['p90_ms']:.1f}) | "
                     f"{b['median_ms']:.1f} ms ({b['p90_ms']:.1f}) | {ii[f'ratio_{kind}_median']} |")
        a, b = ii["load"]["tiler"], ii["load"]["iipsrv"]
        L += [f"| {ii['distinct']['load']} random regions and sizes, 8 connections: req/s, p50, p99 | "
              f"{a['rps']}, {a['p50_ms']:.1f} ms, {a['p99_ms']:.1f} ms | {b['rps']}, {b['p50_ms']:.1f} ms, {b['p99_ms']:.1f} ms | "
              f"req/s {ii['ratio_load_rps']}, p99 {ii['ratio_load_p99']} |", ""]
    if "profile" in res and "error" in res["profile"]:
        L += [f"Profile: {res['profile']['error']}", ""]
    elif "profile" in res:
        pf = res["profile"]
        L += [f"## Where the time goes: `tiler cut` and `vips dzsave`, {pf.get('image')} PNG ({pf.get('how')})", ""]
        for tool in ("tiler", "dzsave818", "dzsave"):
            if tool not in pf:
                continue
            x = pf.get(tool, {})
            L += [f"{TOOLS[tool]}:", "", "```"] + (x.get("dso", []) + [""] + x.get("symbol", [])[:15]
                                              if "error" not in x else [x["error"]]) + ["```", ""]
    if "profile" in res.get("serve", {}):
        x = res["serve"]["profile"]
        L += ["## Where the time goes: `tiler serve` under wrk (PNG tiles)", "", "```"] + x["dso"] + [""] + \
             x["symbol"][:15] + ["```", ""]
    if "profile_visible" in res.get("serve", {}):
        x = res["serve"]["profile_visible"]
        L += ["## Where the time goes: `tiler serve` under wrk (`/visible`)", "", "```"] + x["dso"] + [""] + \
             x["symbol"][:20] + ["```", ""]
    if res["targets"]:
        L += ["## Targets", "", "| target | values | ratio | result |", "|---|---|---|---|"]
        for name, val, r, ok in res["targets"]:
            L.append(f"| {name} | {val} | {'' if r is None else r} | {'info' if ok is None else 'PASS' if ok else 'MISS'} |")
        L.append("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small images, one round, 3 s wrk runs: a smoke run")
    ap.add_argument("--only", default="cut,floor,archive,scaling,serve,serve-archives,serve-sources,iiif,profile",
                    help="sections, comma separated (default all): cut,floor,archive,scaling,serve,serve-archives,serve-sources,"
                    "iiif,profile")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out"), help="working folder (default bench-out/)")
    ap.add_argument("--plot", help="where the scaling plot goes (default docs/scaling.png; OUT/scaling.png with --quick)")
    ap.add_argument("--tiler", help="use this tiler binary instead of building one")
    ap.add_argument("--rounds", type=int, help="rounds for cut and serve (default 2; 1 with --quick)")
    ap.add_argument("--max-point-seconds", type=float, default=1800,
                    help="skip a scaling point above 20k whose estimated time for all its cuts exceeds this (default 1800)")
    ap.add_argument("--cut-legs", default=",".join(f"{a}/{b}" for a, b in CUT_LEGS),
                    help="the cut section's legs in order, TOOL/FORMAT comma separated (default all)")
    ap.add_argument("--cut-big", default="", help="larger squares the cut section also cuts, one round each "
                    "(comma separated sides, e.g. 40000; default none: the scaling section's 40k point has them)")
    ap.add_argument("--cut-big-legs", default="tiler/png,dzsave818/png,tiler/jpeg,dzsave818/jpeg,tiler/webp,dzsave818/webp",
                    help="the legs of --cut-big, TOOL/FORMAT comma separated (default: tiler and dzsave 8.18, folders)")
    ap.add_argument("--iip-compression", default="jpeg", choices=["jpeg", "deflate"])
    ap.add_argument("--iip-procs", type=int, default=os.cpu_count() or 2, help="iipsrv processes (default nproc)")
    ap.add_argument("--server-cpus", help="run the servers under test on these CPUs only (a taskset list, e.g. 0-1; "
                    "default: any). tiler and the floor then run one event loop per CPU given; nginx keeps its one worker")
    ap.add_argument("--client-cpus", help="run wrk on these CPUs only (e.g. 2-3; default: any): apart from "
                    "--server-cpus, wrk's own CPU no longer caps the servers' req/s")
    args = ap.parse_args()
    for role in ("server", "client"):
        cpus = getattr(args, f"{role}_cpus")
        if cpus is not None:
            if not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", cpus):
                ap.error(f"--{role}-cpus {cpus!r}: a CPU list such as 0-1 or 0,2")
            allowed = os.sched_getaffinity(0)
            try:
                outside = cpu_list(cpus) - allowed
            except ValueError as e:
                ap.error(f"--{role}-cpus {cpus!r}: {e}")
            if outside:
                ap.error(f"--{role}-cpus {cpus!r}: CPU {min(outside)} is not one this machine lets the bench use "
                         f"({sorted(allowed)})")
            if not shutil.which("taskset"):
                ap.error(f"--{role}-cpus needs taskset (util-linux)")
            PINNING[role] = cpus
    args.cut_big = [int(x) for x in args.cut_big.split(",") if x.strip()]
    args.cut_big_legs = [x.strip() for x in args.cut_big_legs.split(",") if x.strip()]
    args.cut_legs = [tuple(x.strip().split("/")) for x in args.cut_legs.split(",") if x.strip()]
    for x in args.cut_big_legs + [a + "/" + b for a, b in args.cut_legs]:
        if tuple(x.split("/")) not in CUT_LEGS:
            ap.error(f"unknown cut leg '{x}': one of {', '.join(a + '/' + b for a, b in CUT_LEGS)}")
    q = args.quick
    args.cut_side = 4000 if q else 20000
    args.cut_rounds = 1 if q else 2
    args.scaling_sides = [1000, 2000, 4000] if q else [2000, 5000, 10000, 20000, 40000]
    args.strip_width = 1000 if q else 2000
    args.strip_heights = [2000, 4000, 8000] if q else [5000, 10000, 20000, 40000]
    args.serve_side = 4000 if q else 20000
    args.serve_seconds = 3 if q else 10
    args.serve_rounds = 1 if q else 2
    args.ttfa_runs = 3 if q else 5
    if args.rounds:
        args.cut_rounds = args.serve_rounds = args.rounds
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    # With profile, tiler serve is also perf-recorded under wrk, after its measured runs.
    args.profile_serve = "profile" in sections and perf_works()
    for s in sections:
        if s not in ("cut", "floor", "archive", "scaling", "serve", "serve-archives", "serve-sources", "iiif", "profile"):
            ap.error(f"unknown section '{s}'")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    if not args.plot:
        args.plot = os.path.join(out, "scaling.png") if q else os.path.join(ROOT, "docs", "scaling.png")
    # tiler is measured as a user gets it: no TILER_* tuning variables from the caller.
    scrubbed = sorted(k for k in os.environ if k.startswith("TILER_"))
    for k in scrubbed:
        del os.environ[k]
    if scrubbed:
        log(f"ignoring {', '.join(scrubbed)}: tiler runs with its defaults")
    t0 = time.time()
    res = {"command": "scripts/bench " + " ".join(sys.argv[1:]), "machine": machine_info(), "quick": q}
    if PINNING["server"] or PINNING["client"]:
        res["machine"]["pinning"] = dict(PINNING)
    log(f"machine: {res['machine']['nproc']} × {res['machine']['cpu']}, {res['machine']['memory_gb']} GB; "
        f"{res['machine']['uptime_start']}")
    t = Tools(args, out)
    if os.path.exists(t.trash):
        log("deleting the pyramids an interrupted run left in the trash (the first legs may pay for it: "
            "see Tools.discard)")
        t.empty_trash()
    t.build_tiler()
    if {"cut", "scaling", "profile"} & set(sections):
        t.setup_newest_vips()
        res["newest_vips"] = t.newest_info
    fns = {"cut": section_cut, "floor": section_floor, "archive": section_archive, "scaling": section_scaling,
           "serve": section_serve, "serve-archives": section_serve_archives, "serve-sources": section_serve_sources,
           "iiif": section_iiif, "profile": section_profile}
    # Scaling goes last: it is the longest and its 40k point is optional, so everything
    # else is on disk (results are saved after each section and scaling point) if a run
    # has to be stopped during it.
    order = [s for s in ("cut", "floor", "archive", "serve", "serve-archives", "serve-sources", "iiif", "profile", "scaling")
             if s in sections]
    res["sections"] = order

    def save():
        res["machine"]["load_end"] = os.getloadavg()
        res["machine"]["uptime_end"] = out_of(["uptime"])
        res["elapsed_s"] = time.time() - t0
        res["targets"] = targets(res)
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(out, "results.md"), "w") as f:
            f.write(report_md(res) + "\n")
    args.save = save
    try:
        for s in order:
            try:
                fns[s](t, res, args)
            except TilerError as e:
                log(f"section {s} failed: {e}")
                res[s] = {"error": str(e)}
            save()
    finally:
        t.empty_trash()
    md = report_md(res)
    print(md)
    print()
    for name, val, r, ok in res["targets"]:
        print(f"{'info' if ok is None else 'PASS' if ok else 'MISS'}  {name}: {val}" + ("" if r is None else f" (ratio {r})"))
    if t.tiler_error or res.get("serve", {}).get("tiler_error"):
        print(f"\ntiler legs FAILED: {t.tiler_error or res['serve']['tiler_error']}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
