#!/usr/bin/env python3
"""Storage faults of a `tiler serve` over archives, measured: what clients get and how
soon. Used for docs/reliability.md's rows on archives and object storage.

    scripts/storage-faults.py TILER [WORK]

WORK (default bench-out/storage-faults) holds a 4000 x 3000 sample pyramid, cut and
packed with the binary itself. Runs, each with its own server on a free port:
  stopped   s3:// ROOT; storage stopped (connections refused): an uncached tile, another
            one, a cached tile, /healthz; storage started: time until a tile is served
  hung      s3:// ROOT, --storage-timeout 2: storage holds every request for 1000 s: the
            first uncached tile, the next ones, a cached tile; then storage answers again:
            time until a tile is served
  replaced  the archive replaced (rename, new upload) while 4 clients read random tiles,
            local and s3://: answers by status, and answers whose bytes are neither version
            or whose ETag came with other bytes before
  damaged   a good archive and a copy of it truncated to half: statuses of both, and the
            log line
Needs moto (scripts/install-deps test) for the s3:// runs.
"""
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get(port, path, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    dt = time.perf_counter() - t0
    c.close()
    return r.status, body, dt, dict(r.getheaders())


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tiler, root, env, *flags):
    port = free_port()
    log = open(os.path.join(WORK, f"serve-{port}.log"), "w+")
    p = subprocess.Popen([tiler, "serve", root, "--port", str(port), *flags], env=env, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if get(port, "/healthz", timeout=2)[0] == 200:
                return p, port, log
        except OSError:
            time.sleep(0.05)
    raise SystemExit("tiler serve did not answer")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(30)


class Storage:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "s3-test-server"), "--bucket", "tiles"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.info = json.loads(self.p.stdout.readline())
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID=self.info["access_key_id"],
                        AWS_SECRET_ACCESS_KEY=self.info["secret_access_key"], AWS_REGION=self.info["region"],
                        AWS_ENDPOINT_URL=self.info["endpoint"])

    def command(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def upload(self, path, key):
        subprocess.run([sys.executable, "-c", "import boto3,sys; boto3.client('s3').upload_file(sys.argv[1], 'tiles', sys.argv[2])",
                        path, key], env=self.env, check=True)

    def close(self):
        self.p.stdin.close()
        self.p.wait(15)


def until_served(port, path, limit=120):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        if get(port, path)[0] == 200:
            return round(time.perf_counter() - t0, 2)
        time.sleep(0.02)
    return None


def tiles_of(manifest):
    return [(l["level"], r, c) for l in manifest["levels"] for r in range(l["rows"]) for c in range(l["columns"])]


def run_stopped(tiler, archive, manifest):
    s = Storage()
    s.upload(archive, "f/sample.pmtiles")
    p, port, _ = start(tiler, "s3://tiles/f", s.env)
    t = tiles_of(manifest)
    ok = get(port, "/images/sample/tiles/%d/%d/%d.jpg" % t[0])
    s.command("stop")
    out = {}
    for name, tile in (("first uncached tile", t[-1]), ("next uncached tile", t[-2])):
        st, body, dt, h = get(port, "/images/sample/tiles/%d/%d/%d.jpg" % tile)
        out[name] = f"{st} in {dt * 1000:.0f} ms (Retry-After {h.get('Retry-After')})"
    st, _, dt, _ = get(port, "/images/sample/tiles/%d/%d/%d.jpg" % t[0])
    out["cached tile"] = f"{st} in {dt * 1000:.1f} ms"
    out["/healthz"] = get(port, "/healthz")[1].decode()
    s.command("start")
    out["served again after"] = f"{until_served(port, '/images/sample/tiles/%d/%d/%d.jpg' % t[-3])} s"
    stop(p)
    s.close()
    return out


def run_hung(tiler, archive, manifest):
    s = Storage()
    s.upload(archive, "h/sample.pmtiles")
    p, port, _ = start(tiler, "s3://tiles/h", s.env, "--storage-timeout", "2")
    t = tiles_of(manifest)
    get(port, "/images/sample/tiles/%d/%d/%d.jpg" % t[0])
    s.command("delay * 1000")
    out = {}
    for i, name in enumerate(("first uncached tile", "second", "third")):
        st, _, dt, _ = get(port, "/images/sample/tiles/%d/%d/%d.jpg" % t[-1 - i])
        out[name] = f"{st} in {dt * 1000:.0f} ms"
    st, _, dt, _ = get(port, "/images/sample/tiles/%d/%d/%d.jpg" % t[0])
    out["cached tile"] = f"{st} in {dt * 1000:.1f} ms"
    s.command("delay * 0")
    out["served again after"] = f"{until_served(port, '/images/sample/tiles/%d/%d/%d.jpg' % t[-5])} s"
    stop(p)
    s.close()
    return out


def run_replaced(tiler, archive, manifest, folder):
    out = {}
    t = tiles_of(manifest)
    # Version 2: the same pyramid with every tile's bytes changed (a JPEG comment added).
    v2dir = os.path.join(WORK, "v2", "sample")
    shutil.rmtree(os.path.join(WORK, "v2"), ignore_errors=True)
    shutil.copytree(folder, v2dir)
    for z, r, c in t:
        path = os.path.join(v2dir, str(z), str(r), f"{c}.jpg")
        b = open(path, "rb").read()
        open(path, "wb").write(b[:2] + b"\xff\xfe\x00\x0cversion 2" + b[2:])
    subprocess.run([tiler, "pack", v2dir, "--force"], check=True, stdout=subprocess.DEVNULL)
    v2 = os.path.join(WORK, "v2", "sample.pmtiles")

    def want(version, z, r, c):
        base = folder if version == 1 else v2dir
        return open(os.path.join(base, str(z), str(r), f"{c}.jpg"), "rb").read()

    for kind in ("local", "s3"):
        s = None
        if kind == "local":
            root = os.path.join(WORK, "replaced")
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root)
            shutil.copy(archive, os.path.join(root, "sample.pmtiles"))
            p, port, _ = start(tiler, root, dict(os.environ), "--cache-mb", "1", "--rescan-interval", "0.1")
        else:
            s = Storage()
            s.upload(archive, "r/sample.pmtiles")
            p, port, _ = start(tiler, "s3://tiles/r", s.env, "--cache-mb", "1", "--rescan-interval", "0.1")
        stats = {"answers": 0, "statuses": {}, "v1": 0, "v2": 0, "neither": 0, "etag with two bodies": 0,
                 "v1 after v2 on one client": 0}
        etags, lock, stopping = {}, threading.Lock(), threading.Event()

        def client():
            rng = random.Random()
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            newer = False
            while not stopping.is_set():
                z, r, col = rng.choice(t)
                c.request("GET", f"/images/sample/tiles/{z}/{r}/{col}.jpg")
                resp = c.getresponse()
                body = resp.read()
                with lock:
                    stats["answers"] += 1
                    stats["statuses"][resp.status] = stats["statuses"].get(resp.status, 0) + 1
                    if resp.status != 200:
                        continue
                    if body == want(2, z, r, col):
                        stats["v2"] += 1
                        newer = True
                    elif body == want(1, z, r, col):
                        stats["v1"] += 1
                        if newer:
                            stats["v1 after v2 on one client"] += 1
                    else:
                        stats["neither"] += 1
                    tag = resp.getheader("ETag")
                    if etags.setdefault(tag, body) != body:
                        stats["etag with two bodies"] += 1

        threads = [threading.Thread(target=client) for _ in range(4)]
        for th in threads:
            th.start()
        time.sleep(2)
        if kind == "local":
            shutil.copy(v2, os.path.join(root, ".sample.new"))
            os.rename(os.path.join(root, ".sample.new"), os.path.join(root, "sample.pmtiles"))
        else:
            s.upload(v2, "r/sample.pmtiles")
        time.sleep(4)
        stopping.set()
        for th in threads:
            th.join()
        out[kind] = stats
        stop(p)
        if s:
            s.close()
    return out


