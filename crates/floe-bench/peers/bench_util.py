"""Helpers shared by the benchmark drivers (steady_state.py, freshness.py): log lines, table
locations as local paths, bytes under a directory, and the header and axis labels of the SVG plots."""

import json
import math
import os
import subprocess
import time
from urllib.parse import unquote, urlparse


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def local_path(location):
    p = urlparse(location)
    return unquote(p.path) if p.scheme == "file" else location


def dir_bytes(path):
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.stat(os.path.join(root, n)).st_size
            except FileNotFoundError:  # deleted by a concurrent cleanup
                pass
    return total


def nice_max(v):
    """The axis maximum: the smallest of 1, 1.5, 2, ..., 10 times a power of ten >= v."""
    if v <= 0:
        return 1
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if v <= m * e:
            return m * e
    return 10 * e


def fmt(v):
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.1f}"


def svg_open(title, n_panels, pw, ph, cols):
    """The opening elements of an SVG of `n_panels` panels of pw x ph, `cols` to a row, below a
    50-pixel header with `title` (white background); and the SVG's width."""
    rows = (n_panels + cols - 1) // cols
    W, H = cols * pw, rows * ph + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    return out, W


class Floe:
    """The floe binary on one warehouse."""

    def __init__(self, binary, warehouse):
        self.binary, self.warehouse = binary, warehouse

    def argv(self, *args):
        return [self.binary, "--warehouse", self.warehouse, *args]

    def json_lines(self, *args, timeout=300):
        r = subprocess.run(self.argv(*args, "--json"), capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"floe {' '.join(args)}: rc {r.returncode}: {r.stderr.strip() or r.stdout.strip()}")
        return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def need_duckdb(args, script):
    """Re-executes the running script with `args.python` when this interpreter lacks duckdb
    (exits naming `script` when there is none to switch to)."""
    import sys
    try:
        import duckdb  # noqa: F401
    except ImportError:
        if args.python and os.path.realpath(args.python) != os.path.realpath(sys.executable):
            os.execv(args.python, [args.python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
        sys.exit(f"{script}: duckdb is not importable; pass --python /path/to/venv/bin/python")


def time_command(cmd, timeout=None):
    """Runs cmd under GNU time: ({wall_s, user_s, sys_s, cpu_s, max_rss_mib} or None when time
    printed nothing, rc, stdout, stderr without time's lines). Wall time is perf_counter's; the
    peak RSS is time's %M, not wait4 here: a child forked from a large Python process would
    inherit its high-water mark."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "BUTIME %e %U %S %M", *cmd], capture_output=True, text=True,
                       timeout=timeout)
    wall = time.perf_counter() - t
    lines = [l for l in p.stderr.splitlines() if l.startswith("BUTIME ")]
    err = "\n".join(l for l in p.stderr.splitlines() if not l.startswith("BUTIME ")
                    and not l.startswith("Command exited with non-zero status"))
    m = None
    if lines:
        _, _, user, sys_, rss = lines[-1].split()
        m = {"wall_s": wall, "user_s": float(user), "sys_s": float(sys_), "cpu_s": float(user) + float(sys_),
             "max_rss_mib": int(rss) / 1024.0}
    return m, p.returncode, p.stdout, err
