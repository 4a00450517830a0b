"""Distributed compaction benchmark: `floe compact --distributed` with 1, 2 and 4 `floe worker`
processes on a PostgreSQL queue, beside a local `floe compact` of the same table (the peer).

1. `floe-bench small-files` builds a table of N small Parquet files, afresh for each run (the
   same rows); every run compacts it with the same options.
2. Every process runs under GNU time: wall seconds of the coordinator (the run's duration),
   and user + system CPU seconds of the coordinator and of each worker.
3. Rows and sum(amount) are checked unchanged after every run.

The machine's cores are shared by every process: more workers than cores cannot go faster, so
the numbers to read are the CPU-seconds per GB (the work is the same, it is only spread) and the
coordinator's CPU (the price of distributing). Prints one JSON object.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid


def timed(cmd, env=None, stdout=None):
    """Starts cmd under /usr/bin/time; returns the Popen and the file its figures go to."""
    stats = f"/tmp/floe-dist-bench-{uuid.uuid4().hex}.time"
    p = subprocess.Popen(["/usr/bin/time", "-o", stats, "-f", "%e %U %S"] + cmd, env=env,
                         stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE)
    return p, stats


def figures(stats):
    with open(stats) as f:
        wall, user, sys_ = (float(x) for x in f.read().split()[-3:])
    os.remove(stats)
    return {"wall_s": wall, "cpu_s": user + sys_}


def fresh_queue(pg_url, pg_bin):
    name = f"floe_bench_{uuid.uuid4().hex[:12]}"
    subprocess.run([os.path.join(pg_bin, "createdb"), "--maintenance-db", pg_url, name], check=True)
    return pg_url.rsplit("/", 1)[0] + "/" + name


def count_sum(floe, wh):
    out = subprocess.run([floe, "--warehouse", wh, "--json", "sql",
                          "SELECT count(*) AS n, round(sum(amount), 2) AS s FROM bench.floe"],
                         check=True, capture_output=True).stdout
    row = json.loads(out.decode().splitlines()[0])
    return row["n"], row["s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floe", required=True)
    ap.add_argument("--floe-bench", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--target", default="8MiB", help="output file size: several tasks per table")
    ap.add_argument("--pg-url", default=os.environ.get("FLOE_TEST_POSTGRES_URL"))
    ap.add_argument("--pg-bin", default=os.environ.get("FLOE_PG_BIN", "/usr/lib/postgresql/15/bin"))
    a = ap.parse_args()
    if not a.pg_url:
        raise SystemExit("--pg-url (or FLOE_TEST_POSTGRES_URL): the queue's PostgreSQL")
    src = os.path.join(a.dir, f"src-{a.files}")
    shutil.rmtree(src, ignore_errors=True)
    built = json.loads(subprocess.run([a.floe_bench, "small-files", "--warehouse", src, "--files", str(a.files)],
                                      check=True, capture_output=True).stdout)["bench.floe"]
    gb = built["bytes"] / 2**30
    before = count_sum(a.floe, src)
    options = ["--target-file-size", a.target]
    results = {"files": built["files"], "bytes": built["bytes"], "rows": built["rows"], "runs": {}}

    def copy():
        # Metadata files hold absolute paths: each run gets the table built afresh (the same
        # files: floe-bench's generator is deterministic).
        wh = os.path.join(a.dir, "run")
        shutil.rmtree(wh, ignore_errors=True)
        subprocess.run([a.floe_bench, "small-files", "--warehouse", wh, "--files", str(a.files)],
                       check=True, capture_output=True)
        assert count_sum(a.floe, wh) == before, "the generator is not deterministic"
        return wh

    # The peer: a local compaction of the same copy.
    wh = copy()
    p, stats = timed([a.floe, "--warehouse", wh, "--json", "compact", "bench.floe"] + options)
    out, err = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"local compact failed: {err.decode()[-2000:]}")
    local = figures(stats)
    local["cpu_s_per_gb"] = local["cpu_s"] / gb
    local["files_after"] = json.loads(out)["live_files_after"]
    assert count_sum(a.floe, wh) == before, "local compaction changed the data"
    results["runs"]["local"] = local

    for n in [int(x) for x in a.workers.split(",")]:
        wh = copy()
        queue = fresh_queue(a.pg_url, a.pg_bin)
        workers = [timed([a.floe, "--warehouse", wh, "--json", "worker", "--queue", queue,
                          "--worker-id", f"w{i}", "--stop-when-idle", "2s"]) for i in range(n)]
        time.sleep(0.5)
        p, stats = timed([a.floe, "--warehouse", wh, "--json", "compact", "bench.floe", "--distributed",
                          "--queue", queue] + options)
        out, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"distributed compact failed: {err.decode()[-2000:]}")
        coord = figures(stats)
        m = json.loads(out)
        worker_cpu = 0.0
        shares = []
        for (w, wstats) in workers:
            w.communicate()
            f = figures(wstats)
            worker_cpu += f["cpu_s"]
        for s in m["distributed"]["workers"]:
            shares.append({"worker": s["worker"], "tasks": s["tasks"], "bytes_read": s["bytes_read"]})
        assert count_sum(a.floe, wh) == before, f"{n} workers changed the data"
        results["runs"][f"{n}_workers"] = {
            "wall_s": coord["wall_s"],
            "mb_per_s": built["bytes"] / 2**20 / coord["wall_s"],
            "coordinator_cpu_s": coord["cpu_s"],
            "workers_cpu_s": worker_cpu,
            "cpu_s_per_gb": (coord["cpu_s"] + worker_cpu) / gb,
            "tasks": m["distributed"]["tasks"],
            "files_after": m["live_files_after"],
            "shares": shares,
            "wall_vs_local": coord["wall_s"] / local["wall_s"],
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    sys.exit(main())
