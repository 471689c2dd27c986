#!/usr/bin/env python3
"""Start-up faults of `tiler serve` and `tiler ls` (issue 31 #5, #6, #7), measured: for
docs/reliability.md's rows.

    scripts/startup-faults.py TILER RUN [N]

RUN is one of
  listing  a store that repeats its NextContinuationToken on every page: how long `tiler
           ls` runs (killed at 60 s) and its peak RSS; how long `tiler serve` takes to
           listen (given up at 60 s)
  hung     N archives (default 3000) in a bucket whose range reads hang (listings answer),
           `--storage-timeout 2`: seconds until `tiler serve` listens (given up at 60 s),
           and until it exits after a SIGTERM sent 2 s after start
  spill    three 8000 x 8000 RGB PNGs as --sources, one tile of each asked in turn, with
           the default spill budget and with --sources-spill-mb 200: the bytes of deleted
           temporary files the server holds, at most and after the files are deleted
Needs moto (scripts/install-deps test) and the vips command.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Storage:
    def __init__(self):
        self.p = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "s3-test-server"), "--bucket", "tiles"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        info = json.loads(self.p.stdout.readline())
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID=info["access_key_id"], AWS_SECRET_ACCESS_KEY=info["secret_access_key"],
                        AWS_REGION=info["region"], AWS_ENDPOINT_URL=info["endpoint"])
        import boto3
        self.s3 = boto3.client("s3", endpoint_url=info["endpoint"], region_name=info["region"],
                               aws_access_key_id=info["access_key_id"], aws_secret_access_key=info["secret_access_key"])

    def command(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        self.p.stdout.readline()

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def serve(tiler, args, env):
    """Starts `tiler serve`; returns the process, and a thread-filled dict with the time its
    start-up line came."""
    started = time.time()
    p = subprocess.Popen([tiler, "serve", *args, "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    seen = {}

    def read():
        line = p.stdout.readline()
        if "serving" in line:
            seen["seconds"] = time.time() - started
            seen["port"] = int(line.split("127.0.0.1:")[1].split("/")[0])
    threading.Thread(target=read, daemon=True).start()
    return p, seen, started


def until_exit(p, seconds):
    t0 = time.time()
    try:
        p.wait(seconds)
        return time.time() - t0
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def run_listing(tiler):
    storage = Storage()
    storage.s3.put_object(Bucket="tiles", Key="p/a.pmtiles", Body=b"x")
    storage.command("loop-listing on")
    t0 = time.time()
    ls = subprocess.Popen([tiler, "ls", "s3://tiles/p"], env=storage.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    peak = 0
    while ls.poll() is None and time.time() - t0 < 60:
        peak = max(peak, rss_kb(ls.pid))
        time.sleep(0.1)
    ended = ls.poll() is not None
    if not ended:
        ls.kill()
    err = ls.communicate()[1].strip()
    print(f"tiler ls: {'exit %d after %.2f s' % (ls.returncode, time.time() - t0) if ended else 'still running at 60 s'}, "
          f"peak RSS {peak / 1024:.0f} MB; {err[:200]}")
    p, seen, started = serve(tiler, ["s3://tiles/p"], storage.env)
    while "seconds" not in seen and time.time() - started < 60:
        time.sleep(0.05)
    print(f"tiler serve: {'listening after %.2f s' % seen['seconds'] if 'seconds' in seen else 'not listening at 60 s'}, "
          f"RSS {rss_kb(p.pid) / 1024:.0f} MB")
    p.kill()
    p.wait()
    storage.close()


def run_hung(tiler, n):
    storage = Storage()
    work = tempfile.mkdtemp()
    subprocess.run(["vips", "black", f"{work}/a.png", "300", "200", "--bands", "3"], check=True)
    subprocess.run([tiler, "cut", f"{work}/a.png", "--archive", "-o", f"{work}/out", "--quiet"], check=True)
    body = open(f"{work}/out/a.pmtiles", "rb").read()
    for i in range(n):
        storage.s3.put_object(Bucket="tiles", Key=f"h/img{i}.pmtiles", Body=body)
    storage.command("delay RANGE 1000")
    p, seen, started = serve(tiler, ["s3://tiles/h", "--storage-timeout", "2"], storage.env)
    time.sleep(max(0, started + 2 - time.time()))
    listening = seen.get("seconds")
    p.send_signal(signal.SIGTERM)
    exit_after = until_exit(p, 60)
    print(f"{n} archives, range reads hung: listening {'after %.2f s' % listening if listening else 'not yet at 2 s'}; "
          f"SIGTERM at 2 s: {'exit %d after %.2f s' % (p.returncode, exit_after) if exit_after is not None else 'still running 60 s later'}")
    p, seen, started = serve(tiler, ["s3://tiles/h", "--storage-timeout", "2"], storage.env)
    while "seconds" not in seen and time.time() - started < 60:
        time.sleep(0.05)
    print(f"left alone: {'listening after %.2f s' % seen['seconds'] if 'seconds' in seen else 'not listening at 60 s'}")
    p.kill()
    p.wait()
    storage.command("delay RANGE 0")
    storage.close()


def spill_bytes(pid, prefix):
    total = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                    total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
            except OSError:
                pass
    except OSError:
        pass
    return total


def run_spill(tiler):
    work = tempfile.mkdtemp()
    sources, tmp, root = f"{work}/sources", f"{work}/tmp", f"{work}/root"
    for d in (sources, tmp, root):
        os.makedirs(d)
    for i in range(3):
        subprocess.run(["vips", "black", f"{sources}/s{i}.png", "8000", "8000", "--bands", "3"], check=True)
    for flags in ([], ["--sources-spill-mb", "200"]):
        env = dict(os.environ, TMPDIR=tmp)
        p, seen, started = serve(tiler, [root, "--sources", sources, "--rescan-interval", "0.2", *flags], env)
        while "seconds" not in seen and time.time() - started < 60:
            time.sleep(0.05)
        peak = 0
        for i in range(3):
            urllib.request.urlopen(f"http://127.0.0.1:{seen['port']}/images/s{i}/tiles/5/0/0.png", timeout=300).read()
            peak = max(peak, spill_bytes(p.pid, tmp))
        for i in range(3):
            os.rename(f"{sources}/s{i}.png", f"{work}/s{i}.png")
        time.sleep(2)
        after = spill_bytes(p.pid, tmp)
        for i in range(3):
            os.rename(f"{work}/s{i}.png", f"{sources}/s{i}.png")
        print(f"{' '.join(flags) or 'default budget'}: spill after the three tiles {peak / 1e6:.0f} MB; "
              f"2 s after the files were moved away {after / 1e6:.0f} MB")
        p.kill()
        p.wait()


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    tiler, what = os.path.abspath(sys.argv[1]), sys.argv[2]
    if what == "listing":
        run_listing(tiler)
    elif what == "hung":
        run_hung(tiler, int(sys.argv[3]) if len(sys.argv) > 3 else 3000)
    elif what == "spill":
        run_spill(tiler)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
