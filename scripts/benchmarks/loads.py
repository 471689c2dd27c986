"""What the client asks for: wrk's Lua scripts (random tiles over a whole pyramid,
random viewports of `/visible`), and a cold pass that asks for each of a list of paths
once, timing every answer.
"""

import http.client
import threading
import time


def lua_threads(seq, seed):
    """The part every wrk script shares: each thread numbered in setup(), and in init()
    a loop that fills its own `seq` requests, seeded by its number."""
    return f"""local reqs, n, i = {{}}, {seq}, 0
local counter = 0
function setup(thread) counter = counter + 1; thread:set("tid", counter) end
function init(args)
  math.randomseed(tid * {seed} + os.time())
  for k = 1, n do
"""


LUA_REQUEST = "function request() i = i % n + 1; return reqs[i] end\n"


def lua_tiles(path, levels, url_fmt, url_args, level_offset=0, seq=65536, pause_ms=None):
    """A wrk script requesting tiles uniformly at random over all tiles of the pyramid.
    Each thread draws its own sequence of `seq` random tiles in init() (so the per-request
    cost in wrk is a table lookup) and cycles through it; done() prints JSON. With
    `pause_ms`, each connection waits a random time (exponential, that mean) between an
    answer and its next request: an offered rate of about connections × 1000 / pause_ms
    requests a second, for latency at a given load rather than at saturation."""
    cum, acc = [], 0
    for l in levels:
        acc += l["columns"] * l["rows"]
        cum.append(f'{{{l["level"] + level_offset},{l["columns"]},{acc}}}')
    body = f"""
local levels = {{{",".join(cum)}}}
local total = {acc}
local fmt = "{url_fmt}"
""" + lua_threads(seq, 7919) + f"""    local t = math.random(0, total - 1)
    local prev = 0
    for _, l in ipairs(levels) do
      if t < l[3] then
        local j = t - prev
        local row, col = math.floor(j / l[2]), j % l[2]
        reqs[k] = wrk.format("GET", string.format(fmt, {url_args}))
        break
      end
      prev = l[3]
    end
  end
end
""" + LUA_REQUEST + ("" if pause_ms is None else f"""
function delay() return math.floor(-{pause_ms} * math.log(1 - math.random())) end
""") + LUA_DONE
    with open(path, "w") as f:
        f.write(body)


LUA_DONE = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"mean_us":%.1f,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.mean, latency.max))
end
"""


def lua_visible(path, image_id, w, h, max_level, seq=16384):
    """Random viewports: a 1920x1080 display at a random zoom, log-uniform between the
    image's width filling the display and 1:1, centred anywhere on the image, margin=1."""
    body = f"""
local W, H, L = {w}, {h}, {max_level}
""" + lua_threads(seq, 104729) + f"""    local s = math.min(1, 1920 / W) ^ math.random()
    local vw, vh = 1920 / s, 1080 / s
    local x = math.random() * W - vw / 2
    local y = math.random() * H - vh / 2
    reqs[k] = wrk.format("GET", string.format(
      "/images/{image_id}/visible?x=%.1f&y=%.1f&width=%.1f&height=%.1f&scale=%.6f&margin=1", x, y, vw, vh, s))
  end
end
""" + LUA_REQUEST + LUA_DONE
    with open(path, "w") as f:
        f.write(body)


def cold_run(port, paths, conns=32):
    """Requests each path once, `conns` at a time on keep-alive connections, and times
    every answer: what clients of a freshly started server see."""
    lat, errors, failed, lock = [], [0], [], threading.Lock()
    it = iter(paths)

    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                path = next(it, None)
            if path is None:
                break
            t0 = time.perf_counter()
            try:
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                ok = r.status == 200
            except OSError:
                ok = False
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if not ok:
                    errors[0] += 1
                    failed.append(path)
        c.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(conns)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    lat.sort()
    def pct(q):
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 2)
    return {"requests": len(lat), "rps": round(len(lat) / wall), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "max_ms": round(lat[-1] * 1000, 2), "errors": errors[0], "failed": failed}
