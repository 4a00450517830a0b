//! The end-to-end suite on production backends: an Iceberg REST catalog with S3 storage, both
//! served for real by SeaweedFS (`weed mini`, started by `.ci/setup`). Every command runs
//! through the `floe` binary configured by a `floe.toml`, and PyIceberg's RestCatalog plus
//! DuckDB (through S3) read each table floe wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Connection settings from `.ci/setup`.
struct Servers {
    rest_uri: String,
    warehouse: String,
    credential: String,
    s3_endpoint: String,
    access_key: String,
    secret_key: String,
    region: String,
}

impl Servers {
    fn from_env() -> Self {
        let var = |k: &str| {
            std::env::var(k).unwrap_or_else(|_| {
                panic!("{k} is not set: run the tests through .ci/test, which starts SeaweedFS")
            })
        };
        Self {
            rest_uri: var("FLOE_TEST_REST_URI"),
            warehouse: var("FLOE_TEST_REST_WAREHOUSE"),
            credential: var("FLOE_TEST_REST_CREDENTIAL"),
            s3_endpoint: var("FLOE_TEST_S3_ENDPOINT"),
            access_key: var("FLOE_TEST_S3_ACCESS_KEY"),
            secret_key: var("FLOE_TEST_S3_SECRET_KEY"),
            region: var("FLOE_TEST_S3_REGION"),
        }
    }

    /// `[catalog.lake]` (REST + S3) as a user would write it, plus a SQL catalog whose
    /// warehouse is an S3 bucket.
    fn config_toml(&self, sql_db: &Path) -> String {
        format!(
            r#"default-catalog = "lake"

[catalog.lake]
type = "rest"
uri = "{uri}"
warehouse = "{wh}"
credential = "{cred}"
"s3.endpoint" = "{ep}"
"s3.access-key-id" = "{ak}"
"s3.secret-access-key" = "{sk}"
"s3.region" = "{region}"
"s3.path-style-access" = true

[catalog.sqls3]
uri = "sqlite://{db}"
warehouse = "s3://lake/floe-sql"
"s3.endpoint" = "{ep}"
"s3.access-key-id" = "{ak}"
"s3.secret-access-key" = "{sk}"
"s3.region" = "{region}"
"s3.path-style-access" = true
"#,
            uri = self.rest_uri,
            wh = self.warehouse,
            cred = self.credential,
            ep = self.s3_endpoint,
            ak = self.access_key,
            sk = self.secret_key,
            region = self.region,
            db = sql_db.display(),
        )
    }
}

struct Lake {
    dir: tempfile::TempDir,
    servers: Servers,
    /// A namespace unique to this run (the SeaweedFS data dir outlives test runs).
    ns: String,
}

impl Lake {
    fn new(tag: &str) -> Self {
        let servers = Servers::from_env();
        let dir = tempfile::tempdir().unwrap();
        let config = servers.config_toml(&dir.path().join("sql-catalog.db"));
        std::fs::write(dir.path().join("floe.toml"), config).unwrap();
        let ns = format!("e2e_{tag}_{}", uuid::Uuid::new_v4().simple());
        Self { dir, servers, ns }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs floe in the test directory, where `floe.toml` is found by default.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_floe"))
            .current_dir(self.path())
            .args(args)
            .env_remove("FLOE_WAREHOUSE")
            .env_remove("FLOE_CATALOG")
            .env_remove("FLOE_CONFIG")
            .output()
            .expect("floe runs")
    }

