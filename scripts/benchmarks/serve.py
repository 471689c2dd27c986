"""serve: wrk, uniformly random tiles, against tiler serve, nginx (static files), the
floor (scripts/floor-server.c: tiles in memory, one read and one write per request, the
least any server does) and iipsrv (FastCGI behind nginx, DeepZoom on a pyramidal TIFF);
tiler's visible endpoint; time from start to the first answered request; each server's
and wrk's CPU per response, and the req/s ceiling those allow.
"""

import json
import math
import os
import random
import statistics
import subprocess
import time

from .harness import (IMAGE_ID, TilerError, check_alive, clear, cpu_list, free_port, http_get, levels_for, log,
                      median_legs, median_or_none, pinned, stop, tile_count, tiler_serve_log, vm_hwm_mb, wait_http,
                      wrk)
from .loads import lua_tiles, lua_visible
from .peers import NGINX_CONF, start_floor_server
from .profile import profile_server

SERVE_FORMATS = (("png", ".png"), ("jpeg", ".jpg"))


def measure(t, res, args):
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
            out["legs"][key] = median_legs(
                rs, cpu_us_per_response=median_or_none([x["cpu_us_per_response"] for x in rs]),
                wrk_cpu_us_per_response=median_or_none([x["wrk_cpu_us_per_response"] for x in rs]),
                bytes_per_response=rs[0]["bytes_per_response"])
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


def targets(res, tg):
    """Against nginx (req/s and p99) and iipsrv, the floor for reading them, and `/visible`."""
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


def report(res):
    """The servers' table, how its CPU columns are read, and the start-up time."""
    L = []
    m = res["machine"]
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
    return L
