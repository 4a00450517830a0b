"""Bounded metadata benchmark: a table fed one commit per second, with `floe ingest --maintain`
and its streaming metadata defaults, beside the same without them, and without maintenance.

Three warehouses, each holding bench.events (partitioned hour(ts)), each fed by
`floe ingest --follow --commit-interval 1s` from its own NDJSON file (one generator thread
appends --rate events/s to each, ts = now, ~100-byte payloads):

  bounded    `--maintain` with everything at its default: at most 100 snapshots
             (floe.maintain.expire.max-snapshots), write.metadata.delete-after-commit.enabled
             and previous-versions-max=5 set by the ingest at start;
  unbounded  `--maintain`, with floe.maintain.expire.max-snapshots=0 and Iceberg's metadata
             settings set on the table (previous-versions-max 100, nothing deleted after
             commit): what `--maintain` did before, a 1-hour retention window;
  off        no maintenance;
  service    `floe ingest` without `--maintain`, and `floe maintain` (a pass every 30 s) on
             the warehouse, the table marked floe.maintain.streaming=true: the streaming
             defaults a `floe maintain` service gives a table another writer feeds;
  service-auto  the same without the mark: `floe maintain` finds the stream by its cadence
             (60 commits in the last hour, some in every 10 minutes of it), so this side is
             only bounded after an hour; run it with --minutes 70 or more.

--sides picks the sides (default bounded,unbounded,off).

Every --sample seconds, per warehouse, read from storage (no floe process, so the sampler
does not compete with the ingests): snapshots in the current metadata.json, its size (what
every commit rewrites), the metadata.json files on storage and their bytes, the metadata
directory (metadata.json + manifest lists + manifests), and everything under the table.
Samples go to bounded_metadata.csv.

At the end the ingests get SIGTERM (and are waited for), and the rows DuckDB reads from each
table must equal the events generated for it (else exit 1).

Rerun: python crates/floe-bench/peers/bounded_metadata.py --floe target/release/floe \\
         --dir /tmp/bm --minutes 15 --rate 1000 --sample 30
(needs duckdb + duckdb-extension-avro/iceberg in the interpreter; see --python).
"""
import argparse
import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import dir_bytes, local_path, log, need_duckdb  # noqa: E402
from steady_state import INTEROP, TABLE, Generator, duckdb_measure, events_table, start, stop  # noqa: E402

SIDES = ("bounded", "unbounded", "off", "service", "service-auto")
FIELDS = ["side", "t_s", "generated", "snapshots", "metadata_json_bytes", "metadata_json_files",
          "metadata_json_total_bytes", "metadata_dir_bytes", "storage_bytes"]


def current_metadata(warehouse):
    """The current metadata.json of bench.events, from the SQL catalog's pointer."""
    con = sqlite3.connect(f"file:{os.path.join(warehouse, 'catalog.db')}?mode=ro", uri=True)
    try:
        (loc,) = con.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'bench' "
            "AND table_name = 'events'").fetchone()
    finally:
        con.close()
    return local_path(loc)