def run_damaged(tiler, archive):
    root = os.path.join(WORK, "damaged")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    shutil.copy(archive, os.path.join(root, "sample.pmtiles"))
    data = open(archive, "rb").read()
    open(os.path.join(root, "cut.pmtiles"), "wb").write(data[:len(data) // 2])
    p, port, log = start(tiler, root, dict(os.environ))
    out = {}
    for path in ("/images/sample/tiles/0/0/0.jpg", "/images/cut", "/images/cut/tiles/0/0/0.jpg", "/images"):
        st, body, dt, _ = get(port, path)
        out[path] = f"{st}, {len(body)} bytes" if path.endswith(".jpg") and st == 200 else f"{st} {body[:120].decode(errors='replace')}"
    stop(p)
    log.seek(0)
    out["log"] = [l.strip() for l in log if "cut.pmtiles" in l]
    return out


def main():
    global WORK
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    tiler = os.path.abspath(sys.argv[1])
    WORK = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "bench-out", "storage-faults"))
    os.makedirs(WORK, exist_ok=True)
    folder = os.path.join(WORK, "pyramids", "sample")
    if not os.path.exists(os.path.join(folder, "pyramid.json")):
        img = os.path.join(WORK, "sample.jpg")
        subprocess.run([os.path.join(ROOT, "scripts", "make-sample-image"), img, "4000", "3000"], check=True)
        subprocess.run([tiler, "cut", img, "--output", os.path.join(WORK, "pyramids"), "--format", "jpeg", "--force",
                        "--quiet"], check=True)
    subprocess.run([tiler, "pack", folder, "--force"], check=True, stdout=subprocess.DEVNULL)
    archive = os.path.join(WORK, "pyramids", "sample.pmtiles")
    manifest = json.load(open(os.path.join(folder, "pyramid.json")))
    print(f"load average {os.getloadavg()}")
    for name, run in (("stopped", lambda: run_stopped(tiler, archive, manifest)),
                      ("hung", lambda: run_hung(tiler, archive, manifest)),
                      ("replaced", lambda: run_replaced(tiler, archive, manifest, folder)),
                      ("damaged", lambda: run_damaged(tiler, archive))):
        print(f"== {name}")
        print(json.dumps(run(), indent=1))
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
