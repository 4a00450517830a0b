"""Steady-state benchmark of `floe maintain`: a streaming-fed table with and without it.

Two warehouses, `on/` and `off/`, each hold bench.events (partitioned hour(ts)) with
history.expire.max-snapshot-age-ms=300000 (a 5-minute retention window) and every
floe.maintain.* property at its default. One generator thread appends NDJSON events at a
fixed rate (ts = now, ~100-byte payloads) to one file per warehouse every 100 ms, and
`floe ingest --follow --commit-interval 1s` tails each file. `on/` additionally runs
`floe maintain --interval 10s`; `off/` runs nothing else.

Every --sample seconds, per warehouse: live data files, max files per partition, snapshots,
metadata bytes (the table's metadata/ dir), bytes on storage (the table dir), and a DuckDB
query (SELECT count(*), avg(value) FROM iceberg_scan(<current metadata.json>), median of 3
in a fresh connection) with the row count it sees. Samples go to on.csv / off.csv.

At the end ingest and maintain get SIGTERM (and are waited for), the final row count DuckDB
reads must equal the events generated for each warehouse (else exit 1), and the script writes
steady_state.svg (small multiples, on vs off) and summary.md.

Rerun: python crates/floe-bench/peers/steady_state.py --floe target/release/floe \\
         --dir /tmp/ss --minutes 10 --rate 2000 --sample 30 --out-dir /tmp/ss
(needs duckdb + duckdb-extension-avro/iceberg in the interpreter; see --python).
"""
import argparse
import csv
import datetime as dt
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Floe, dir_bytes, fmt, local_path, log, need_duckdb, nice_max, svg_open  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INTEROP = os.path.join(HERE, "..", "..", "..", "tests", "interop")

TABLE = "bench.events"
SCHEMA = "id bigint not null, ts timestamp, device string, value double, payload string"
RETENTION_MS = 300000
COMMIT_INTERVAL = "1s"
MAINTAIN_INTERVAL = "10s"
BATCH_SECONDS = 0.1
SIDES = ("on", "off")
FIELDS = ["t_s", "generated", "live_data_files", "max_files_per_partition", "snapshots",
          "metadata_bytes", "storage_bytes", "duckdb_ms", "duckdb_rows", "error"]


class Generator(threading.Thread):
    """Appends `rate` events/s to every file, in batches every BATCH_SECONDS."""

    def __init__(self, paths, rate):
        super().__init__(daemon=True)
        self.paths, self.rate = paths, rate
        self.counts = {p: 0 for p in paths}
        self.stop_event = threading.Event()
        rnd = random.Random(42)
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        self.payloads = ["".join(rnd.choice(alphabet) for _ in range(100)) for _ in range(256)]
        self.rnd = rnd
        self.error = None

    def batch(self, start_id, n):
        ts = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")
        r, pl = self.rnd.random, self.payloads
        return "".join(
            f'{{"id":{i},"ts":"{ts}","device":"dev-{i % 100:02d}","value":{r() * 100:.6f},'
            f'"payload":"{pl[i % 256]}"}}\n'
            for i in range(start_id, start_id + n))

    def run(self):
        try:
            files = {p: open(p, "a") for p in self.paths}
            t0 = time.monotonic()
            while not self.stop_event.is_set():
                due = int((time.monotonic() - t0) * self.rate)
                for p, f in files.items():
                    n = due - self.counts[p]
                    if n > 0:
                        f.write(self.batch(self.counts[p], n))  # whole lines only
                        f.flush()
                        self.counts[p] += n
                self.stop_event.wait(BATCH_SECONDS)
            for f in files.values():
                f.close()
        except Exception as e:  # surfaced by the main thread
            self.error = e


def duckdb_measure(metadata, repeats=3):
    """(median ms, rows) of the scan query in a fresh DuckDB connection."""
    from read_table import duckdb_connect

    con = duckdb_connect()
    try:
        m = metadata.replace("'", "''")
        times, rows = [], None
        for _ in range(repeats):
            t = time.perf_counter()
            rows, _avg = con.execute(f"SELECT count(*), avg(value) FROM iceberg_scan('{m}')").fetchone()
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times), rows
    finally:
        con.close()


