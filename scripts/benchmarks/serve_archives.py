"""serve-archives: random tiles of one cut pyramid (JPEG Q85) served from its folder and
from its archive without the response cache, and from the folder and from the archive
in the local S3 server (moto) with a warm cache, alternating; the cold-cache latency of
a fresh server reading from S3.
"""

import os
import random
import subprocess
import sys
import time

from .harness import (IMAGE_ID, TilerError, clear, free_port, http_get, levels_for, log, median_legs, pinned, run,
                      stop, tile_count, wait_http, wrk)
from .loads import cold_run, lua_tiles
from .peers import start_s3_server

def measure(t, res, args):
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
            out["legs"][name] = median_legs(rs)
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


def targets(res, tg):
    """The archive against the folder without the cache, and S3 warm against the folder warm."""
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


def report(res):
    """Each ROOT's req/s and latency, and the cold pass from S3."""
    L = []
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
    return L
