"""Freshness benchmark: 5 s commits with `floe ingest --maintain` vs plain 5 s, 60 s, 300 s commits.

One Kafka stream at a fixed rate (--rate events/s for --minutes) goes into a fresh topic with 3
partitions. Each event is NDJSON of about 150 bytes: a unique `id`, `ts` (event time, the
partition source), `sent_ms` (wall clock at produce), `device`, `value`, `payload`. Event time
runs --time-scale times faster than the wall clock (default 36: 10 wall minutes = 6 event hours,
one hour(ts) partition every 100 wall seconds), so partitions open and close during the run:
ts = base + (now - start) * time_scale, with base on an hour boundary.

One warehouse (SQLite catalog) holds four tables of the same schema, partitioned hour(ts), and
four `floe ingest --json` processes read the same topic from the start, one per table:

  5s+maintain  --commit-interval 5s --maintain   (skipped if `floe ingest --help` has no --maintain;
               table property floe.maintain.compact.partition-idle-time=--idle-time, default 30s)
  5s           --commit-interval 5s
  60s          --commit-interval 60s
  300s         --commit-interval 300s

Visibility latency of an event = the time the first commit whose position for its Kafka
partition is past the event's offset landed, minus the event's sent_ms. Offsets come from the
producer's delivery reports. A commit's time and positions come from its JSON line
(`committed_at_ms`, `positions`); where a line lacks them, from its snapshot in the final
metadata (`timestamp-ms`, `floe.position.*` in the summary); the time, failing that, from when
the driver read the line. The `latency_from` column says which.

After the stream stops every ingest keeps running for --drain seconds (default: the longest
commit interval + 15 s), so each commits the tail of the stream on its own schedule (and the
maintained one may compact the last partition); then SIGTERM makes each commit what is left and
stop. `events_at_shutdown` counts events that only the SIGTERM commit made visible (their latency
is cut short by the driver, not by the variant). Then, per table: live data files, files per
partition-hour (mean, max), average data file size, snapshots (and compactions among them),
metadata and total bytes on storage, a DuckDB query (SELECT date_trunc('hour', ts), count(*),
avg(value) ... GROUP BY 1 through the iceberg extension, median of 5 in a fresh connection),
and a check that rows == distinct ids == events produced (exit 1 otherwise).

Every --sample seconds the driver also reads each table's current metadata (live files,
snapshots, visible rows): freshness.svg plots them over time.

Output: a markdown table on stdout, <out-dir>/freshness.csv, .json and .svg
(default out-dir: crates/floe-bench/results).

Rerun (source /var/tmp/setup.env first for $FLOE_TEST_KAFKA and $FLOE_PYTHON):
  $FLOE_PYTHON crates/floe-bench/peers/freshness.py --floe /var/tmp/floe-target/release/floe \\
      --minutes 10 --rate 2000
Needs duckdb + duckdb-extension-{avro,iceberg} and confluent-kafka in the interpreter
(`$FLOE_PYTHON -m pip install confluent-kafka`; .ci/setup does not install it).
"""
import argparse
import csv
import datetime as dt
import functools
import importlib.metadata
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import Floe, dir_bytes, fmt, local_path, log, nice_max, svg_open  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
INTEROP = os.path.join(HERE, "..", "..", "..", "tests", "interop")
RESULTS = os.path.normpath(os.path.join(HERE, "..", "results"))

NS = "bench"
SCHEMA = "id bigint not null, ts timestamp, sent_ms bigint, device string, value double, payload string"
PARTITIONS = 3
IDLE_PROP = "floe.maintain.compact.partition-idle-time"
POSITION_PREFIX = "floe.position."
# (label, table, commit interval, --maintain)
VARIANTS = [("5s+maintain", "fresh_5s_maintain", "5s", True),
            ("5s", "fresh_5s", "5s", False),
            ("60s", "fresh_60s", "60s", False),
            ("300s", "fresh_300s", "300s", False)]
COLORS = {"5s+maintain": "#1f77b4", "5s": "#d62728", "60s": "#ff7f0e", "300s": "#2ca02c"}
CSV_FIELDS = ["variant", "commit_interval", "maintain", "status", "events", "commits", "latency_p50_s",
              "latency_p99_s", "latency_max_s", "latency_from", "events_at_shutdown", "live_data_files",
              "partitions", "files_per_partition_mean", "files_per_partition_max", "avg_file_kib",
              "live_data_bytes", "snapshots", "compactions", "files_at_stream_end", "metadata_bytes",
              "storage_bytes", "duckdb_ms", "rows", "distinct_ids", "ok", "commit_retries", "max_commit_interval_s",
              "throttled_s", "maintenance_jobs", "maintenance_failed", "rewritten_bytes"]


