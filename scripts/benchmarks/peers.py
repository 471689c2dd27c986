"""The servers tiler is measured against, started for a benchmark: nginx (static files,
and the FastCGI front of iipsrv), iipsrv, the floor (scripts/floor-server.c) and the
local S3 server (scripts/s3-test-server).
"""

import json
import os
import shutil
import subprocess
import sys

from .harness import ROOT, TilerError, free_port, log, pinned, run, server_cores

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  open_file_cache max=100000 inactive=60s;
  open_file_cache_valid 60s;
  keepalive_requests 100000000;
  keepalive_timeout 75s;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  types {{ image/png png; image/jpeg jpg; }}
  server {{
    listen 127.0.0.1:{port};
{locations}
  }}
  # A new FastCGI connection per request, as iipsrv's own nginx example has it: each
  # iipsrv process serves one connection at a time, so with fastcgi_keep_conn and an
  # upstream keepalive pool, a request nginx sends on a pooled connection to a process
  # busy with another connection waits for fastcgi_read_timeout (60 s), then fails
  # (seen: 31 of 8,380 requests, 502 after 60 s, in every each-tile-once pass).
  upstream iipsrv {{ {upstreams} }}
  server {{
    listen 127.0.0.1:{iip_port};
    location /fcgi-bin/iipsrv.fcgi {{
      include /etc/nginx/fastcgi_params;
      fastcgi_pass iipsrv;
    }}
  }}
}}
"""


def start_floor_server(sdir, root, ports, procs, out):
    """Compiles scripts/floor-server.c with cc and starts it on `root` (one event loop per
    core). Returns False, with the reason in out["floor_error"], when it cannot."""
    exe = os.path.join(sdir, "floor-server")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        out["floor_error"] = "no C compiler (cc) to build scripts/floor-server.c"
        log("  " + out["floor_error"])
        return False
    p = run([cc, "-O2", "-Wall", "-Wextra", "-pthread", "-o", exe, os.path.join(ROOT, "scripts", "floor-server.c")],
            capture_output=True, check=False)
    if p.returncode != 0:
        out["floor_error"] = "scripts/floor-server.c did not compile: " + (p.stderr or "")[-300:]
        log("  " + out["floor_error"])
        return False
    ports["floor"] = free_port()
    procs["floor"] = subprocess.Popen(pinned("server", [exe, root, str(ports["floor"]), str(server_cores())]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True


def start_iipsrv(sdir, tif, nprocs, quality=85, cpus=None):
    """iipsrv as the serve section runs it: `nprocs` FastCGI processes behind nginx, reading
    the folder of `tif`, JPEG at `quality`; on `cpus` (a taskset list) when given, else
    where the server role is pinned. Returns (nginx port, {name: process})."""
    procs = {}
    port = free_port()
    iip_ports = [free_port() for _ in range(nprocs)]
    env = dict(os.environ, FILESYSTEM_PREFIX=os.path.dirname(tif) + "/", MAX_IMAGE_CACHE_SIZE="1024",
               VERBOSITY="0", LOGFILE=os.path.join(sdir, "iipsrv.log"), JPEG_QUALITY=str(quality))

    def on_cpus(argv):
        return ["taskset", "-c", cpus] + argv if cpus else pinned("server", argv)
    for i, p in enumerate(iip_ports):
        procs[f"iipsrv{i}"] = subprocess.Popen(
            on_cpus(["/usr/lib/iipimage-server/iipsrv.fcgi", "--bind", f"127.0.0.1:{p}", "--backlog", "1024"]),
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ndir = os.path.join(sdir, "nginx-" + str(port))
    os.makedirs(ndir)
    with open(os.path.join(ndir, "nginx.conf"), "w") as f:
        f.write(NGINX_CONF.format(d=ndir, port=free_port(), iip_port=port, locations="",
                                  upstreams=" ".join(f"server 127.0.0.1:{p};" for p in iip_ports)))
    procs["nginx"] = subprocess.Popen(on_cpus(["nginx", "-p", ndir, "-c", os.path.join(ndir, "nginx.conf")]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return port, procs


def start_s3_server():
    """scripts/s3-test-server (moto, signature checking on) on a free port, bucket 'tiles'."""
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "s3-test-server"), "--bucket", "tiles"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if not line:
        raise TilerError("scripts/s3-test-server did not start (scripts/install-deps test installs moto[server])")
    return p, json.loads(line)
