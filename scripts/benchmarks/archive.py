"""archive: tiler cut --archive (one PMTiles file) against the folder cut of the same
image, PNG and JPEG Q85, alternating over rounds; then tiler pack and unpack.
"""

import os
import shutil
import statistics

from .cut import fmt_cut_row
from .harness import IMAGE_ID, TilerError, log, run, timed, tree_size

def measure(t, res, args):
    """cut --archive against the folder cut: same image, same tiles, alternating."""
    if t.tiler_error:
        raise TilerError(t.tiler_error)
    side = args.cut_side
    src = t.image(side, side)
    legs = [("folder", "png"), ("archive", "png"), ("folder", "jpeg"), ("archive", "jpeg")]
    rounds = {f"{a}/{b}": [] for a, b in legs}
    work = os.path.join(t.out, "archive-cut")
    for r in range(args.cut_rounds):
        order = legs if r % 2 == 0 else list(reversed(legs))
        log(f"archive round {r + 1}/{args.cut_rounds} ({side}x{side})")
        for layout, fmt in order:
            dest = os.path.join(work, f"{r}-{layout}-{fmt}")
            t.discard(dest)
            os.makedirs(dest)
            run(["sync"])
            cmd = t.cut_cmd("tiler", fmt, src, dest) + (["--archive"] if layout == "archive" else [])
            m = timed(cmd, t.out)
            m["bytes"], m["files"] = tree_size(dest)
            if layout == "archive" and m["files"] != 1:
                raise TilerError(f"cut --archive left {m['files']} files in {dest}")
            log(f"  {layout:7} {fmt:4}: {m['wall']:.2f} s wall, {m['cpu']:.2f} s CPU, {m['rss_mb']:.0f} MB RSS, "
                f"{m['bytes'] / 1e6:.1f} MB in {m['files']} files")
            rounds[f"{layout}/{fmt}"].append(m)
    out = {"image": f"{side}x{side}", "legs": {}}
    for k, v in rounds.items():
        out["legs"][k] = {key: statistics.median(x[key] for x in v) for key in ("wall", "cpu", "rss_mb")}
        out["legs"][k].update({"bytes": v[-1]["bytes"], "files": v[-1]["files"], "rounds": v})
    # pack and unpack of the last round's PNG pyramid, each into a fresh root.
    last = args.cut_rounds - 1
    folder = os.path.join(work, f"{last}-folder-png", IMAGE_ID)
    m = timed([t.tiler, "pack", folder, "--force"], t.out)
    out["pack"] = m
    unpack_root = os.path.join(work, "unpack")
    t.discard(unpack_root)
    os.makedirs(unpack_root)
    shutil.copy(os.path.join(work, f"{last}-archive-png", IMAGE_ID + ".pmtiles"), unpack_root)
    run(["sync"])
    out["unpack"] = timed([t.tiler, "unpack", os.path.join(unpack_root, IMAGE_ID + ".pmtiles")], t.out)
    log(f"  pack {out['pack']['wall']:.2f} s, unpack {out['unpack']['wall']:.2f} s")
    t.discard(work)
    res["archive"] = out


def targets(res, tg):
    """The archive cut's wall time within 1.1x the folder cut's."""
    if "archive" in res and "legs" in res["archive"]:
        lg = res["archive"]["legs"]
        for fmt in ("png", "jpeg"):
            a, f = lg[f"archive/{fmt}"], lg[f"folder/{fmt}"]
            r = a["wall"] / f["wall"]
            tg.append((f"cut --archive {fmt.upper()} wall <= 1.1x folder cut", f"{a['wall']:.2f} vs {f['wall']:.2f} s",
                       round(r, 3), r <= 1.1))
    elif "archive" in res:
        tg.append(("cut --archive wall <= 1.1x folder cut", "error: " + res["archive"].get("error", "not run"), None, False))


def report(res):
    """The archive against the folder, and pack and unpack."""
    L = []
    if "archive" in res and "legs" in res["archive"]:
        a = res["archive"]
        L += [f"## Archive vs folder, {a['image']} noise JPEG, median of rounds", "",
              "| leg | wall s | CPU s | peak RSS MB | MB written | files | rounds |", "|---|---|---|---|---|---|---|"]
        for fmt, label in (("png", "PNG"), ("jpeg", "JPEG Q85")):
            f, x = a["legs"][f"folder/{fmt}"], a["legs"][f"archive/{fmt}"]
            L.append(fmt_cut_row(f"tiler cut, {label}, folder", f))
            L.append(fmt_cut_row(f"tiler cut --archive, {label}", x, [("folder", f)]))
        L += ["", f"tiler pack (PNG folder → archive): {a['pack']['wall']:.2f} s wall, {a['pack']['rss_mb']:.0f} MB RSS; "
              f"tiler unpack (archive → folder): {a['unpack']['wall']:.2f} s wall, {a['unpack']['rss_mb']:.0f} MB RSS.", ""]
    return L