def seconds(duration):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    if not m:
        raise ValueError(f"not a duration: {duration}")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def percentile(sorted_vals, q):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, math.ceil(q / 100 * len(sorted_vals)) - 1))
    return sorted_vals[k]


def current_metadata(catalog_db, table):
    """The table's current metadata.json (parsed), read straight from the SQLite catalog."""
    for attempt in range(5):
        try:
            con = sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True, timeout=5)
            try:
                row = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? "
                                  "AND table_name = ?", (NS, table)).fetchone()
            finally:
                con.close()
            with open(local_path(row[0])) as f:
                return json.load(f)
        except (sqlite3.OperationalError, FileNotFoundError, json.JSONDecodeError):
            if attempt == 4:
                raise
            time.sleep(0.2)


def metadata_facts(md):
    snaps = md.get("snapshots") or []
    cur = next((s for s in snaps if s["snapshot-id"] == md.get("current-snapshot-id")), None)
    summ = cur["summary"] if cur else {}
    files = int(summ.get("total-data-files", 0))
    size = int(summ.get("total-files-size", 0))
    return {"live_data_files": files, "snapshots": len(snaps), "visible_rows": int(summ.get("total-records", 0)),
            "avg_file_kib": round(size / files / 1024, 1) if files else 0.0}


# ---------------------------------------------------------------- the stream


class Stream:
    """Produces `rate` events/s to the topic (event i to partition i % 3) and records each
    delivered event's (offset, sent_ms) per partition from the delivery reports."""

    def __init__(self, brokers, topic, rate, time_scale, minutes):
        from confluent_kafka import Producer

        self.topic, self.rate, self.time_scale = topic, rate, time_scale
        self.producer = Producer({"bootstrap.servers": brokers, "linger.ms": 5, "enable.idempotence": True})
        self.offsets = [array("q") for _ in range(PARTITIONS)]
        self.sent = [array("q") for _ in range(PARTITIONS)]
        self.errors = []
        self.produced = 0  # produce() calls; delivered = sum(len(offsets))
        rnd = random.Random(42)
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        self.payloads = ["".join(rnd.choice(alphabet) for _ in range(30)) for _ in range(256)]
        self.rnd = rnd
        span_h = minutes * 60 * time_scale / 3600
        self.event_hours = span_h
        now = time.time()
        # Event time starts on an hour boundary, ending no later than the wall clock's hour.
        self.base = (math.floor(now / 3600) - math.ceil(span_h)) * 3600
        self.wall0 = None

    def delivered(self):
        return sum(len(o) for o in self.offsets)

    def _on_delivery(self, sent_ms, err, msg):
        if err is not None:
            self.errors.append(str(err))
            return
        p = msg.partition()
        self.offsets[p].append(msg.offset())
        self.sent[p].append(sent_ms)

    def produce_until(self, n):
        now = time.time()
        sent_ms = int(now * 1000)
        ts = dt.datetime.fromtimestamp(self.base + (now - self.wall0) * self.time_scale, dt.timezone.utc)
        ts = ts.replace(tzinfo=None).isoformat(timespec="microseconds")
        cb = functools.partial(self._on_delivery, sent_ms)
        r, pl = self.rnd.random, self.payloads
        for i in range(self.produced, n):
            v = (f'{{"id":{i},"ts":"{ts}","sent_ms":{sent_ms},"device":"dev-{i % 100:02d}",'
                 f'"value":{r() * 100:.6f},"payload":"{pl[i % 256]}"}}')
            while True:
                try:
                    self.producer.produce(self.topic, value=v, partition=i % PARTITIONS, on_delivery=cb)
                    break
                except BufferError:  # local queue full: serve delivery reports, retry
                    self.producer.poll(0.05)
        self.produced = max(self.produced, n)
        self.producer.poll(0)

    def event_bounds(self):
        return (dt.datetime.fromtimestamp(self.base, dt.timezone.utc).replace(tzinfo=None),
                self.event_hours)


def create_topic(brokers, topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": brokers})
    for _, f in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]).items():
        f.result(30)
    md = admin.list_topics(topic, timeout=30)
    n = len(md.topics[topic].partitions)
    if n != PARTITIONS:
        raise RuntimeError(f"topic {topic} has {n} partitions, wanted {PARTITIONS}")


