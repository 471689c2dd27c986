"""tiler's benchmark suite as a package: cli.py (the options and the run), harness.py
(commands, servers, CPU, pinning, wrk, rounds), loads.py (what the client asks for),
peers.py (nginx, iipsrv, the floor server, the S3 server), tools.py (the cutters and
their legs), one module per section (cut, floor, archive, scaling, serve,
serve_archives, serve_sources, iiif, profile: each measures, checks its targets and
writes its tables), and report.py (results.md). Run it as scripts/bench.
"""
