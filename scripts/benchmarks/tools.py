"""The cutting tools under test: tiler (built, or given with --tiler), Debian's
`vips dzsave` (libvips 8.14) and dzsave of the newest libvips (pyvips-binary from PyPI);
the noise images they cut, and one timed, checked cut (a leg).
"""

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from .harness import (ARCHIVE, EXTENSIONS, IMAGE_ID, JPEG_Q, ROOT, WEBP_Q, TilerError, clear, levels_for, log,
                      out_of, run, tile_count, timed, tree_size)

NEWEST_VIPS = (8, 18)


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