def delete_topic(brokers, topic):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": brokers})  # held until the futures resolve
    try:
        for _, f in admin.delete_topics([topic]).items():
            f.result(30)
        log(f"deleted topic {topic}")
    except Exception as e:  # the broker keeps it; not a benchmark failure
        log(f"could not delete topic {topic}: {e}")


# ---------------------------------------------------------------- the ingest processes


class Ingest:
    """One `floe ingest --json` process: stdout lines timestamped as they are read."""

    def __init__(self, label, argv, workdir):
        self.label = label
        self.stdout_log = open(os.path.join(workdir, f"ingest-{label}.stdout"), "w")
        self.stderr_log = open(os.path.join(workdir, f"ingest-{label}.stderr"), "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.stderr_log, text=True,
                                     bufsize=1, start_new_session=True)
        self.commits, self.other, self.summary, self.error = [], [], None, None
        self.sigterm_ms = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        log(f"started ingest {label} (pid {self.proc.pid}): {' '.join(argv)}")

    def _read(self):
        for line in self.proc.stdout:
            read_ms = int(time.time() * 1000)
            self.stdout_log.write(line)
            self.stdout_log.flush()
            try:
                obj = json.loads(line)
            except ValueError:
                self.other.append(line.strip())
                continue
            if isinstance(obj, dict) and "commit" in obj and "snapshot_id" in obj:
                obj["_read_ms"] = read_ms
                self.commits.append(obj)
            elif isinstance(obj, dict) and "stopped_by" in obj:
                self.summary = obj
            elif isinstance(obj, dict) and "error" in obj:
                self.error = obj["error"]
            else:
                self.other.append(line.strip())

    def alive(self):
        return self.proc.poll() is None

    def terminate(self):
        if self.alive():
            self.sigterm_ms = int(time.time() * 1000)
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout):
        """Wait for the exit (SIGKILL after timeout); returns the exit code."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"ingest {self.label} (pid {self.proc.pid}) did not exit {timeout}s after SIGTERM: SIGKILL")
            self.proc.kill()
            self.proc.wait()
        self.reader.join(10)
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            log(f"stopping ingest {self.label} (pid {self.proc.pid})")
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stdout_log.close()
        self.stderr_log.close()


class Sampler(threading.Thread):
    """Every `every` seconds: each table's live files, snapshots and visible rows from its metadata."""

    def __init__(self, catalog_db, tables, stream, t0, every):
        super().__init__(daemon=True)
        self.catalog_db, self.tables, self.stream, self.t0, self.every = catalog_db, tables, stream, t0, every
        self.samples = {label: [] for label in tables}
        self.stop_event = threading.Event()

    def sample(self):
        t_s = round(time.monotonic() - self.t0, 1)
        produced = self.stream.delivered()
        for label, table in self.tables.items():
            row = {"t_s": t_s, "produced": produced}
            try:
                row.update(metadata_facts(current_metadata(self.catalog_db, table)))
            except Exception as e:
                row["error"] = str(e)
            if "visible_rows" in row:
                row["not_visible"] = max(0, produced - row["visible_rows"])
            self.samples[label].append(row)

    def run(self):
        k = 0
        while not self.stop_event.is_set():
            self.sample()
            k += 1
            self.stop_event.wait(max(0.0, self.t0 + k * self.every - time.monotonic()))


# ---------------------------------------------------------------- measurements


def commit_timeline(ingest, md, topic):
    """[(committed_at_ms, {partition: next offset}, after_sigterm)] in commit order, positions
    carried forward, plus where times and positions came from."""
    snaps = {s["snapshot-id"]: s for s in md.get("snapshots") or []}
    streams = {f"kafka:{topic}:{p}": p for p in range(PARTITIONS)}
    time_from, pos_from = set(), set()
    out, cur = [], [0] * PARTITIONS
    for c in ingest.commits:
        snap = snaps.get(c["snapshot_id"])
        if isinstance(c.get("committed_at_ms"), int):
            at = c["committed_at_ms"]
            time_from.add("commit line")
        elif snap is not None:
            at = snap["timestamp-ms"]
            time_from.add("snapshot timestamp")
        else:
            at = c["_read_ms"]
            time_from.add("line read time")
        pos = None
        if isinstance(c.get("positions"), dict):
            pos = c["positions"]
            pos_from.add("commit line")
        elif snap is not None:
            pos = {k[len(POSITION_PREFIX):]: v for k, v in snap["summary"].items() if k.startswith(POSITION_PREFIX)}
            pos_from.add("snapshot summary")
        else:
            pos_from.add("missing (snapshot expired?)")
        for stream, off in (pos or {}).items():
            if stream in streams:
                cur[streams[stream]] = max(cur[streams[stream]], int(off))
        after_term = ingest.sigterm_ms is not None and c["_read_ms"] >= ingest.sigterm_ms
        out.append((at, list(cur), after_term))
    return out, f"time: {', '.join(sorted(time_from)) or '-'}; positions: {', '.join(sorted(pos_from)) or '-'}"


