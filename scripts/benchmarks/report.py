"""OUT/results.md: a header on the machine and the run, each benchmark's tables in a
fixed order, then the targets; and the targets themselves, each a ratio from this run.
"""

from . import archive, cut, floor, iiif, profile, scaling, serve, serve_archives, serve_sources

# The order of the tables in results.md, and of the targets.
REPORTED = (cut, scaling, floor, serve, archive, serve_archives, iiif, profile)
TARGETED = (cut, scaling, archive, serve, serve_archives, serve_sources, iiif)


def targets(res):
    """Each target is a ratio from this one run: (name, value text, ratio, pass)."""
    tg = []
    for benchmark in TARGETED:
        benchmark.targets(res, tg)
    return tg


def report_md(res):
    m = res["machine"]
    L = [f"# tiler benchmark results, {m['date']}", "",
         f"Machine: {m['nproc']} × {m['cpu']}, {m['memory_gb']} GB, Linux {m['kernel']}. "
         f"Load before: {' '.join(f'{x:.2f}' for x in m['load_start'])}; after: "
         f"{' '.join(f'{x:.2f}' for x in m.get('load_end', []))}.",
         f"tiler {m['branch']}@{m['git']}, {m['swift']}; {m['vips']}; {m['nginx']}; {m['wrk']}; iipsrv {m['iipsrv']}."
         + (f" Newest libvips: {'.'.join(map(str, res['newest_vips']['version']))} (pyvips "
            f"{res['newest_vips']['pyvips']}, pyvips-binary {res['newest_vips']['pyvips_binary']})."
            if res.get("newest_vips") else ""),
         f"Command: `{res['command']}` ({res['elapsed_s']:.0f} s).", ""]
    for benchmark in REPORTED:
        L += benchmark.report(res)
    if res["targets"]:
        L += ["## Targets", "", "| target | values | ratio | result |", "|---|---|---|---|"]
        for name, val, r, ok in res["targets"]:
            L.append(f"| {name} | {val} | {'' if r is None else r} | {'info' if ok is None else 'PASS' if ok else 'MISS'} |")
        L.append("")
    return "\n".join(L)
