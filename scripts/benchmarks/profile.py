"""profile: perf (cpu-clock sampling) of tiler cut and both dzsaves on a 4000x4000 image,
and (from the serve section) of tiler serve under wrk after its measured runs; skipped
without perf.
"""

import os
import re
import signal
import subprocess
import time

from .harness import TOOLS, log, out_of, run, wrk

def perf_top(data, sort, n=15):
    rep = out_of(["perf", "report", "-i", data, "--no-children", "-g", "none", "--sort", sort, "--stdio",
                  "--percent-limit", "0.7"])
    rows = [l.strip() for l in rep.splitlines() if l.strip() and not l.startswith("#") and "%" in l[:10]]
    rows = [re.sub(r"(\s+-)+$", "", re.sub(r"\s+", " ", l)) for l in rows[:n]]
    # Swift symbols are mangled; swift demangle (from the toolchain) makes them readable.
    p = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(rows),
                       text=True, capture_output=True)
    return p.stdout.splitlines() if p.returncode == 0 and p.stdout.strip() else rows


def profile_server(pid, port, script, sdir):
    data = os.path.join(sdir, "serve.perf")
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-p", str(pid), "-o", data],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    wrk(port, script, 8)
    rec.send_signal(signal.SIGINT)
    rec.wait()
    return {"dso": perf_top(data, "dso"), "symbol": perf_top(data, "dso,symbol", 25)}


def perf_works():
    try:
        return subprocess.run(["perf", "stat", "-e", "cpu-clock", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def measure(t, res, args):
    if not perf_works():
        res["profile"] = {"error": "perf is not installed or cannot sample here (apt-get install linux-perf)"}
        return
    side = 4000
    src = t.image(side, side)
    out = {"image": f"{side}x{side}", "format": "png", "how": "perf record -e cpu-clock -F 999 -g"}
    for tool in ("tiler", "dzsave818", "dzsave"):
        if tool == "tiler" and t.tiler_error:
            out[tool] = {"error": t.tiler_error}
            continue
        if tool == "dzsave818" and not t.newest:
            continue
        dest = os.path.join(t.out, "profile-" + tool)
        t.discard(dest)
        os.makedirs(dest)
        data = os.path.join(t.out, f"cut-{tool}.perf")
        cmd = t.cut_cmd(tool, "png", src, dest)
        p = run(["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-o", data, "--"] + cmd,
                check=False, capture_output=True)
        t.discard(dest)
        if p.returncode != 0:
            out[tool] = {"error": p.stderr[-300:]}
            continue
        out[tool] = {"dso": perf_top(data, "dso"), "symbol": perf_top(data, "dso,symbol", 25)}
        log(f"profile {tool}:\n    " + "\n    ".join(out[tool]["dso"][:8]))
    res["profile"] = out


def report(res):
    """The cut's profiles, then tiler serve's (PNG tiles, `/visible`)."""
    L = []
    if "profile" in res and "error" in res["profile"]:
        L += [f"Profile: {res['profile']['error']}", ""]
    elif "profile" in res:
        pf = res["profile"]
        L += [f"## Where the time goes: `tiler cut` and `vips dzsave`, {pf.get('image')} PNG ({pf.get('how')})", ""]
        for tool in ("tiler", "dzsave818", "dzsave"):
            if tool not in pf:
                continue
            x = pf.get(tool, {})
            L += [f"{TOOLS[tool]}:", "", "```"] + (x.get("dso", []) + [""] + x.get("symbol", [])[:15]
                                              if "error" not in x else [x["error"]]) + ["```", ""]
    if "profile" in res.get("serve", {}):
        x = res["serve"]["profile"]
        L += ["## Where the time goes: `tiler serve` under wrk (PNG tiles)", "", "```"] + x["dso"] + [""] + \
             x["symbol"][:15] + ["```", ""]
    if "profile_visible" in res.get("serve", {}):
        x = res["serve"]["profile_visible"]
        L += ["## Where the time goes: `tiler serve` under wrk (`/visible`)", "", "```"] + x["dso"] + [""] + \
             x["symbol"][:20] + ["```", ""]
    return L
