"""iiif: IIIF drawings (regions and sizes that are no stored tile) against iipsrv, at equal
resources (issue 36): an 8000x6000 image, tiler's JPEG Q90 pyramid against a pyramidal
JPEG Q90 TIFF, each server pinned to one core and the client to another; median latency
over distinct regions and sizes one at a time, then distinct random ones at 8
connections (req/s, p99).
"""

import http.client
import os
import random
import shutil
import statistics
import subprocess
import time

from .harness import (PINNING, TilerError, check_alive, clear, cpu_list, free_port, http_get, log, run, stop,
                      vm_hwm_mb, wait_http)
from .loads import cold_run
from .peers import start_iipsrv

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


def measure(t, res, args):
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


def targets(res, tg):
    """Regions and sizes one at a time, and random ones at 8 connections, against iipsrv."""
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


def report(res):
    """Latency one at a time and figures under load, tiler against iipsrv."""
    L = []
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
    return L
