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
import json
import os
import re
import shutil
import sys
import time

from . import archive, cut, floor, iiif, profile, scaling, serve, serve_archives, serve_sources
from .harness import PINNING, ROOT, TilerError, cpu_list, log, machine_info, out_of
from .report import report_md, targets
from .tools import Tools

# Each section's name on the command line (--only) and its module.
SECTIONS = {"cut": cut, "floor": floor, "archive": archive, "scaling": scaling, "serve": serve,
            "serve-archives": serve_archives, "serve-sources": serve_sources, "iiif": iiif, "profile": profile}


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
    ap.add_argument("--cut-legs", default=",".join(f"{a}/{b}" for a, b in cut.CUT_LEGS),
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
        if tuple(x.split("/")) not in cut.CUT_LEGS:
            ap.error(f"unknown cut leg '{x}': one of {', '.join(a + '/' + b for a, b in cut.CUT_LEGS)}")
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
    args.profile_serve = "profile" in sections and profile.perf_works()
    for s in sections:
        if s not in SECTIONS:
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
                SECTIONS[s].measure(t, res, args)
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