def sample(name, side, t_s, generated):
    row = {"side": name, "t_s": round(t_s, 1), "generated": generated}
    path = current_metadata(side["warehouse"])
    with open(path) as f:
        md = json.load(f)
    row["snapshots"] = len(md.get("snapshots", []))
    row["metadata_json_bytes"] = os.stat(path).st_size
    mdir = os.path.join(side["table_dir"], "metadata")
    files = []
    for n in os.listdir(mdir):
        if n.endswith(".metadata.json"):
            try:
                files.append(os.stat(os.path.join(mdir, n)).st_size)
            except FileNotFoundError:  # deleted after a commit meanwhile
                pass
    row["metadata_json_files"] = len(files)
    row["metadata_json_total_bytes"] = sum(files)
    row["metadata_dir_bytes"] = dir_bytes(mdir)
    row["storage_bytes"] = dir_bytes(side["table_dir"])
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floe", default="target/release/floe", help="floe binary")
    p.add_argument("--python", help="interpreter with duckdb + duckdb-extension-{avro,iceberg}")
    p.add_argument("--dir", default="/tmp/floe-bounded-metadata", help="work dir (wiped)")
    p.add_argument("--minutes", type=float, default=15)
    p.add_argument("--rate", type=int, default=1000, help="events/s per stream")
    p.add_argument("--sample", type=float, default=30, help="seconds between samples")
    p.add_argument("--sides", default="bounded,unbounded,off", help=f"comma-separated, of {','.join(SIDES)}")
    args = p.parse_args()
    need_duckdb(args, "bounded_metadata.py")
    sys.path.insert(0, INTEROP)

    floe_bin = os.path.abspath(shutil.which(args.floe) or args.floe)
    work = os.path.abspath(args.dir)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    version = subprocess.run([floe_bin, "--version"], capture_output=True, text=True).stdout.strip()
    log(f"{version}; work dir {work}; {args.minutes} min at {args.rate} events/s per stream")

    # The unbounded side: no count bound, and Iceberg's metadata settings (nothing deleted).
    unbounded = ("floe.maintain.expire.max-snapshots=0", "write.metadata.previous-versions-max=100",
                 "write.metadata.delete-after-commit.enabled=false")
    marked = ("floe.maintain.streaming=true",)
    chosen = [n.strip() for n in args.sides.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in SIDES]
    if unknown or not chosen:
        p.error(f"--sides: unknown {unknown}; expected some of {','.join(SIDES)}")
    props = {"unbounded": unbounded, "service": marked}
    sides = {name: events_table(floe_bin, work, name, props.get(name, ())) for name in chosen}

    procs, gen, failed, rows = [], None, [], []
    try:
        for name, s in sides.items():
            argv = ["ingest", TABLE, "--source", s["stream"], "--follow", "--commit-interval", "1s", "--json"]
            if name in ("bounded", "unbounded"):
                argv.append("--maintain")
            s["ingest"] = start(s["floe"].argv(*argv), os.path.join(work, f"ingest-{name}.log"), procs,
                                f"ingest {name}")
            if name.startswith("service"):
                s["maintain"] = start(s["floe"].argv("maintain", "--interval", "30s"),
                                      os.path.join(work, f"maintain-{name}.log"), procs, f"maintain {name}")
        gen = Generator([s["stream"] for s in sides.values()], args.rate)
        t0 = time.monotonic()
        gen.start()
        duration, k = args.minutes * 60, 0
        while True:
            if gen.error:
                raise RuntimeError(f"generator failed: {gen.error}")
            for name, s in sides.items():
                if s["ingest"].poll() is not None:
                    raise RuntimeError(f"ingest {name} exited early; see {work}/ingest-{name}.log")
                if "maintain" in s and s["maintain"].poll() is not None:
                    raise RuntimeError(f"maintain {name} exited early; see {work}/maintain-{name}.log")
                if k > 0:
                    row = sample(name, s, time.monotonic() - t0, gen.counts[s["stream"]])
                    rows.append(row)
                    log(" ".join(f"{f}={row[f]}" for f in FIELDS))
            k += 1
            if k * args.sample > duration:
                break
            time.sleep(max(0.0, k * args.sample - (time.monotonic() - t0)))
        gen.stop_event.set()
        gen.join()
        generated = {name: gen.counts[s["stream"]] for name, s in sides.items()}
        time.sleep(2)
        for name, s in sides.items():
            rc = stop(f"ingest {name}", s["ingest"], 120)
            if rc != 0:
                failed.append(f"ingest {name} exited with rc {rc}")
            if "maintain" in s:
                rc = stop(f"maintain {name}", s["maintain"], 120)
                if rc != 0:
                    failed.append(f"maintain {name} exited with rc {rc}")
    finally:
        if gen is not None:
            gen.stop_event.set()
        for name, proc, f in procs:
            if proc.poll() is None:
                stop(name, proc, 30)
            f.close()

    with open(os.path.join(work, "bounded_metadata.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    for name, s in sides.items():
        _, n = duckdb_measure(current_metadata(s["warehouse"]), repeats=1)
        ok = n == generated[name]
        print(f"{name}: generated {generated[name]}, DuckDB reads {n} -> {'OK' if ok else 'MISMATCH'}")
        if not ok:
            failed.append(f"{name}: DuckDB reads {n} rows of {generated[name]}")
    # The summary: each side at the first full minute after 3 minutes and at the end.
    print("| side | snapshots (3 min / end) | metadata.json each commit rewrites (3 min / end) | "
          "metadata.json files | metadata on storage / one metadata.json | bytes on storage |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in sides:
        mine = [r for r in rows if r["side"] == name]
        early = next((r for r in mine if r["t_s"] >= 180), mine[0])
        end = mine[-1]
        print(f"| {name} | {early['snapshots']} / {end['snapshots']} | "
              f"{early['metadata_json_bytes']:,} / {end['metadata_json_bytes']:,} B "
              f"({end['metadata_json_bytes'] / max(early['metadata_json_bytes'], 1):.2f}x) | "
              f"{end['metadata_json_files']} | "
              f"{end['metadata_dir_bytes'] / max(end['metadata_json_bytes'], 1):.1f} | "
              f"{end['storage_bytes'] / 2**20:.1f} MiB |")
    if failed:
        print("FAILED: " + "; ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
