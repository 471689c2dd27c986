"""scaling: tiler cut against both dzsaves (PNG) on squares of 2k..40k px and on a tall
strip of fixed width, drawn into docs/scaling.png; at 40k also JPEG and WebP against
dzsave 8.18. A point above 20k is skipped when the disk or --max-point-seconds would not
allow it.
"""

import os

from .cut import against_newest, cut_rows
from .harness import ROOT, TOOLS, free_disk, log

SCALING_TOOLS = ("tiler", "dzsave818", "dzsave")
# At the largest square the JPEG and WebP legs are timed too, against dzsave 8.18.
BIG_FORMAT_LEGS = [("tiler", "jpeg"), ("dzsave818", "jpeg"), ("dzsave818", "webp"), ("tiler", "webp")]


def measure(t, res, args):
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


def targets(res, tg):
    """At the largest squares, the targets against dzsave 8.18; a skipped point is a MISS."""
    big = [p for p in res.get("scaling", {}).get("square", []) if "formats" in p]
    for p in big:
        legs = dict(p["formats"], **{f"{tool}/png": p[tool] for tool in SCALING_TOOLS if tool in p})
        against_newest(tg, lambda k: legs.get(k), f" at {p['width']}x{p['height']}")
    for sk in res.get("scaling", {}).get("skipped", []):
        tg.append((f"cut targets at {sk['side']}x{sk['side']}", "skipped: " + sk["reason"], None, False))


def report(res):
    """Every point's wall time and peak RSS, and the larger squares' format tables."""
    L = []
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
    return L