def events_table(floe_bin, work, name, properties=()):
    """A warehouse `work/name` holding bench.events (partitioned hour(ts)) with `properties`
    (`key=value`) set, and an empty stream file `work/name.ndjson` to feed it: the side's
    {floe, warehouse, stream, table_dir}."""
    wh = os.path.join(work, name)
    os.makedirs(wh)
    floe = Floe(floe_bin, wh)
    floe.json_lines("namespace", "create", "bench")
    (d,) = floe.json_lines("table", "create", TABLE, "--schema", SCHEMA, "--partition", "hour(ts)")
    for kv in properties:
        floe.json_lines("table", "set-property", TABLE, kv)
    stream = os.path.join(work, f"{name}.ndjson")
    open(stream, "w").close()
    return {"floe": floe, "warehouse": wh, "stream": stream, "table_dir": local_path(d["location"])}


def sample(side, t_s, generated):
    floe, tdir = side["floe"], side["table_dir"]
    row = {"t_s": round(t_s, 1), "generated": generated, "error": ""}
    errors = []
    try:
        (q,) = floe.json_lines(
            "sql",
            "SELECT f.files, f.max_per_partition, s.snapshots FROM "
            "(SELECT sum(n) AS files, max(n) AS max_per_partition FROM "
            f"(SELECT partition, count(*) AS n FROM {TABLE}$files GROUP BY partition) p) f "
            f"CROSS JOIN (SELECT count(*) AS snapshots FROM {TABLE}$snapshots) s")
        row.update(live_data_files=q.get("files") or 0, max_files_per_partition=q.get("max_per_partition") or 0,
                   snapshots=q.get("snapshots") or 0)
    except Exception as e:
        errors.append(str(e))
    row["metadata_bytes"] = dir_bytes(os.path.join(tdir, "metadata"))
    row["storage_bytes"] = dir_bytes(tdir)
    try:
        (d,) = floe.json_lines("table", "describe", TABLE)
        if d.get("current_snapshot") is None:
            row.update(duckdb_ms=0.0, duckdb_rows=0)
        else:
            ms, rows = duckdb_measure(local_path(d["metadata_location"]))
            row.update(duckdb_ms=round(ms, 2), duckdb_rows=rows)
    except Exception as e:
        errors.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    row["error"] = " | ".join(errors)
    return row


def start(argv, logfile, procs, name):
    f = open(logfile, "w")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    procs.append((name, p, f))
    log(f"started {name} (pid {p.pid}): {' '.join(argv)}")
    return p


