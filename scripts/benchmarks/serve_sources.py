"""serve-sources: tiler serve --sources against iipsrv on the same pyramidal TIFF, both
answering DeepZoom JPEG Q85 tiles: cold (fresh servers, each tile once), warm (wrk
rounds), tiler paced to 3x iipsrv's rate, and tiler with caches too small to hold the
pyramid.
"""

import math
import os
import random
import shutil
import statistics
import subprocess

from .harness import (TilerError, clear, free_port, http_get, levels_for, log, median_legs, pinned, stop, vm_hwm_mb,
                      wait_http, wrk)
from .loads import cold_run, lua_tiles
from .peers import start_iipsrv

def measure(t, res, args):
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
            out["legs"][name] = median_legs(rs)
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


def targets(res, tg):
    """Against iipsrv: req/s, p99 at 3x its rate, and the small caches (information)."""
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