def latencies(stream, timeline):
    """(sorted latencies in ms, events only the shutdown commit covered, events no commit covered)."""
    lat, at_shutdown, uncovered = [], 0, 0
    for p in range(PARTITIONS):
        offs, sent = stream.offsets[p], stream.sent[p]
        order = range(len(offs))
        if any(offs[i] > offs[i + 1] for i in range(len(offs) - 1)):
            order = sorted(order, key=offs.__getitem__)
        j = 0
        for i in order:
            off = offs[i]
            while j < len(timeline) and timeline[j][1][p] <= off:
                j += 1
            if j == len(timeline):
                uncovered += 1
                continue
            lat.append(timeline[j][0] - sent[i])
            at_shutdown += timeline[j][2]
    lat.sort()
    return lat, at_shutdown, uncovered


def duckdb_measure(metadata_path, repeats=5):
    """(median ms of the hourly query, rows, distinct ids) in a fresh DuckDB connection."""
    from read_table import duckdb_connect

    con = duckdb_connect()
    try:
        m = metadata_path.replace("'", "''")
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            con.execute(f"SELECT date_trunc('hour', ts) AS hour, count(*) AS events, avg(value) AS avg_value "
                        f"FROM iceberg_scan('{m}') GROUP BY 1 ORDER BY 1").fetchall()
            times.append((time.perf_counter() - t) * 1000)
        rows, distinct = con.execute(f"SELECT count(*), count(DISTINCT id) FROM iceberg_scan('{m}')").fetchone()
        return statistics.median(times), rows, distinct
    finally:
        con.close()


def measure_table(floe, table):
    q = f"{NS}.{table}"
    parts = floe.json_lines("sql", f"SELECT partition, count(*) AS n, sum(file_size_in_bytes) AS b "
                                   f"FROM {q}$data_files GROUP BY partition")
    (s,) = floe.json_lines("sql", f"SELECT count(*) AS n, sum(CASE WHEN operation = 'replace' THEN 1 ELSE 0 END) AS r "
                                  f"FROM {q}$snapshots")
    (d,) = floe.json_lines("table", "describe", q)
    tdir = local_path(d["location"])
    files = sum(p["n"] for p in parts)
    size = sum(p["b"] or 0 for p in parts)
    row = {"live_data_files": files, "partitions": len(parts),
           "files_per_partition_mean": round(files / len(parts), 2) if parts else 0,
           "files_per_partition_max": max((p["n"] for p in parts), default=0),
           "avg_file_kib": round(size / files / 1024, 1) if files else 0,
           "live_data_bytes": size, "snapshots": s["n"], "compactions": s["r"] or 0,
           "metadata_bytes": dir_bytes(os.path.join(tdir, "metadata")), "storage_bytes": dir_bytes(tdir),
           "per_partition": sorted(({"partition": p["partition"], "files": p["n"], "bytes": p["b"]} for p in parts),
                                   key=lambda x: json.dumps(x["partition"], sort_keys=True))}
    if d.get("current_snapshot") is None:
        row.update(duckdb_ms=0.0, rows=0, distinct_ids=0)
    else:
        ms, rows, distinct = duckdb_measure(local_path(d["metadata_location"]))
        row.update(duckdb_ms=round(ms, 1), rows=rows, distinct_ids=distinct)
    return row, local_path(d["metadata_location"])


# ---------------------------------------------------------------- SVG


PANELS = [("live_data_files", "live data files"), ("snapshots", "snapshots"),
          ("avg_file_kib", "average data file size (KiB)"), ("not_visible", "events produced, not yet visible")]


