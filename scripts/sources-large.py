#!/usr/bin/env python3
"""tiler serve --sources on large, slow sources: what the first request costs and what
the following ones cost, and 64 clients at once on the deepest level.

For each source kind (a plain JPEG, a strip TIFF, a tiled pyramidal TIFF) of SIDE x SIDE
pixels (default 40000), a fresh `tiler serve EMPTY --sources DIR` is started and asked,
one at a time: a full-resolution tile in the middle (the first request: it opens and,
for a JPEG or strip TIFF, decodes the file), another full-resolution tile, the same tile
again (the response cache), a level-0 tile and the thumbnail. Then 64 clients at once ask
for 64 different deepest-level tiles, and the server's peak RSS (VmHWM) is read from
/proc. Prints a Markdown table and writes OUT/sources-large.json.

Not part of the tests. Needs the vips command and a tiler binary (default: a release
build, `swift build -c release`). Heavy: about 10 GB of disk for the images and libvips'
temporary files at 40000², and minutes per source on 2 cores.

    scripts/sources-large.py [--side 40000] [--picture JPEG] [--tiler PATH] [--out bench-out/] [--kinds jpeg,strip,pyramid]
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from benchmarks.harness import vm_hwm_mb  # noqa: E402


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=3600):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, len(body), time.perf_counter() - t0


def make_sources(side, d, kinds, picture=None):
    """The same picture (three bands of Perlin noise, or `picture`, a JPEG of SIDE x SIDE)
    as a JPEG Q85, a strip TIFF (JPEG compressed, no tiles, no pyramid) and a tiled
    pyramidal TIFF."""
    os.makedirs(d, exist_ok=True)
    base = picture or os.path.join(d, f"base-{side}.v")
    files = {"jpeg": os.path.join(d, f"plain-{side}.jpg"), "strip": os.path.join(d, f"strip-{side}.tif"),
             "pyramid": os.path.join(d, f"pyramid-{side}.tif")}
    if not all(os.path.exists(files[k]) for k in kinds):
        if not os.path.exists(base):
            print(f"making a {side}x{side} picture", file=sys.stderr)
            bands = []
            for seed, cell in ((1, 64), (2, 256), (3, 1024)):
                b = os.path.join(d, f"b{seed}.v")
                run(["vips", "perlin", b, str(side), str(side), "--uchar", "--cell-size", str(cell), "--seed", str(seed)])
                bands.append(b)
            run(["vips", "bandjoin", " ".join(bands), base])
            for b in bands:
                os.unlink(b)
        for kind in kinds:
            if os.path.exists(files[kind]):
                continue
            tmp = files[kind] + ".tmp" + os.path.splitext(files[kind])[1]
            print(f"making the {kind} source", file=sys.stderr)
            if kind == "jpeg" and picture:
                os.link(picture, tmp) if os.stat(picture).st_dev == os.stat(d).st_dev else shutil.copyfile(picture, tmp)
            elif kind == "jpeg":
                run(["vips", "jpegsave", base, tmp, "--Q", "85"])
            elif kind == "strip":
                run(["vips", "tiffsave", base, tmp, "--compression", "jpeg", "--Q", "85"])
            else:
                run(["vips", "tiffsave", base, tmp, "--tile", "--pyramid", "--compression", "jpeg", "--Q", "85",
                     "--tile-width", "256", "--tile-height", "256"])
            os.rename(tmp, files[kind])
    return files


def measure(tiler, kind, path, side, work):
    sdir = os.path.join(work, kind)
    shutil.rmtree(sdir, ignore_errors=True)
    sources, root = os.path.join(sdir, "sources"), os.path.join(sdir, "root")
    os.makedirs(sources)
    os.makedirs(root)
    name = os.path.basename(path)
    os.link(path, os.path.join(sources, name))
    image_id = os.path.splitext(name)[0]
    port = free_port()
    env = dict(os.environ, TMPDIR=sdir)
    t0 = time.perf_counter()
    pr = subprocess.Popen([tiler, "serve", root, "--sources", sources, "--port", str(port)], env=env,
                          stdout=subprocess.DEVNULL, stderr=open(os.path.join(sdir, "stderr"), "w"))
    try:
        while True:
            try:
                if get(port, f"/images/{image_id}", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if pr.poll() is not None:
                raise SystemExit(f"tiler exited: {open(os.path.join(sdir, 'stderr')).read()[-500:]}")
            time.sleep(0.05)
        out = {"kind": kind, "side": side, "file_mb": round(os.path.getsize(path) / 1e6, 1),
               "listed_after_s": round(time.perf_counter() - t0, 2)}
        m = json.loads(urllib_get(port, f"/images/{image_id}"))
        top = m["maxLevel"]
        cols, rows = m["levels"][-1]["columns"], m["levels"][-1]["rows"]
        steps = [("first full-resolution tile", f"/images/{image_id}/tiles/{top}/{rows // 2}/{cols // 2}.png"),
                 ("another full-resolution tile", f"/images/{image_id}/tiles/{top}/{rows - 1}/{cols - 1}.png"),
                 ("the same tile again", f"/images/{image_id}/tiles/{top}/{rows - 1}/{cols - 1}.png"),
                 ("a level-0 tile", f"/images/{image_id}/tiles/0/0/0.png"),
                 ("the thumbnail", f"/images/{image_id}/thumbnail.png")]
        out["steps"] = []
        for label, p in steps:
            st, n, dt = get(port, p)
            out["steps"].append({"what": label, "status": st, "seconds": round(dt, 3), "bytes": n})
            print(f"  {kind}: {label}: {st} in {dt:.3f} s", file=sys.stderr)
        # 64 clients at once, 64 different deepest-level tiles.
        results, lock = [], threading.Lock()

        def client(i):
            r, c = divmod(i * 7919 % (rows * cols), cols)
            st, n, dt = get(port, f"/images/{image_id}/tiles/{top}/{r}/{c}.png")
            with lock:
                results.append((st, dt))
        t1 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        lat = sorted(dt for _, dt in results)
        out["sixty_four"] = {"ok": sum(1 for st, _ in results if st == 200), "wall_s": round(time.perf_counter() - t1, 3),
                             "p50_s": round(lat[len(lat) // 2], 3), "max_s": round(lat[-1], 3)}
        out["peak_rss_mb"] = vm_hwm_mb(pr.pid)
        print(f"  {kind}: 64 clients: {out['sixty_four']}, peak RSS {out['peak_rss_mb']} MB", file=sys.stderr)
        return out
    finally:
        pr.terminate()
        pr.wait()
        shutil.rmtree(sdir, ignore_errors=True)


def urllib_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    body = c.getresponse().read()
    c.close()
    return body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--side", type=int, default=40000)
    ap.add_argument("--tiler")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out"))
    ap.add_argument("--kinds", default="jpeg,strip,pyramid")
    ap.add_argument("--picture", help="a SIDE x SIDE JPEG to use as the plain JPEG and to make the TIFFs from "
                                      "(default: made from Perlin noise), e.g. bench-out/images/noise-msi-40000x40000.jpg")
    args = ap.parse_args()
    tiler = args.tiler
    if not tiler:
        subprocess.run(["swift", "build", "-c", "release", "--product", "tiler"], cwd=ROOT, check=True)
        tiler = os.path.join(subprocess.check_output(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT,
                                                     text=True).strip(), "tiler")
    kinds = [k for k in args.kinds.split(",") if k]
    out = os.path.abspath(args.out)
    files = make_sources(args.side, os.path.join(out, "sources-large"), kinds, args.picture)
    load = os.getloadavg()
    results = [measure(tiler, k, files[k], args.side, os.path.join(out, "sources-large-run")) for k in kinds]
    report = {"command": "scripts/sources-large.py " + " ".join(sys.argv[1:]), "nproc": os.cpu_count(),
              "load_start": load, "load_end": os.getloadavg(), "results": results}
    with open(os.path.join(out, "sources-large.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"| source ({args.side}²) | " + " | ".join(s["what"] for s in results[0]["steps"]) + " | 64 clients at once | peak RSS |")
    print("| --- " * (len(results[0]["steps"]) + 3) + "|")
    for r in results:
        cells = [f"{s['seconds']:.3f} s" for s in r["steps"]]
        s64 = r["sixty_four"]
        print(f"| {r['kind']} ({r['file_mb']} MB) | " + " | ".join(cells) +
              f" | {s64['ok']}/64 in {s64['wall_s']:.1f} s | {r['peak_rss_mb']} MB |")
    print(f"\nload average {load[0]:.1f} at the start, {report['load_end'][0]:.1f} at the end, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
