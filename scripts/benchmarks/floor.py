"""floor: each piece of a cut alone on the cut section's image (Bench/'s cut-floor): the
JPEG decode, the 2x2 shrinks, the encoding of every tile per format (and with libspng
and libdeflate), the creation of every file; and the shortest cut those allow here.
"""

import json
import os
import subprocess

from .harness import JPEG_Q, ROOT, WEBP_Q, TilerError, log, run

def measure(t, res, args):
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


def report(res):
    """Each piece's time, and each cut's wall time against the floor."""
    L = []
    m = res["machine"]
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
    return L