def stop(name, p, timeout):
    """SIGTERM, wait; SIGKILL if it does not exit. Returns the exit code."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{name} (pid {p.pid}) did not exit {timeout}s after SIGTERM: SIGKILL")
            p.kill()
            p.wait()
    return p.returncode


def maintain_runs(catalog_db):
    """Job runs recorded by floe maintain (its run history, in the catalog database)."""
    try:
        con = sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True)
        rows = con.execute(
            "SELECT job, succeeded, count(*), sum(files_read), sum(files_written), sum(files_deleted), "
            "sum(bytes_read), max(finished_ms - started_ms) FROM floe_maintain_runs "
            "GROUP BY job, succeeded ORDER BY job, succeeded DESC").fetchall()
        errors = con.execute(
            "SELECT job, error, count(*) FROM floe_maintain_runs WHERE succeeded = 0 "
            "GROUP BY job, error").fetchall()
        con.close()
        return rows, errors
    except sqlite3.Error as e:
        return [], [("?", f"could not read floe_maintain_runs: {e}", 0)]


# ---------------------------------------------------------------- SVG and summary

PANELS = [("live_data_files", "live data files", 1), ("snapshots", "snapshots", 1),
          ("storage_bytes", "bytes on storage (MiB)", 1 / 2**20), ("duckdb_ms", "DuckDB query (ms, median of 3)", 1)]
COLORS = {"on": "#1f77b4", "off": "#d62728"}


def svg(samples, title, path):
    pw, ph, ml, mr, mt, mb, cols = 420, 230, 62, 16, 34, 42, 2
    out, W = svg_open(title, len(PANELS), pw, ph, cols)
    lx = W - 200
    for i, s in enumerate(SIDES):
        out.append(f'<line x1="{lx + i * 95}" y1="36" x2="{lx + i * 95 + 20}" y2="36" '
                   f'stroke="{COLORS[s]}" stroke-width="2"/>')
        out.append(f'<text x="{lx + i * 95 + 25}" y="40">maintain {s}</text>')
    xmax_raw = max([r["t_s"] for s in SIDES for r in samples[s]] + [1]) / 60
    xmax = nice_max(xmax_raw)
    for k, (key, label, scale) in enumerate(PANELS):
        ox, oy = (k % cols) * pw, 50 + (k // cols) * ph
        x0, x1, y0, y1 = ox + ml, ox + pw - mr, oy + ph - mb, oy + mt
        vals = [float(r[key]) * scale for s in SIDES for r in samples[s] if r.get(key) not in (None, "")]
        ymax = nice_max(max(vals + [0]))
        X = lambda m: x0 + (x1 - x0) * m / xmax
        Y = lambda v: y0 - (y0 - y1) * v / ymax
        out.append(f'<text x="{(x0 + x1) / 2}" y="{oy + 18}" text-anchor="middle" font-size="12" '
                   f'font-weight="bold">{label}</text>')
        for j in range(6):  # y grid and ticks
            v = ymax * j / 5
            out.append(f'<line x1="{x0}" y1="{Y(v):.1f}" x2="{x1}" y2="{Y(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 5}" y="{Y(v) + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
        for j in range(6):  # x ticks
            m = xmax * j / 5
            out.append(f'<line x1="{X(m):.1f}" y1="{y0}" x2="{X(m):.1f}" y2="{y0 + 4}" stroke="black"/>')
            out.append(f'<text x="{X(m):.1f}" y="{y0 + 16}" text-anchor="middle">{fmt(m)}</text>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y0 + 32}" text-anchor="middle">minutes</text>')
        out.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/>')
        out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>')
        for s in SIDES:
            pts = [(X(r["t_s"] / 60), Y(float(r[key]) * scale)) for r in samples[s]
                   if r.get(key) not in (None, "")]
            if pts:
                out.append('<polyline fill="none" stroke="{}" stroke-width="1.8" points="{}"/>'.format(
                    COLORS[s], " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)))
                for x, y in pts:
                    out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{COLORS[s]}"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def stats(rows, key):
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    if not vals:
        return ("-", "-", "-")
    g = lambda v: f"{v:,.0f}" if key != "duckdb_ms" else f"{v:,.1f}"
    return g(vals[0]), g(vals[-1]), g(max(vals))


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floe", default="target/release/floe", help="floe binary")
    p.add_argument("--python", help="interpreter with duckdb + duckdb-extension-{avro,iceberg}; "
                   "the script re-executes itself with it when the current one lacks duckdb")
    p.add_argument("--dir", default="/tmp/floe-steady-state", help="work dir (wiped): warehouses, streams, logs")
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--rate", type=int, default=2000, help="events/s per stream")
    p.add_argument("--sample", type=float, default=30, help="seconds between samples")
    p.add_argument("--out-dir", help="CSVs, SVG and summary (default: --dir)")
    args = p.parse_args()

    need_duckdb(args, "steady_state.py")
    sys.path.insert(0, INTEROP)

    floe_bin = os.path.abspath(shutil.which(args.floe) or args.floe)
    work = os.path.abspath(args.dir)
    out = os.path.abspath(args.out_dir or work)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    os.makedirs(out, exist_ok=True)
    version = subprocess.run([floe_bin, "--version"], capture_output=True, text=True).stdout.strip()
    log(f"{version}; work dir {work}; out dir {out}; {args.minutes} min at {args.rate} events/s per stream")

    sides = {name: dict(events_table(floe_bin, work, name,
                                     [f"history.expire.max-snapshot-age-ms={RETENTION_MS}"]), samples=[])
             for name in SIDES}

    procs, gen, failed = [], None, []
    try:
        for name, s in sides.items():
            s["ingest"] = start(s["floe"].argv("ingest", TABLE, "--source", s["stream"], "--follow",
                                               "--commit-interval", COMMIT_INTERVAL, "--json"),
                                os.path.join(work, f"ingest-{name}.log"), procs, f"ingest {name}")
        maintain = start(sides["on"]["floe"].argv("maintain", "--interval", MAINTAIN_INTERVAL,
                                                  "--listen", "127.0.0.1:0"),
                         os.path.join(work, "maintain-on.log"), procs, "maintain on")
        gen = Generator([s["stream"] for s in sides.values()], args.rate)
        t0 = time.monotonic()
        gen.start()
        duration = args.minutes * 60
        k = 0
        while True:
            t = time.monotonic() - t0
            if gen.error:
                raise RuntimeError(f"generator failed: {gen.error}")
            for name, s in sides.items():
                for pname, proc in (("ingest", s["ingest"]), ("maintain", maintain if name == "on" else None)):
                    if proc is not None and proc.poll() is not None:
                        raise RuntimeError(f"{pname} {name} exited early with rc {proc.returncode}; "
                                           f"see {work}/{pname}-{name}.log")
            for name, s in sides.items():
                row = sample(s, time.monotonic() - t0, gen.counts[s["stream"]])
                s["samples"].append(row)
                log(f"{name:3} t={row['t_s']:6.1f}s gen={row['generated']} files={row.get('live_data_files')} "
                    f"maxpp={row.get('max_files_per_partition')} snaps={row.get('snapshots')} "
                    f"meta={row['metadata_bytes']} store={row['storage_bytes']} "
                    f"duck={row.get('duckdb_ms')}ms rows={row.get('duckdb_rows')} {row['error']}")
            k += 1
            next_t = k * args.sample
            if next_t > duration:
                break
            time.sleep(max(0.0, next_t - (time.monotonic() - t0)))
        time.sleep(max(0.0, duration - (time.monotonic() - t0)))
        gen.stop_event.set()
        gen.join()
        generated = {name: gen.counts[s["stream"]] for name, s in sides.items()}
        log(f"generator stopped after {time.monotonic() - t0:.1f}s: {generated}")
        time.sleep(2)  # let the tailing readers see the last lines
        for name, s in sides.items():
            t = time.monotonic()
            rc = stop(f"ingest {name}", s["ingest"], 120)
            log(f"ingest {name} exited rc {rc} {time.monotonic() - t:.1f}s after SIGTERM")
            if rc != 0:
                failed.append(f"ingest {name} exited with rc {rc}")
        t = time.monotonic()
        rc = stop("maintain on", maintain, 120)
        log(f"maintain on exited rc {rc} {time.monotonic() - t:.1f}s after SIGTERM")
        if rc != 0:
            failed.append(f"maintain exited with rc {rc}")
        t_end = time.monotonic() - t0
        for name, s in sides.items():  # the final state, everything stopped
            row = sample(s, t_end, generated[name])
            s["samples"].append(row)
            s["final"] = row
    except KeyboardInterrupt:
        log("interrupted")
        raise
    finally:
        if gen is not None:
            gen.stop_event.set()
        for name, proc, f in procs:
            if proc.poll() is None:
                log(f"stopping {name} (pid {proc.pid})")
                stop(name, proc, 30)
            f.close()

    # ---- results
    for name, s in sides.items():
        with open(os.path.join(out, f"{name}.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            for r in s["samples"]:
                w.writerow({k: r.get(k, "") for k in FIELDS})
    verdict = {}
    for name, s in sides.items():
        fin = s["final"]
        try:
            (c,) = s["floe"].json_lines("sql", f"SELECT count(*) AS n FROM {TABLE}")
            floe_rows = c["n"]
        except Exception as e:
            floe_rows = f"error: {e}"
        ok = fin.get("duckdb_rows") == generated[name]
        verdict[name] = (generated[name], fin.get("duckdb_rows"), floe_rows, ok)
        print(f"{name}: generated {generated[name]} events, DuckDB reads {fin.get('duckdb_rows')} rows, "
              f"floe sql counts {floe_rows} -> {'OK' if ok else 'MISMATCH'}"
              + (f" ({fin['error']})" if fin["error"] else ""))
        if not ok:
            failed.append(f"{name}: DuckDB reads {fin.get('duckdb_rows')} rows, {generated[name]} generated")

    runs, run_errors = maintain_runs(os.path.join(sides["on"]["warehouse"], "catalog.db"))
    with open(os.path.join(work, "maintain-on.log")) as f:
        mlog = f.read().splitlines()
    log_counts = {}
    notable = []
    for line in mlog:
        body = line[len("[maintain] "):] if line.startswith("[maintain] ") else line
        verb = body.split(" ", 1)[0]
        if verb in ("start", "done", "failed") and line.startswith("[maintain] "):
            job = body.split()[1]
            log_counts[(job, verb)] = log_counts.get((job, verb), 0) + 1
            if verb == "failed":
                notable.append(line)
        elif line.startswith("[maintain] ") or "pass(es)" in line:
            notable.append(line)
    ingest_info = {}
    for name in SIDES:
        with open(os.path.join(work, f"ingest-{name}.log")) as f:
            lines = f.read().splitlines()
        commits = sum(1 for l in lines if l.startswith('{"commit"'))
        final = next((json.loads(l) for l in reversed(lines) if l.startswith("{") and '"stopped_by"' in l), None)
        other = [l for l in lines if not l.startswith("{")]
        ingest_info[name] = (commits, final, other)

    title = (f"floe maintain steady state: {args.rate} events/s, {args.minutes:g} min, commit every "
             f"{COMMIT_INTERVAL}, expiry window 5 min")
    svg({n: s["samples"] for n, s in sides.items()}, title, os.path.join(out, "steady_state.svg"))

    md = [f"# Steady state of `floe maintain` ({version})", "",
          f"- stream: {args.rate} events/s per table (~{args.rate * 0.2:.0f} KB/s of NDJSON), ts = now, "
          f"~100-byte payloads, appended every {BATCH_SECONDS * 1000:.0f} ms; both tables fed at the same time",
          f"- duration: {args.minutes:g} min; `floe ingest --follow --commit-interval {COMMIT_INTERVAL}` on each; "
          f"samples every {args.sample:g} s (last row: after everything stopped)",
          f"- table: `{TABLE}` ({SCHEMA}), partitioned `hour(ts)`; on both tables "
          f"`history.expire.max-snapshot-age-ms={RETENTION_MS}` (5-minute retention window), "
          "every `floe.maintain.*` at its default",
          f"- on: `floe maintain --interval {MAINTAIN_INTERVAL} --listen 127.0.0.1:0` the whole time; off: nothing",
          f"- machine: {os.cpu_count()} cores; DuckDB {__import__('duckdb').__version__} "
          "(`SELECT count(*), avg(value) FROM iceberg_scan(...)`, median of 3, fresh connection)", "",
          "| metric | on first | on last | on max | off first | off last | off max |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    for key in FIELDS[1:9]:
        a, b = stats(sides["on"]["samples"], key), stats(sides["off"]["samples"], key)
        md.append(f"| {key} | {' | '.join(a)} | {' | '.join(b)} |")
    md += ["", "## Correctness", ""]
    for name, (g, d, fr, ok) in verdict.items():
        md.append(f"- {name}: {g} events generated, DuckDB reads {d}, `floe sql` counts {fr}: "
                  f"{'OK' if ok else '**MISMATCH**'}")
    md += ["", "## Ingest", ""]
    for name, (commits, final, other) in ingest_info.items():
        md.append(f"- {name}: {commits} commits; final report: "
                  + (json.dumps({k: final.get(k) for k in ('records', 'commits', 'data_files', 'stopped_by')})
                     if final else "none") + (f"; {len(other)} other log line(s)" if other else ""))
    md += ["", "## floe maintain jobs (run history, floe_maintain_runs)", "",
           "| job | succeeded | runs | files read | files written | files deleted | bytes read | longest (s) |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for job, ok, n, fr, fw, fd, br, longest in runs:
        md.append(f"| {job} | {'yes' if ok else 'no'} | {n} | {fr} | {fw} | {fd} | {br:,} | {(longest or 0) / 1000:.1f} |")
    for job, err, n in run_errors:
        md.append(f"- failed {job} x{n}: {err}")
    md += ["", "Log lines by job: " + ", ".join(f"{j} {v} x{n}" for (j, v), n in sorted(log_counts.items())), "",
           "Other maintain log lines (failures, waits, the exit summary):", "", "```"] + notable[:50] + ["```", ""]
    if failed:
        md += ["## FAILED", ""] + [f"- {f}" for f in failed] + [""]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(md))
    for name in SIDES:
        shutil.copy(os.path.join(work, f"ingest-{name}.log"), out) if out != work else None
    if out != work:
        shutil.copy(os.path.join(work, "maintain-on.log"), out)
    print("\n".join(md))
    log(f"wrote {out}/on.csv, off.csv, steady_state.svg, summary.md")
    if failed:
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
