"""cut: tiler cut against vips dzsave (8.18 and 8.14) on one noise JPEG, every format and
layout in --cut-legs, alternating over rounds; then the larger squares of --cut-big.
Also the cut table's rows and the targets against dzsave, which scaling uses too.
"""

import os

from .harness import ARCHIVE, IMAGE_ID, JPEG_Q, TOOLS, WEBP_Q, log
from .tools import summarise

CUT_LEGS = [("tiler", "png"), ("dzsave818", "png"), ("dzsave", "png"), ("dzsave", "png-c1"),
            ("tiler", "jpeg"), ("dzsave818", "jpeg"), ("dzsave", "jpeg"),
            ("tiler", "webp"), ("dzsave818", "webp"),
            ("tiler", "png-archive"), ("dzsave818", "png-archive"), ("tiler", "jpeg-archive"),
            ("dzsave818", "jpeg-archive"), ("tiler", "webp-archive"), ("dzsave818", "webp-archive")]


def measure(t, res, args):
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


def ratio(tg, a, b, key, limit, label, within=False):
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


def against_newest(tg, get, where):
    """The issue's targets against dzsave 8.18, for one image size."""
    tp, dp = get("tiler/png"), get("dzsave818/png")
    ratio(tg, tp, dp, "wall", 0.5, f"cut PNG wall <= 0.5x dzsave 8.18{where}")
    ratio(tg, tp, dp, "bytes", 1.0, f"cut PNG bytes <= dzsave 8.18{where}")
    ratio(tg, tp, dp, "rss_mb", 1.0, f"cut PNG peak RSS <= dzsave 8.18{where}")
    for fmt in ("jpeg", "webp"):
        a, b = get(f"tiler/{fmt}"), get(f"dzsave818/{fmt}")
        ratio(tg, a, b, "wall", 0.5, f"cut {fmt.upper()} wall <= 0.5x dzsave 8.18{where}")
        ratio(tg, a, b, "bytes", 0.05, f"cut {fmt.upper()} bytes within 5% of dzsave 8.18{where}", within=True)
    a, b = get("tiler/jpeg"), get("dzsave818/jpeg")
    if a and b and "jpeg_tables" in a and "jpeg_tables" in b:
        same = a["jpeg_tables"] == b["jpeg_tables"]
        tg.append((f"cut JPEG: dzsave 8.18's quantisation tables and chroma subsampling{where}",
                   f"sampling {','.join(a['jpeg_tables']['sampling'])} vs {','.join(b['jpeg_tables']['sampling'])}, "
                   f"DQT {'equal' if same else 'different'}", None, same))


def targets(res, tg):
    """Against dzsave 8.18 (folders, the larger squares, archives), the archive cut
    against the folder cut, and against Debian's dzsave 8.14."""
    if "cut" in res and "legs" in res["cut"]:
        def leg(name):
            return res["cut"]["legs"].get(name, {})
        against_newest(tg, lambda k: leg(k) or None, "")
        for fmt in ("png", "jpeg", "webp"):
            a, f = leg(f"tiler/{fmt}{ARCHIVE}"), leg(f"tiler/{fmt}")
            if a and f:
                ratio(tg, a, f, "wall", 1.1, f"cut --archive {fmt.upper()} wall <= 1.1x folder cut (cut section)")
        for b in res["cut"].get("big", []):
            against_newest(tg, lambda k: b["legs"].get(k), f" at {b['image']}")
        # One file per pyramid: tiler cut --archive (PMTiles) against dzsave container=zip.
        against_newest(tg, lambda k: leg(k + ARCHIVE) or None, ", archives (PMTiles vs zip)")
        # The targets against Debian's libvips 8.14, as before.
        tp, dp, tj, dj = (leg(k) or None for k in ("tiler/png", "dzsave/png", "tiler/jpeg", "dzsave/jpeg"))
        ratio(tg, tp, dp, "wall", 0.5, "cut PNG wall <= 0.5x dzsave 8.14 default")
        ratio(tg, tp, dp, "bytes", 1.0, "cut PNG bytes <= dzsave 8.14 default")
        ratio(tg, tp, dp, "rss_mb", 1.0, "cut PNG peak RSS <= dzsave 8.14 default")
        ratio(tg, tj, dj, "wall", 0.8, "cut JPEG wall <= 0.8x dzsave 8.14")


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


def report(res):
    """The cut section's tables: the legs at --cut-side, then each larger square."""
    L = []
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
    return L
