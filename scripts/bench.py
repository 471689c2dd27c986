#!/usr/bin/env python3
"""tiler's benchmark suite: the command line of the package scripts/benchmarks/ (its
cli.py has the options, each section is a module of its own). Run it through
scripts/bench, which installs the peers first; `scripts/bench.py --help` lists the
sections and options.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchmarks.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