def svg(samples, labels, title, stream_end_s, path):
    pw, ph, ml, mr, mt, mb, cols = 420, 230, 62, 16, 34, 42, 2
    out, W = svg_open(title, len(PANELS), pw, ph, cols)
    lx = W - 110 * len(labels)
    for i, s in enumerate(labels):
        out.append(f'<line x1="{lx + i * 110}" y1="36" x2="{lx + i * 110 + 20}" y2="36" '
                   f'stroke="{COLORS[s]}" stroke-width="2"/>')
        out.append(f'<text x="{lx + i * 110 + 25}" y="40">{s}</text>')
    xmax = nice_max(max([r["t_s"] for s in labels for r in samples[s]] + [1]) / 60)
    for k, (key, label) in enumerate(PANELS):
        ox, oy = (k % cols) * pw, 50 + (k // cols) * ph
        x0, x1, y0, y1 = ox + ml, ox + pw - mr, oy + ph - mb, oy + mt
        vals = [float(r[key]) for s in labels for r in samples[s] if r.get(key) is not None]
        ymax = nice_max(max(vals + [0]))
        X = lambda m: x0 + (x1 - x0) * m / xmax
        Y = lambda v: y0 - (y0 - y1) * v / ymax
        out.append(f'<text x="{(x0 + x1) / 2}" y="{oy + 18}" text-anchor="middle" font-size="12" '
                   f'font-weight="bold">{label}</text>')
        for j in range(6):
            v = ymax * j / 5
            out.append(f'<line x1="{x0}" y1="{Y(v):.1f}" x2="{x1}" y2="{Y(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 5}" y="{Y(v) + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
        for j in range(6):
            m = xmax * j / 5
            out.append(f'<line x1="{X(m):.1f}" y1="{y0}" x2="{X(m):.1f}" y2="{y0 + 4}" stroke="black"/>')
            out.append(f'<text x="{X(m):.1f}" y="{y0 + 16}" text-anchor="middle">{fmt(m)}</text>')
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y0 + 32}" text-anchor="middle">wall minutes</text>')
        out.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/>')
        out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>')
        xe = X(stream_end_s / 60)
        out.append(f'<line x1="{xe:.1f}" y1="{y0}" x2="{xe:.1f}" y2="{y1}" stroke="#888" stroke-dasharray="4,3"/>')
        for s in labels:
            pts = [(X(r["t_s"] / 60), Y(float(r[key]))) for r in samples[s] if r.get(key) is not None]
            if pts:
                out.append('<polyline fill="none" stroke="{}" stroke-width="1.6" points="{}"/>'.format(
                    COLORS[s], " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floe", default="/var/tmp/floe-target/release/floe", help="floe binary")
    p.add_argument("--python", default=os.environ.get("FLOE_PYTHON"),
                   help="interpreter with duckdb + duckdb-extension-{avro,iceberg} + confluent-kafka; the script "
                        "re-executes itself with it when the current one lacks them (default $FLOE_PYTHON)")
    p.add_argument("--kafka", default=os.environ.get("FLOE_TEST_KAFKA", "127.0.0.1:19092"), help="broker HOST:PORT")
    p.add_argument("--minutes", type=float, default=10, help="how long the stream runs (wall clock)")
    p.add_argument("--rate", type=int, default=2000, help="events/s")
    p.add_argument("--time-scale", type=float, default=36,
                   help="event time runs this many times faster than the wall clock")
    p.add_argument("--idle-time", default="30s", help=f"{IDLE_PROP} on the maintained table")
    p.add_argument("--maintain-property", action="append", default=[], metavar="K=V",
                   help="another table property for the maintained table (repeatable)")
    p.add_argument("--drain", type=float,
                   help="seconds every ingest keeps running after the stream stops, before SIGTERM "
                        "(default: the longest commit interval + 15)")
    p.add_argument("--sample", type=float, default=10, help="seconds between metadata samples (for the plot)")
    p.add_argument("--dir", default="/tmp/floe-freshness", help="work dir (wiped): warehouse and logs")
    p.add_argument("--out-dir", default=RESULTS, help="freshness.csv / .json / .svg go here")
    p.add_argument("--keep", action="store_true",
                   help="keep the work dir and the Kafka topic (else both are removed after a successful run)")
    args = p.parse_args()

    try:
        import duckdb  # noqa: F401
        import confluent_kafka  # noqa: F401
    except ImportError as e:
        if args.python and os.path.realpath(args.python) != os.path.realpath(sys.executable):
            os.execv(args.python, [args.python, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit(f"freshness.py: {e}; run it with an interpreter that has duckdb, duckdb-extension-iceberg and "
                 "confluent-kafka (--python, $FLOE_PYTHON; `pip install confluent-kafka`)")
    sys.path.insert(0, INTEROP)

    floe_bin = os.path.abspath(shutil.which(args.floe) or args.floe)
    work, out = os.path.abspath(args.dir), os.path.abspath(args.out_dir)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    os.makedirs(out, exist_ok=True)
    version = subprocess.run([floe_bin, "--version"], capture_output=True, text=True).stdout.strip()
    help_text = subprocess.run([floe_bin, "ingest", "--help"], capture_output=True, text=True).stdout
    has_maintain = re.search(r"--maintain\b", help_text) is not None
    variants = []
    for label, table, interval, maintain in VARIANTS:
        if maintain and not has_maintain:
            log(f"SKIPPING {label}: `{floe_bin} ingest --help` has no --maintain flag (this build predates it)")
            continue
        variants.append((label, table, interval, maintain))
    drain = args.drain if args.drain is not None else max(seconds(v[2]) for v in variants) + 15
    duration = args.minutes * 60
    topic = f"freshness-{int(time.time())}"
    wh = os.path.join(work, "warehouse")
    os.makedirs(wh)
    floe = Floe(floe_bin, wh)
    catalog_db = os.path.join(wh, "catalog.db")
    log(f"{version}; work dir {work}; out dir {out}; topic {topic} ({PARTITIONS} partitions) on {args.kafka}")
    log(f"{args.minutes:g} min at {args.rate} events/s; event time runs {args.time_scale:g}x the wall clock "
        f"({args.minutes:g} wall min = {args.minutes * args.time_scale / 60:g} event hours; one hour(ts) partition "
        f"every {3600 / args.time_scale:g} wall s); drain {drain:g} s")

    floe.json_lines("namespace", "create", NS)
    for label, table, interval, maintain in variants:
        floe.json_lines("table", "create", f"{NS}.{table}", "--schema", SCHEMA, "--partition", "hour(ts)")
        if maintain:
            props = [f"{IDLE_PROP}={args.idle_time}", *args.maintain_property]
            floe.json_lines("table", "set-property", f"{NS}.{table}", *props)
            log(f"{NS}.{table}: {', '.join(props)}")
    create_topic(args.kafka, topic)

    ingests, sampler, stream, failed = {}, None, None, []
    stream_end_s, results = None, {}
    try:
        stream = Stream(args.kafka, topic, args.rate, args.time_scale, args.minutes)
        source = f"kafka://{args.kafka}/{topic}?start=earliest"
        for label, table, interval, maintain in variants:
            argv = floe.argv("ingest", f"{NS}.{table}", "--source", source, "--commit-interval", interval, "--json")
            if maintain:
                argv.append("--maintain")
            ingests[label] = Ingest(label, argv, work)
        time.sleep(3)  # let every ingest connect; they read from the start anyway
        for label, ing in ingests.items():
            if not ing.alive():
                raise RuntimeError(f"ingest {label} exited at start with rc {ing.proc.returncode}; "
                                   f"see {work}/ingest-{label}.stderr")
        base, hours = stream.event_bounds()
        log(f"stream starts: event time {base.isoformat()} + {hours:g} h")
        t0 = time.monotonic()
        stream.wall0 = time.time()
        sampler = Sampler(catalog_db, {v[0]: v[1] for v in variants}, stream, t0, args.sample)
        sampler.start()
        next_check, next_log = 1.0, 60.0
        while True:
            el = time.monotonic() - t0
            if el >= duration:
                break
            stream.produce_until(int(el * args.rate))
            if el >= next_check:
                next_check += 1
                if stream.errors:
                    raise RuntimeError(f"delivery failed: {stream.errors[0]} ({len(stream.errors)} errors)")
                for label, ing in ingests.items():
                    if not ing.alive():
                        raise RuntimeError(f"ingest {label} exited early with rc {ing.proc.returncode}; "
                                           f"see {work}/ingest-{label}.stderr")
            if el >= next_log:
                next_log += 60
                log(f"t={el:.0f}s produced {stream.produced}, delivered {stream.delivered()}; commits "
                    + ", ".join(f"{l} {len(i.commits)}" for l, i in ingests.items()))
            time.sleep(0.005)
        stream.produce_until(int(duration * args.rate))
        left = stream.producer.flush(60)
        stream_end_s = time.monotonic() - t0
        if left or stream.errors or stream.delivered() != stream.produced:
            raise RuntimeError(f"producer: {stream.produced} produced, {stream.delivered()} delivered, {left} "
                               f"undelivered, {len(stream.errors)} errors {stream.errors[:3]}")
        produced = stream.produced
        sampler.sample()  # the layout right when the stream stops
        at_end = {label: rows[-1] for label, rows in sampler.samples.items()}
        log(f"stream stopped after {stream_end_s:.1f}s: {produced} events delivered; draining {drain:g}s")
        deadline = time.monotonic() + drain
        while time.monotonic() < deadline:
            for label, ing in ingests.items():
                if not ing.alive():
                    raise RuntimeError(f"ingest {label} exited early with rc {ing.proc.returncode}; "
                                       f"see {work}/ingest-{label}.stderr")
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        for ing in ingests.values():
            ing.terminate()
        for label, ing in ingests.items():
            t = time.monotonic()
            rc = ing.wait(180)
            log(f"ingest {label} exited rc {rc} {time.monotonic() - t:.1f}s after SIGTERM; "
                f"{len(ing.commits)} commits, {len(ing.other)} other stdout line(s)")
            if rc != 0:
                failed.append(f"ingest {label} exited with rc {rc}: {ing.error or 'see its stderr'}")
        sampler.stop_event.set()
        sampler.join()
        sampler.sample()

        # ---- measure every table
        for label, table, interval, maintain in variants:
            ing = ingests[label]
            row, md_path = measure_table(floe, table)
            with open(md_path) as f:
                md = json.load(f)
            timeline, src = commit_timeline(ing, md, topic)
            lat, at_shutdown, uncovered = latencies(stream, timeline)
            ok = row["rows"] == produced and row["distinct_ids"] == produced
            if not ok:
                failed.append(f"{label}: {row['rows']} rows, {row['distinct_ids']} distinct ids, "
                              f"{produced} events produced")
            if uncovered and "missing" not in src:
                failed.append(f"{label}: {uncovered} events past every committed position")
            row.update(variant=label, commit_interval=interval, maintain=maintain, status="ran", events=produced,
                       commits=len(ing.commits), latency_from=src, events_at_shutdown=at_shutdown,
                       latency_uncovered=uncovered, files_at_stream_end=at_end[label].get("live_data_files"),
                       ok=ok, ingest_summary=ing.summary, other_stdout=ing.other[:20],
                       commit_log=[{k: c.get(k) for k in ("commit", "snapshot_id", "records", "data_files",
                                                          "bytes", "committed_at_ms", "positions", "attempts",
                                                          "commit_interval_ms", "debt", "_read_ms")}
                                   for c in ing.commits])
            summ = ing.summary or {}
            maint = summ.get("maintenance") or {}
            intervals = [c["commit_interval_ms"] for c in ing.commits if isinstance(c.get("commit_interval_ms"), int)]
            row.update(commit_retries=sum(max(0, (c.get("attempts") or 1) - 1) for c in ing.commits),
                       max_commit_interval_s=round(max(intervals) / 1000, 1) if intervals else "",
                       throttled_s=round(summ["throttled_ms"] / 1000, 1) if "throttled_ms" in summ else "",
                       maintenance_jobs=" ".join(f"{k}={v}" for k, v in sorted((maint.get("succeeded_by_job")
                                                                             or {}).items())),
                       maintenance_failed=maint.get("jobs_failed", ""),
                       rewritten_bytes=maint.get("rewritten_bytes", ""))
            for q, key in ((50, "latency_p50_s"), (99, "latency_p99_s"), (100, "latency_max_s")):
                v = percentile(lat, q)
                row[key] = round(v / 1000, 2) if v is not None else None
            results[label] = row
    except KeyboardInterrupt:
        log("interrupted")
        raise
    finally:
        if sampler is not None:
            sampler.stop_event.set()
        for ing in ingests.values():
            ing.close()

    for label, table, interval, maintain in VARIANTS:
        if label not in results:
            results[label] = {"variant": label, "commit_interval": interval, "maintain": maintain,
                              "status": "skipped: floe ingest has no --maintain"}

    # ---- results
    base, hours = stream.event_bounds()
    labels = [v[0] for v in variants]
    description = [
        f"- {version}; {os.cpu_count()} cores; DuckDB {__import__('duckdb').__version__}; "
        f"confluent-kafka {importlib.metadata.version('confluent-kafka')}",
        f"- stream: {args.rate} events/s for {args.minutes:g} min ({produced:,} events, ~150 B of JSON each) "
        f"into a fresh topic of {PARTITIONS} partitions; all ingests read it concurrently from the start",
        f"- **event time is compressed**: ts runs {args.time_scale:g}x the wall clock, from {base.isoformat()} "
        f"over {hours:g} event hours, so an hour(ts) partition opens every {3600 / args.time_scale:g} wall "
        f"seconds and closes after it",
        f"- tables partitioned hour(ts); maintained table: `{IDLE_PROP}={args.idle_time}`"
        + (f", {', '.join(args.maintain_property)}" if args.maintain_property else ""),
        f"- after the stream: {drain:g} s of drain, then SIGTERM (final commit); latency = commit landed - sent_ms",
        f"- DuckDB: hourly count/avg through iceberg_scan, median of 5, fresh connection",
    ]
    head = ["variant", "commits", "p50 (s)", "p99 (s)", "max (s)", "live files", "files/partition mean",
            "files/partition max", "avg file (KiB)", "snapshots (compactions)", "files at stream end",
            "metadata (MiB)", "storage (MiB)", "DuckDB (ms)", "rows = ids = events"]
    md = ["# Freshness: commit interval vs file layout", ""] + description + ["",
          "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for label, *_ in VARIANTS:
        r = results[label]
        if r["status"] != "ran":
            md.append(f"| {label} | {r['status']} |" + " |" * (len(head) - 2))
            continue
        mib = lambda b: f"{b / 2**20:.2f}"
        md.append(" | ".join([
            f"| {label}", str(r["commits"]), str(r["latency_p50_s"]), str(r["latency_p99_s"]),
            str(r["latency_max_s"]), str(r["live_data_files"]), str(r["files_per_partition_mean"]),
            str(r["files_per_partition_max"]), f"{r['avg_file_kib']:,.1f}", f"{r['snapshots']} ({r['compactions']})",
            str(r["files_at_stream_end"]), mib(r["metadata_bytes"]), mib(r["storage_bytes"]), f"{r['duckdb_ms']:.1f}",
            ("OK" if r["ok"] else f"**{r['rows']} / {r['distinct_ids']} / {r['events']}**") + " |"]))
    md.append("")
    for label in labels:
        r = results[label]
        notes = [f"latency from {r['latency_from']}",
                 f"{r['events_at_shutdown']} events made visible only by the SIGTERM commit"]
        notes += [f"{k} {r[k]}" for k in ("commit_retries", "max_commit_interval_s", "throttled_s", "maintenance_jobs",
                                          "maintenance_failed", "rewritten_bytes") if r.get(k) not in ("", None)]
        if r["latency_uncovered"]:
            notes.append(f"{r['latency_uncovered']} events past every committed position")
        if r["other_stdout"]:
            notes.append(f"{len(r['other_stdout'])} other stdout line(s), e.g. {r['other_stdout'][0][:200]}")
        md.append(f"- {label}: " + "; ".join(notes))
    if failed:
        md += ["", "## FAILED", ""] + [f"- {f}" for f in failed]
    md.append("")
    print("\n".join(md))

    with open(os.path.join(out, "freshness.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for label, *_ in VARIANTS:
            w.writerow({k: results[label].get(k, "") for k in CSV_FIELDS})
    config = {"floe": version, "minutes": args.minutes, "rate": args.rate, "time_scale": args.time_scale,
              "event_time_base": base.isoformat(), "event_hours": hours, "idle_time": args.idle_time,
              "maintain_properties": args.maintain_property, "drain_s": drain, "topic": topic,
              "partitions": PARTITIONS, "events": produced, "stream_end_s": round(stream_end_s, 1),
              "cores": os.cpu_count(), "failed": failed}
    with open(os.path.join(out, "freshness.json"), "w") as f:
        json.dump({"config": config, "variants": [results[v[0]] for v in VARIANTS],
                   "samples": sampler.samples}, f, indent=1, default=str)
    title = (f"freshness: {args.rate} events/s for {args.minutes:g} min, event time x{args.time_scale:g}, "
             f"hour(ts); dashed: stream end")
    svg(sampler.samples, labels, title, stream_end_s, os.path.join(out, "freshness.svg"))
    log(f"wrote {out}/freshness.csv, freshness.json, freshness.svg")

    if failed:
        log(f"kept {work} and topic {topic} for a look")
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        sys.exit(1)
    if not args.keep:
        delete_topic(args.kafka, topic)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