    fn ok(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(
            out.status.success(),
            "floe {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    /// Runs floe expecting failure; returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "floe {args:?} should fail");
        String::from_utf8_lossy(&out.stderr).to_string()
    }

    fn sql_row(&self, query: &str) -> Value {
        // `sql --json` prints one JSON object per row.
        self.ok(&["sql", query])
    }

    /// PyIceberg (RestCatalog) and DuckDB (iceberg_scan over S3) read the table.
    fn read_rest(&self, table: &str) -> Value {
        python(&[
            script("read_rest.py").to_str().unwrap(),
            "--table",
            table,
            "--sum-column",
            "id",
        ])
    }

    /// Writes an NDJSON file of rows `ids` (3 days of timestamps) and returns its path.
    fn ndjson(&self, name: &str, ids: std::ops::Range<u64>) -> PathBuf {
        let p = self.path().join(name);
        let mut s = String::new();
        for i in ids {
            s.push_str(&format!(
                "{{\"id\":{i},\"ts\":\"2026-11-0{}T10:00:00\",\"name\":\"n{}\",\"amount\":{}.5}}\n",
                1 + i % 3,
                i % 7,
                i
            ));
        }
        std::fs::write(&p, s).unwrap();
        p
    }

    /// `remove-orphan-files --older-than 0s --force --dry-run`: what is unreferenced now.
    fn orphan_dry_run(&self, table: &str) -> Value {
        self.ok(&[
            "remove-orphan-files",
            table,
            "--older-than",
            "0s",
            "--force",
            "--dry-run",
        ])
    }

    /// Writes an NDJSON file of `{"id": i}` rows.
    fn ndjson_ids(&self, name: &str, ids: std::ops::Range<u64>) -> PathBuf {
        let p = self.path().join(name);
        let s: String = ids.map(|i| format!("{{\"id\":{i}}}\n")).collect();
        std::fs::write(&p, s).unwrap();
        p
    }

    /// Writes one object straight to S3 (an orphan no commit references).
    fn put_object(&self, uri: &str) {
        let code = format!(
            "import sys\nfrom pyarrow import fs\ns3 = fs.S3FileSystem(access_key={ak:?}, secret_key={sk:?}, \
             endpoint_override={ep:?}, region={region:?}, scheme='http', force_virtual_addressing=False)\n\
             with s3.open_output_stream({key:?}) as f:\n    f.write(b'PAR1 not a real file')\n",
            ak = self.servers.access_key,
            sk = self.servers.secret_key,
            ep = self.servers.s3_endpoint.trim_start_matches("http://"),
            region = self.servers.region,
            key = uri.trim_start_matches("s3://"),
        );
        let out = Command::new(python_bin())
            .args(["-c", &code])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "put {uri}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Lake {
    /// One call of the REST API with the test credential, as Python's urllib makes it (another
    /// engine's commit); returns the answer's JSON.
    fn rest_call(&self, method: &str, path: &str, body: &Value) -> Value {
        let (id, secret) = self.servers.credential.split_once(':').unwrap();
        let code = format!(
            "import json, sys, urllib.parse, urllib.request\n\
             base = {uri:?}\n\
             form = urllib.parse.urlencode({{'grant_type': 'client_credentials', 'client_id': {id:?}, \
             'client_secret': {secret:?}, 'scope': 'catalog'}}).encode()\n\
             token = json.load(urllib.request.urlopen(base + '/v1/oauth/tokens', form))['access_token']\n\
             body = sys.stdin.read().encode() if {has_body} else None\n\
             req = urllib.request.Request(base + '/v1/' + {path:?}, data=body, method={method:?}, \
             headers={{'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'}})\n\
             print(urllib.request.urlopen(req).read().decode())\n",
            uri = self.servers.rest_uri,
            has_body = if body.is_null() { "False" } else { "True" },
        );
        let mut child = Command::new(python_bin())
            .args(["-c", &code])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{method} {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Lake {
    fn drop(&mut self) {
        // Best effort: drop what this run created so the shared server stays small.
        let out = self.run(&["--json", "table", "list", &self.ns]);
        if let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) {
            for t in v.as_array().into_iter().flatten() {
                if let Some(t) = t.as_str() {
                    let _ = self.run(&["table", "drop", t, "--purge"]);
                }
            }
        }
    }
}

fn python_bin() -> String {
    std::env::var("FLOE_PYTHON").unwrap_or_else(|_| {
        panic!("FLOE_PYTHON is not set: run the tests through .ci/test, which creates the venv")
    })
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop")
        .join(name)
}

fn python(args: &[&str]) -> Value {
    let out = Command::new(python_bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "python {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Both independent readers agree with each other and with the expected rows and id sum.
fn assert_readers(v: &Value, rows: u64, sum: u64) -> String {
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(v[reader]["rows"], rows, "{reader}: {v}");
        assert_eq!(v[reader]["sum"], sum, "{reader}: {v}");
    }
    assert_eq!(v["pyiceberg"]["checksum"], v["duckdb"]["checksum"], "{v}");
    assert_eq!(v["pyiceberg"]["files"], v["duckdb"]["files"], "{v}");
    v["pyiceberg"]["checksum"].as_str().unwrap().to_string()
}

/// True when diagnose's observation `id` holds.
fn holds(report: &Value, id: &str) -> bool {
    report["observations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["id"] == id && o["holds"] == true)
}

fn sum_to(n: u64) -> u64 {
    n * (n - 1) / 2
}

#[test]
fn every_command_works_on_a_rest_catalog_over_s3() {
    let lake = Lake::new("all");
    let shown = lake.ok(&["catalog", "show"]);
    assert_eq!(shown["type"], "rest");
    let raw = serde_json::to_string(&shown).unwrap();
    assert!(
        !raw.contains(&lake.servers.secret_key),
        "the secret leaked: {raw}"
    );

    let ns = lake.ns.clone();
    let t = format!("{ns}.events");
    lake.ok(&["namespace", "create", &ns]);
    let created = lake.ok(&[
        "table",
        "create",
        &t,
        "--schema",
        "id bigint not null, ts timestamp, name string, amount double",
        "--partition",
        "day(ts)",
    ]);
    assert!(
        created.to_string().contains("s3://"),
        "the server places tables on S3: {created}"
    );
    assert!(lake
        .ok(&["table", "list", &ns])
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x == &Value::String(t.clone())));

    // Six small appends: 18 small files in 3 day partitions.
    for k in 0..6u64 {
        let f = lake.ndjson(&format!("b{k}.ndjson"), k * 100..k * 100 + 100);
        lake.ok(&["append", &t, f.to_str().unwrap()]);
    }
    let row = lake.sql_row(&format!("SELECT count(*) AS n, sum(id) AS s FROM {t}"));
    assert_eq!(row["n"], 600);
    assert_eq!(row["s"], sum_to(600));
    let before = assert_readers(&lake.read_rest(&t), 600, sum_to(600));

    // Diagnose sees the small files and the storage listing of the S3 prefix.
    let d = lake.ok(&["diagnose", &t]);
    assert_eq!(d["totals"]["data_files"], 18, "{d}");
    assert!(holds(&d, "small-files-in-active-partitions"), "{d}");

    // An orphan from a crashed writer, old enough only with --older-than 0s.
    let location = d["location"].as_str().unwrap_or_default().to_string();
    assert!(location.starts_with("s3://"), "{d}");
    let orphan = format!("{location}/data/crashed-writer-00001.parquet");
    lake.put_object(&orphan);

    // Compaction: one replace commit, same rows, same content.
    let c = lake.ok(&["compact", &t, "--min-input-files", "2"]);
    assert_eq!(c["live_files_before"], 18, "{c}");
    assert_eq!(c["live_files_after"], 3, "{c}");
    let after = assert_readers(&lake.read_rest(&t), 600, sum_to(600));
    assert_eq!(before, after, "compaction changed the content");

    // Streaming ingest into the same table (file source, exactly-once positions in the
    // snapshot summary).
    let stream = lake.ndjson("stream.ndjson", 600..900);
    let s = lake.ok(&[
        "ingest",
        &t,
        "--source",
        stream.to_str().unwrap(),
        "--writer-id",
        "e2e",
    ]);
    assert_eq!(s["records"], 300, "{s}");
    assert_readers(&lake.read_rest(&t), 900, sum_to(900));

    // Orphan removal finds exactly the planted file, then deletes it.
    let dry = lake.orphan_dry_run(&t);
    assert_eq!(dry["orphan_files"], 1, "{dry}");
    assert_eq!(dry["sample"][0], orphan.as_str(), "{dry}");
    lake.ok(&["remove-orphan-files", &t, "--older-than", "0s", "--force"]);
    let again = lake.orphan_dry_run(&t);
    assert_eq!(again["orphan_files"], 0, "{again}");
    let d = lake.ok(&["diagnose", &t]);
    assert!(!holds(&d, "unreferenced-files"), "{d}");

    // Expiry: keep the last snapshot, delete what only old snapshots needed.
    let e = lake.ok(&[
        "expire-snapshots",
        &t,
        "--older-than",
        "0s",
        "--retain-last",
        "1",
    ]);
    assert!(e["expired_snapshots"].as_array().unwrap().len() >= 7, "{e}");
    assert!(e["deleted"]["deleted"].as_u64().unwrap() >= 18, "{e}");
    assert_readers(&lake.read_rest(&t), 900, sum_to(900));
    let snaps = lake.ok(&["table", "describe", &t]);
    assert_eq!(snaps["snapshot_count"], 1);
    // Nothing live was deleted and nothing unreferenced is left.
    let left = lake.orphan_dry_run(&t);
    assert_eq!(left["orphan_files"], 0, "{left}");
}

#[test]
fn a_table_pyiceberg_wrote_through_rest_is_compacted_by_floe() {
    let lake = Lake::new("py");
    let t = format!("{}.py_events", lake.ns);
    let w = python(&[
        script("rest_write.py").to_str().unwrap(),
        "--table",
        &t,
        "--rows",
        "3000",
        "--batches",
        "6",
    ]);
    let rows = w["rows"].as_u64().unwrap();
    let sum = w["sum_id"].as_u64().unwrap();
    let before = assert_readers(&lake.read_rest(&t), rows, sum);
    let c = lake.ok(&["compact", &t, "--min-input-files", "2"]);
    assert!(
        c["live_files_after"].as_u64() < c["live_files_before"].as_u64(),
        "{c}"
    );
    assert_eq!(before, assert_readers(&lake.read_rest(&t), rows, sum));
}

#[test]
fn a_sql_catalog_can_keep_its_warehouse_on_s3() {
    let lake = Lake::new("sql");
    let t = format!("{}.t", lake.ns);
    let cat = ["--catalog", "sqls3"];
    let with = |args: &[&str]| -> Vec<String> {
        cat.iter()
            .chain(args.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        lake.ok(&refs)
    };
    run(with(&["namespace", "create", &lake.ns]));
    run(with(&[
        "table",
        "create",
        &t,
        "--schema",
        "id bigint not null, v string",
    ]));
    let f = lake.path().join("x.ndjson");
    std::fs::write(&f, "{\"id\":1,\"v\":\"a\"}\n{\"id\":2,\"v\":\"b\"}\n").unwrap();
    for _ in 0..3 {
        run(with(&["append", &t, f.to_str().unwrap()]));
    }
    let v = run(with(&["sql", &format!("SELECT count(*) AS n FROM {t}")]));
    assert_eq!(v["n"], 6);
    let c = run(with(&["compact", &t, "--min-input-files", "2"]));
    assert_eq!(c["live_files_after"], 1, "{c}");
    let d = run(with(&["diagnose", &t]));
    assert!(d["location"]
        .as_str()
        .unwrap()
        .starts_with("s3://lake/floe-sql/"));
    run(with(&["table", "drop", &t, "--purge"]));
}

#[test]
fn backend_failures_are_one_clear_line_and_commit_nothing() {
    let lake = Lake::new("fail");
    let secret = lake.servers.secret_key.clone();
    let one_line = |err: &str| {
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "expected one line: {err}");
        assert!(!err.contains(&secret), "secret in the error: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };

    // Wrong OAuth credential.
    let err = lake.fails(&[
        "--catalog-prop",
        "credential=admin:wrong-secret-123",
        "namespace",
        "list",
    ]);
    one_line(&err);
    assert!(err.contains("401") || err.contains("credential"), "{err}");
    assert!(!err.contains("wrong-secret-123"), "{err}");

    // Unreachable catalog.
    let err = lake.fails(&[
        "--catalog-prop",
        "uri=http://127.0.0.1:1",
        "namespace",
        "list",
    ]);
    one_line(&err);
    assert!(err.contains("127.0.0.1:1"), "{err}");

    // Unknown catalog name.
    let err = lake.fails(&["--catalog", "nope", "namespace", "list"]);
    one_line(&err);
    assert!(err.contains("nope") && err.contains("lake"), "{err}");

    // Wrong S3 keys: the catalog works, the data write fails, nothing is committed.
    let ns = lake.ns.clone();
    let t = format!("{ns}.t");
    lake.ok(&["namespace", "create", &ns]);
    lake.ok(&["table", "create", &t, "--schema", "id bigint not null"]);
    let f = lake.path().join("x.ndjson");
    std::fs::write(&f, "{\"id\":1}\n").unwrap();
    let err = lake.fails(&[
        "--catalog-prop",
        "s3.secret-access-key=not-the-key",
        "append",
        &t,
        f.to_str().unwrap(),
    ]);
    one_line(&err);
    assert!(err.contains("/t/data/"), "names the object: {err}");
    assert!(err.contains("SignatureDoesNotMatch"), "says why: {err}");
    assert!(err.len() < 600, "short: {err}");
    let snaps = lake.ok(&["table", "describe", &t]);
    assert_eq!(snaps["snapshot_count"], 0, "no partial commit");

    // An unreachable S3 endpoint (SeaweedFS creates missing buckets on first write, so a
    // missing bucket cannot be staged here): the namespace only touches the SQL catalog, the
    // table's first metadata write names the location and the endpoint.
    lake.ok(&["--catalog", "sqls3", "namespace", "create", "nb"]);
    let err = lake.fails(&[
        "--catalog",
        "sqls3",
        "--catalog-prop",
        "s3.endpoint=http://127.0.0.1:1",
        "table",
        "create",
        "nb.t",
        "--schema",
        "id bigint",
    ]);
    one_line(&err);
    assert!(err.contains("s3://lake/floe-sql/nb/t"), "{err}");
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

/// Starts `fault_proxy.py` in front of the REST catalog; returns the child and its port.
fn fault_proxy(target: &str, mode: &str) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let mut child = Command::new(python_bin())
        .arg(script("fault_proxy.py"))
        .args(["--target", target, "--mode", mode])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("proxy did not start: {line}"))
        .parse()
        .unwrap();
    (child, port)
}

#[test]
fn a_commit_whose_answer_is_lost_lands_exactly_once_and_keeps_its_files() {
    for mode in ["lose-response", "drop-request", "unavailable"] {
        let lake = Lake::new("unknown");
        let t = format!("{}.t", lake.ns);
        lake.ok(&["namespace", "create", &lake.ns]);
        lake.ok(&["table", "create", &t, "--schema", "id bigint not null"]);
        let f = lake.ndjson_ids("ids.ndjson", 0..1000);
        let (mut proxy, port) = fault_proxy(&lake.servers.rest_uri, mode);
        let via = format!("uri=http://127.0.0.1:{port}");
        let out = lake.run(&[
            "--json",
            "--catalog-prop",
            &via,
            "append",
            &t,
            f.to_str().unwrap(),
        ]);
        proxy.kill().unwrap();
        let proxy_log = {
            use std::io::Read;
            let mut s = String::new();
            proxy.stderr.take().unwrap().read_to_string(&mut s).unwrap();
            s
        };
        let _ = proxy.wait();
        assert!(
            proxy_log.contains("\"broken\""),
            "{mode}: the fault was not injected: {proxy_log}"
        );
        assert!(
            out.status.success(),
            "{mode}: the append must settle the unknown outcome: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Exactly once: one snapshot, 1000 rows, and no file left unreferenced.
        let row = lake.sql_row(&format!("SELECT count(*) AS n, sum(id) AS s FROM {t}"));
        assert_eq!(row["n"], 1000, "{mode}");
        assert_eq!(row["s"], sum_to(1000), "{mode}");
        let snaps = lake.ok(&["table", "describe", &t]);
        assert_eq!(snaps["snapshot_count"], 1, "{mode}");
        let orphans = lake.orphan_dry_run(&t);
        assert_eq!(orphans["orphan_files"], 0, "{mode}: {orphans}");
        assert_readers(&lake.read_rest(&t), 1000, sum_to(1000));
    }
}

/// `floe maintain` on a REST catalog over S3: leases need `--lease-db` (a REST catalog has no
/// database of its own); with one, the service compacts the table and readers agree.
#[test]
fn maintain_on_a_rest_catalog_takes_its_leases_from_lease_db() {
    let lake = Lake::new("mnt");
    let ns = lake.ns.clone();
    let t = format!("{ns}.events");
    lake.ok(&["namespace", "create", &ns]);
    lake.ok(&[
        "table",
        "create",
        &t,
        "--schema",
        "id bigint not null, ts timestamp, name string, amount double",
        "--partition",
        "day(ts)",
    ]);
    for kv in [
        "floe.maintain.compact.partition-idle-time=0s",
        "floe.maintain.compact.trigger.commit-count=5",
    ] {
        lake.ok(&["table", "set-property", &t, kv]);
    }
    for k in 0..6u64 {
        let f = lake.ndjson(&format!("m{k}.ndjson"), k * 100..k * 100 + 100);
        lake.ok(&["append", &t, f.to_str().unwrap()]);
    }
    let err = lake.fails(&["maintain", "--once", "--namespace", &ns]);
    assert!(err.contains("--lease-db"), "{err}");
    let leases = format!("sqlite:///{}/leases.db", lake.path().display());
    let v = lake.ok(&[
        "maintain",
        "--once",
        "--namespace",
        &ns,
        "--lease-db",
        &leases,
    ]);
    assert_eq!(v["jobs_failed"], 0, "{v}");
    assert!(
        v["succeeded_by_job"]["compact"].as_u64().unwrap() >= 1,
        "{v}"
    );
    let d = lake.ok(&["diagnose", &t]);
    assert_eq!(d["totals"]["data_files"], 3, "{d}");
    assert_readers(&lake.read_rest(&t), 600, sum_to(600));
}

#[test]
fn tags_and_branches_commit_through_the_rest_catalog() {
    let lake = Lake::new("refs");
    let t = format!("{}.refs", lake.ns);
    lake.ok(&["namespace", "create", &lake.ns]);
    lake.ok(&[
        "table",
        "create",
        &t,
        "--schema",
        "id bigint not null, ts timestamp, name string, amount double",
    ]);
    for k in 0..3u64 {
        let f = lake.ndjson(&format!("r{k}.ndjson"), k * 10..k * 10 + 10);
        lake.ok(&["append", &t, f.to_str().unwrap()]);
    }
    let first = lake.sql_row(&format!(
        "SELECT snapshot_id FROM {t}$snapshots ORDER BY committed_at LIMIT 1"
    ))["snapshot_id"]
        .as_i64()
        .unwrap();
    // The answer to the commit is lost after the server applied it: floe sees the tag landed
    // (instead of retrying into its own "already exists").
    let first_id = first.to_string();
    let tag = lake.through_lossy_proxy(&[
        "table",
        "tag",
        "create",
        &t,
        "v1",
        "--snapshot-id",
        &first_id,
    ]);
    assert_eq!(tag["action"], "created", "{tag}");
    assert_eq!(tag["ref"]["snapshot_id"], first, "{tag}");
    lake.ok(&[
        "table",
        "branch",
        "create",
        &t,
        "audit",
        "--min-snapshots-to-keep",
        "1",
    ]);
    let refs = lake.ok(&["table", "describe", &t])["refs"].clone();
    let names: Vec<(&str, &str)> = refs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("main", "branch"), ("audit", "branch"), ("v1", "tag")]
    );
    // An existing name is refused, nothing committed.
    let err = lake.fails(&["table", "tag", "create", &t, "v1"]);
    assert!(err.contains("--replace"), "{err}");
    // Expiry keeps the tagged snapshot; after the drop it goes.
    let e = lake.ok(&["expire-snapshots", &t, "--older-than", "0s"]);
    assert_eq!(e["expired_snapshots"].as_array().unwrap().len(), 1, "{e}");
    let dropped = lake.through_lossy_proxy(&["table", "tag", "drop", &t, "v1"]);
    assert_eq!(dropped["action"], "dropped", "{dropped}");
    lake.ok(&["table", "branch", "drop", &t, "audit"]);
    let e = lake.ok(&["expire-snapshots", &t, "--older-than", "0s"]);
    assert_eq!(e["expired_snapshots"], serde_json::json!([first]), "{e}");
    let left = lake.ok(&["table", "describe", &t]);
    assert_eq!(left["refs"].as_array().unwrap().len(), 1, "{left}");
    assert_readers(&lake.read_rest(&t), 30, sum_to(30));
}

impl Lake {
    /// Runs a `--json` command through `fault_proxy.py --mode lose-response` (the server
    /// applies the first commit, the client gets a 504) and returns its JSON.
    fn through_lossy_proxy(&self, args: &[&str]) -> Value {
        let (mut proxy, port) = fault_proxy(&self.servers.rest_uri, "lose-response");
        let via = format!("uri=http://127.0.0.1:{port}");
        let mut all = vec!["--json", "--catalog-prop", &via];
        all.extend_from_slice(args);
        let out = self.run(&all);
        proxy.kill().unwrap();
        let log = {
            use std::io::Read;
            let mut s = String::new();
            proxy.stderr.take().unwrap().read_to_string(&mut s).unwrap();
            s
        };
        let _ = proxy.wait();
        assert!(
            log.contains("\"broken\""),
            "the fault was not injected: {log}"
        );
        assert!(
            out.status.success(),
            "floe {args:?} must settle the unknown outcome: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[test]
fn a_v3_table_with_columns_floe_cannot_parse_loads_through_rest_and_keeps_their_types() {
    let lake = Lake::new("opaque");
    let ns = lake.ns.clone();
    let t = format!("{ns}.t");
    lake.ok(&["namespace", "create", &ns]);
    lake.ok(&[
        "table",
        "create",
        &t,
        "--schema",
        "id bigint",
        "--format-version",
        "3",
    ]);
    let described = lake.ok(&["table", "describe", &t]);
    assert_eq!(
        described["format_version"], 3,
        "the REST create asks for v3"
    );
    assert!(
        described["properties"].get("format-version").is_none(),
        "{described}"
    );
    let input = lake.ndjson_ids("ids.json", 0..10);
    lake.ok(&["append", &t, input.to_str().unwrap()]);

    // Another engine adds variant and geometry columns (the REST crate cannot parse them).
    let path = format!("{}/namespaces/{ns}/tables/t", lake.servers.warehouse);
    let schema = serde_json::json!({"type": "struct", "schema-id": 1, "fields": [
        {"id": 1, "name": "id", "required": false, "type": "long"},
        {"id": 2, "name": "v", "required": false, "type": "variant", "doc": "events"},
        {"id": 3, "name": "geo", "required": false, "type": "geometry"}]});
    lake.rest_call(
        "POST",
        &path,
        &serde_json::json!({"requirements": [], "updates": [
            {"action": "add-schema", "schema": schema, "last-column-id": 3},
            {"action": "set-current-schema", "schema-id": -1}]}),
    );

    let described = lake.ok(&["table", "describe", &t]);
    let types: Vec<&str> = described["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["long", "variant", "geometry"], "{described}");
    let report = lake.ok(&["diagnose", &t]);
    assert_eq!(report["totals"]["records"], 10, "{report}");
    let err = lake.fails(&["compact", &t, "--min-input-files", "1"]);
    assert!(
        err.contains("column v has type variant, which floe does not rewrite"),
        "{err}"
    );
    lake.ok(&[
        "expire-snapshots",
        &t,
        "--older-than",
        "0s",
        "--retain-last",
        "1",
    ]);
    lake.ok(&["table", "set-property", &t, "owner=lake"]);
    let now = lake.rest_call("GET", &path, &Value::Null);
    let md = &now["metadata"];
    assert_eq!(md["properties"]["owner"], "lake");
    let current = md["current-schema-id"].clone();
    let fields = md["schemas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["schema-id"] == current)
        .unwrap()["fields"]
        .clone();
    assert_eq!(
        fields, schema["fields"],
        "the server keeps the columns as written"
    );
}
