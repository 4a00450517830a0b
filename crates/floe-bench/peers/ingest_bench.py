"""Ingest benchmark: `floe ingest` from NDJSON and from Kafka into a partitioned table, side by
side with PyIceberg appending the same rows in batches of the same size; then files and average
file size per commit at commit intervals of 1 s, 10 s and 60 s on a steady stream.

Part 1 (throughput). N generated events (id, ts over 3 days, name, payload; ~230 bytes each)
   - floe ingest --source FILE --commit-records B
   - floe ingest --source kafka://.../topic --commit-records B (records produced beforehand)
     and, as its floor, the same topic read by librdkafka alone (`floe-bench kafka-consume`)
   - PyIceberg: pyarrow.json reads the file, table.append() per B rows
   Every run must end with N rows; each runs in its own process under GNU time.
Part 2 (file sizes). A generator appends events at R records/s for T seconds to one file; three
   `floe ingest --follow` processes (intervals 1s, 10s, 60s) ingest it into three tables, then get
   SIGTERM. Files and average file size per commit come from each table's $snapshots.
Prints one JSON object.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "interop"))
sys.path.insert(0, HERE)
from compact_bench import run_measured  # noqa: E402


def event(i, pad):
    return json.dumps({"id": i, "ts": f"2026-03-0{1 + i % 3}T{i % 24:02}:{i % 60:02}:00",
                       "name": f"user-{i % 1000}", "payload": pad})


def floe_cmd(args, wh, *rest):
    return [args.floe, "--warehouse", wh, *rest]


def create(args, wh, table):
    ns = table.split(".")[0]
    subprocess.run(floe_cmd(args, wh, "namespace", "create", ns), capture_output=True)
    subprocess.run(floe_cmd(args, wh, "table", "create", table, "--schema",
                            "id bigint not null, ts timestamp, name string, payload string",
                            "--partition", "day(ts)"), check=True, capture_output=True)


def count(args, wh, table):
    r = subprocess.run(floe_cmd(args, wh, "--json", "sql", f"SELECT count(*) AS n FROM {table}"),
                       check=True, capture_output=True)
    return json.loads(r.stdout.decode().splitlines()[0])["n"]


def pyiceberg_append(wh, table, path, batch):
    import pyarrow as pa
    import pyarrow.json as pj
    from read_table import open_catalog
    cat = open_catalog(f"sqlite:///{wh.lstrip('/')}/catalog.db", "floe", wh)
    t = cat.load_table(table)
    schema = t.schema().as_arrow()
    data = pj.read_json(path, parse_options=pj.ParseOptions(explicit_schema=pa.schema(
        [pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us")), pa.field("name", pa.string()),
         pa.field("payload", pa.string())])))
    data = data.cast(schema)
    for off in range(0, data.num_rows, batch):
        t.append(data.slice(off, batch))
    print(json.dumps({"rows": data.num_rows}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floe", required=True)
    p.add_argument("--floe-bench", required=True)
    p.add_argument("--kafka", default=os.environ.get("FLOE_TEST_KAFKA", "127.0.0.1:19092"))
    p.add_argument("--dir", required=True)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=100_000)
    p.add_argument("--rate", type=int, default=5_000, help="records/s of the steady stream (part 2)")
    p.add_argument("--seconds", type=int, default=150, help="length of the steady stream (part 2)")
    p.add_argument("--skip-part2", action="store_true")
    p.add_argument("--pyiceberg-append", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.pyiceberg_append:
        wh, table, path = args.pyiceberg_append
        pyiceberg_append(wh, table, path, args.batch)
        return
    os.makedirs(args.dir, exist_ok=True)
    wh = os.path.abspath(os.path.join(args.dir, "warehouse"))
    pad = "x" * 150
    path = os.path.join(args.dir, "events.ndjson")
    with open(path, "w") as f:
        for i in range(args.records):
            f.write(event(i, pad) + "\n")
    size = os.path.getsize(path)
    out = {"records": args.records, "input_bytes": size, "batch": args.batch}

    create(args, wh, "b.ndjson")
    s, rss, _ = run_measured(floe_cmd(args, wh, "--json", "ingest", "b.ndjson", "--source", path,
                                      "--commit-records", str(args.batch), "--commit-interval", "1h"))
    assert count(args, wh, "b.ndjson") == args.records
    out["floe_ndjson"] = {"seconds": round(s, 2), "records_per_s": round(args.records / s),
                          "mb_per_s": round(size / s / 1e6, 1), "peak_rss_mib": round(rss)}

    topic = f"bench-{int(time.time())}"
    r = subprocess.run([args.floe_bench, "kafka-produce", "--brokers", args.kafka, "--topic", topic,
                        "--partitions", "3", "--file", path], check=True, capture_output=True)
    out["kafka_produce"] = json.loads(r.stdout)
    # The floor of reading it: the broker and the client alone, on the same cores.
    r = subprocess.run([args.floe_bench, "kafka-consume", "--brokers", args.kafka, "--topic", topic,
                        "--partitions", "3", "--records", str(args.records)], check=True, capture_output=True)
    out["kafka_consume_floor"] = json.loads(r.stdout)
    create(args, wh, "b.kafka")
    idle = 1.0
    started_ms = time.time() * 1000
    whole, rss, stdout = run_measured(floe_cmd(args, wh, "--json", "ingest", "b.kafka", "--source",
                                               f"kafka://{args.kafka}/{topic}", "--commit-records",
                                               str(args.batch), "--commit-interval", "1h",
                                               "--stop-when-idle", f"{idle}s"))
    assert count(args, wh, "b.kafka") == args.records
    # Done when the last record is committed: from the process start to the last commit's
    # time (the idle wait that ends the process, and how often it is checked, left out).
    last_ms = max(json.loads(l)["committed_at_ms"] for l in stdout.splitlines() if '"commit"' in l)
    s = (last_ms - started_ms) / 1000
    out["floe_kafka"] = {"seconds": round(s, 2), "records_per_s": round(args.records / s),
                         "mb_per_s": round(size / s / 1e6, 1), "peak_rss_mib": round(rss),
                         "seconds_with_idle_stop": round(whole, 2)}

    create(args, wh, "b.py")
    s, rss, _ = run_measured([sys.executable, os.path.abspath(__file__), "--floe", "-", "--floe-bench", "-",
                              "--dir", args.dir, "--batch", str(args.batch),
                              "--pyiceberg-append", wh, "b.py", path])
    assert count(args, wh, "b.py") == args.records
    out["pyiceberg_append"] = {"seconds": round(s, 2), "records_per_s": round(args.records / s),
                               "mb_per_s": round(size / s / 1e6, 1), "peak_rss_mib": round(rss)}
    out["ratio_ndjson_vs_pyiceberg"] = round(out["pyiceberg_append"]["seconds"] / out["floe_ndjson"]["seconds"], 2)
    out["ratio_kafka_vs_pyiceberg"] = round(out["pyiceberg_append"]["seconds"] / out["floe_kafka"]["seconds"], 2)

    if not args.skip_part2:
        stream = os.path.join(args.dir, "stream.ndjson")
        open(stream, "w").close()
        procs = {}
        for interval in ("1s", "10s", "60s"):
            table = f"i.every_{interval}"
            create(args, wh, table)
            procs[interval] = subprocess.Popen(
                floe_cmd(args, wh, "--json", "ingest", table, "--source", stream, "--follow",
                         "--commit-interval", interval, "--writer-id", f"steady-{interval}"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        start = time.time()
        i = 0
        with open(stream, "a") as f:
            while time.time() - start < args.seconds:
                target = int((time.time() - start) * args.rate)
                while i < target:
                    f.write(event(i, pad) + "\n")
                    i += 1
                f.flush()
                time.sleep(0.05)
        time.sleep(2)
        steady = {"rate_records_per_s": args.rate, "seconds": args.seconds, "records": i}
        for interval, proc in procs.items():
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            table = f"i.every_{interval}"
            r = subprocess.run(floe_cmd(args, wh, "--json", "sql",
                                        "SELECT count(*) AS commits, sum(CAST(summary['added-data-files'] AS BIGINT)) AS files, "
                                        "sum(CAST(summary['added-files-size'] AS BIGINT)) AS bytes "
                                        f"FROM {table}$snapshots"), check=True, capture_output=True)
            row = json.loads(r.stdout.decode().splitlines()[0])
            assert count(args, wh, table) == i, (interval, count(args, wh, table), i)
            steady[interval] = {"commits": row["commits"], "files": row["files"],
                                "files_per_commit": round(row["files"] / row["commits"], 2),
                                "avg_file_kib": round(row["bytes"] / row["files"] / 1024, 1)}
        out["steady_stream"] = steady
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
