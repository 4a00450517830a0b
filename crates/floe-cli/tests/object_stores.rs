//! Google Cloud Storage and Azure Blob Storage, end to end against emulators installed from the
//! registries: `gcp-storage-emulator` (PyPI) for GCS's JSON API and Azurite (npm) for the Azure
//! Blob API. Each test starts its own emulator on a free port and ends it by PID (also when
//! the test fails).
//!
//! The same scenario runs on each store, with the warehouse configured through Iceberg's FileIO
//! properties (`gcs.*`, `adls.*`): small appends, SQL, diagnose, compaction, streaming ingest,
//! an orphan found by listing the store and removed, expiry deleting in batches (the emulator's
//! request log shows the batch endpoint), and a purge that leaves nothing under the table.
//! PyIceberg reads every state floe commits (pyarrow's GcsFileSystem for `gs://`, fsspec's adlfs
//! for `abfss://`) and must see the same rows and content as floe; PyIceberg 0.12 cannot read
//! `wasbs://` locations, so there pyarrow reads the live data files floe lists. DuckDB is not
//! used: its Azure extension reads `abfss://` through the DFS endpoint, which Azurite lacks, and
//! its GCS support is the S3-compatible XML API the GCS emulator lacks.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Azurite's well-known development account (public, documented by Microsoft).
const AZ_ACCOUNT: &str = "devstoreaccount1";
const AZ_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set (run the tests through .ci/test)"))
}

/// Kills the process by its pid when dropped (also when the test fails).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "{what} did not listen on {port} within 60 s: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// One emulated store and how floe and PyIceberg reach it.
struct Store {
    name: &'static str,
    _proc: Killed,
    log: PathBuf,
    /// The warehouse URI.
    warehouse: String,
    /// FileIO properties (floe.toml and PyIceberg).
    props: Vec<(String, String)>,
    /// What a batched delete looks like in the emulator's request log.
    batch_marker: &'static str,
    /// PyIceberg 0.12 reads this URI form (it does not read `wasbs://`: fsspec has no such
    /// protocol and its Arrow path does not parse `container@account`); otherwise the live
    /// data files floe lists are read with pyarrow instead.
    pyiceberg_reads: bool,
    /// Python that defines `fsys` (a pyarrow filesystem) and `key(uri)` (its path for a URI).
    py_fs: String,
}

impl Store {
    fn gcs(dir: &Path) -> Store {
        let port = free_port();
        let log = dir.join("gcs-emulator.log");
        let data = dir.join("gcs-data");
        std::fs::create_dir_all(&data).unwrap();
        let bin = Path::new(&env("FLOE_VENV")).join("bin/gcp-storage-emulator");
        let child = Command::new(bin)
            .args(["start", "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(["--default-bucket", "lake", "--in-memory"])
            .current_dir(&data)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
            ))
            .spawn()
            .expect("gcp-storage-emulator starts (installed by .ci/setup)");
        let proc = Killed(child);
        wait_port(port, "gcp-storage-emulator", &log);
        let endpoint = format!("http://127.0.0.1:{port}");
        Store {
            name: "gcs",
            _proc: proc,
            log,
            warehouse: "gs://lake/warehouse".into(),
            props: vec![
                ("gcs.service.host".into(), endpoint.clone()),
                // The emulator checks no signature; PyIceberg (pyarrow) sends this token.
                ("gcs.oauth2.token".into(), "emulator".into()),
                ("gcs.oauth2.token-expires-at".into(), "4102444800000".into()),
            ],
            batch_marker: "/batch/storage/v1",
            pyiceberg_reads: true,
            py_fs: format!(
                "import datetime\nfrom pyarrow import fs\n\
                 fsys = fs.GcsFileSystem(access_token='emulator', \
                 credential_token_expiration=datetime.datetime(2100, 1, 1), scheme='http', \
                 endpoint_override='127.0.0.1:{port}')\n\
                 def key(uri):\n    return uri.split('://', 1)[1]\n"
            ),
        }
    }

    /// Azurite; `wasbs` picks the `wasbs://` form with PyIceberg's endpoint properties,
    /// otherwise `abfss://` with a connection string.
    fn azure(dir: &Path, wasbs: bool) -> Store {
        let port = free_port();
        let log = dir.join("azurite.log");
        let debug = dir.join("azurite-debug.log");
        let bin = env("FLOE_AZURITE");
        let child = Command::new(bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(port.to_string())
            .args(["--inMemoryPersistence", "--skipApiVersionCheck", "--loose"])
            .arg("--debug")
            .arg(&debug)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("azurite starts (installed by .ci/setup)");
        let proc = Killed(child);
        wait_port(port, "azurite", &log);
        let py_fs = format!(
            "from pyarrow import fs\n\
             fsys = fs.AzureFileSystem(account_name='{AZ_ACCOUNT}', account_key='{AZ_KEY}', \
             blob_storage_authority='127.0.0.1:{port}', dfs_storage_authority='127.0.0.1:{port}', \
             blob_storage_scheme='http', dfs_storage_scheme='http')\n\
             def key(uri):\n    rest = uri.split('://', 1)[1]\n    \
             auth, _, path = rest.partition('/')\n    \
             return auth.split('@')[0] + '/' + path\n"
        );
        // The container, as an administrator would create it.
        python(&format!("{py_fs}fsys.create_dir('lake')\n"));
        let conn = format!(
            "DefaultEndpointsProtocol=http;AccountName={AZ_ACCOUNT};AccountKey={AZ_KEY};\
             BlobEndpoint=http://127.0.0.1:{port}/{AZ_ACCOUNT};"
        );
        let (warehouse, props) = if wasbs {
            (
                format!("wasbs://lake@{AZ_ACCOUNT}.blob.core.windows.net/warehouse"),
                vec![
                    ("adls.account-name".into(), AZ_ACCOUNT.into()),
                    ("adls.account-key".into(), AZ_KEY.into()),
                    (
                        "adls.blob-storage-authority".into(),
                        format!("127.0.0.1:{port}"),
                    ),
                    ("adls.blob-storage-scheme".into(), "http".into()),
                    // PyIceberg's fsspec (adlfs) takes the endpoint from a connection string.
                    ("adls.connection-string".into(), conn),
                ],
            )
        } else {
            (
                format!("abfss://lake@{AZ_ACCOUNT}.dfs.core.windows.net/warehouse"),
                vec![("adls.connection-string".into(), conn)],
            )
        };
        Store {
            name: if wasbs { "azure-wasbs" } else { "azure-abfss" },
            _proc: proc,
            log: debug,
            warehouse,
            props,
            batch_marker: "comp=batch",
            pyiceberg_reads: !wasbs,
            py_fs,
        }
    }

    fn config_toml(&self, db: &Path) -> String {
        let mut s = format!(
            "default-catalog = \"cloud\"\n\n[catalog.cloud]\nuri = \"sqlite://{}\"\nwarehouse = \"{}\"\n",
            db.display(),
            self.warehouse
        );
        for (k, v) in &self.props {
            s.push_str(&format!("{k:?} = {v:?}\n"));
        }
        s
    }

    /// Object URIs under `prefix`, listed by pyarrow (not by floe).
    fn list(&self, prefix: &str) -> Vec<String> {
        let out = python(&format!(
            "{}import json\nbase = {prefix:?}\nroot = key(base)\n\
             infos = fsys.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))\n\
             print(json.dumps([base + i.path[len(root):] for i in infos if i.type == fs.FileType.File]))\n",
            self.py_fs
        ));
        serde_json::from_str(out.trim()).unwrap()
    }

    /// Writes one object straight to the store (an orphan no commit references).
    fn put(&self, uri: &str) {
        python(&format!(
            "{}with fsys.open_output_stream(key({uri:?})) as f:\n    f.write(b'PAR1 not a real file')\n",
            self.py_fs
        ));
    }

    fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many more batch requests than `before` the request log shows, polling until at
    /// least one more appears or `patience` runs out (the emulators flush their logs lazily).
    fn requests_matching_after(&self, before: usize, patience: Duration) -> usize {
        let deadline = Instant::now() + patience;
        loop {
            let now = self.requests().matches(self.batch_marker).count();
            if now > before || Instant::now() >= deadline {
                return now.saturating_sub(before);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn python(code: &str) -> String {
    let out = Command::new(env("FLOE_PYTHON"))
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}\n{code}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

struct Lake {
    dir: tempfile::TempDir,
    store: Store,
}

impl Lake {
    fn new(make: impl FnOnce(&Path) -> Store) -> Lake {
        let dir = tempfile::tempdir().unwrap();
        let store = make(dir.path());
        std::fs::write(
            dir.path().join("floe.toml"),
            store.config_toml(&dir.path().join("catalog.db")),
        )
        .unwrap();
        Lake { dir, store }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

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
            "[{}] floe {args:?} failed: {}",
            self.store.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    fn ndjson(&self, name: &str, ids: std::ops::Range<u64>) -> String {
        let p = self.path().join(name);
        let mut s = String::new();
        for i in ids {
            s.push_str(&format!(
                "{{\"id\":{i},\"ts\":\"2026-11-0{}T10:00:00\",\"name\":\"n{}\"}}\n",
                1 + i % 3,
                i % 7
            ));
        }
        std::fs::write(&p, s).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// An independent reader's view of the table: (rows, sum of id, content checksum).
    /// PyIceberg where it reads the URI form; else pyarrow over the live data files (no delete
    /// files exist in these tables), with a checksum of the sorted ids.
    fn independent(&self, table: &str) -> (u64, u64, String) {
        if self.store.pyiceberg_reads {
            return self.pyiceberg(table);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_floe"))
            .current_dir(self.path())
            .args([
                "--json",
                "sql",
                &format!("SELECT file_path FROM {table}$files"),
            ])
            .output()
            .unwrap();
        let paths: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["file_path"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert!(!paths.is_empty(), "no live files listed for {table}");
        let code = format!(
            "{}import json, hashlib, pyarrow.parquet as pq\nids = []\n\
             for p in {paths:?}:\n    ids += pq.read_table(key(p), filesystem=fsys).column('id').to_pylist()\n\
             print(json.dumps([len(ids), sum(ids), hashlib.sha256(str(sorted(ids)).encode()).hexdigest()]))\n",
            self.store.py_fs
        );
        let v: Value = serde_json::from_str(python(&code).trim()).unwrap();
        (
            v[0].as_u64().unwrap(),
            v[1].as_u64().unwrap(),
            v[2].as_str().unwrap().to_string(),
        )
    }

    /// PyIceberg's view of the table: (rows, sum of id, checksum).
    fn pyiceberg(&self, table: &str) -> (u64, u64, String) {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/read_cloud.py");
        let mut cmd = Command::new(env("FLOE_PYTHON"));
        cmd.arg(script)
            .args(["--catalog-uri"])
            .arg(format!(
                "sqlite://{}",
                self.path().join("catalog.db").display()
            ))
            .args([
                "--catalog-name",
                "cloud",
                "--warehouse",
                &self.store.warehouse,
            ])
            .args(["--table", table, "--sum-column", "id"]);
        for (k, v) in &self.store.props {
            cmd.arg("--prop").arg(format!("{k}={v}"));
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "[{}] PyIceberg could not read {table}: {}",
            self.store.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let p = &v["pyiceberg"];
        (
            p["rows"].as_u64().unwrap(),
            p["sum"].as_u64().unwrap(),
            p["checksum"].as_str().unwrap().to_string(),
        )
    }

    fn floe_rows(&self, table: &str) -> (u64, u64) {
        let row = self.ok(&[
            "sql",
            &format!("SELECT count(*) AS n, sum(id) AS s FROM {table}"),
        ]);
        (row["n"].as_u64().unwrap(), row["s"].as_u64().unwrap())
    }

    fn orphans(&self, table: &str) -> Value {
        self.ok(&[
            "remove-orphan-files",
            table,
            "--older-than",
            "0s",
            "--force",
            "--dry-run",
        ])
    }
}

fn sum_to(n: u64) -> u64 {
    n * (n - 1) / 2
}

/// The scenario every store runs (see the module docs).
fn every_command_works_on(lake: &Lake) {
    let name = lake.store.name;
    let t = "db.events";
    lake.ok(&["namespace", "create", "db"]);
    let created = lake.ok(&[
        "table",
        "create",
        t,
        "--schema",
        "id bigint not null, ts timestamp, name string",
        "--partition",
        "day(ts)",
    ]);
    let scheme = lake
        .store
        .warehouse
        .split("://")
        .next()
        .unwrap()
        .to_string();
    assert!(
        created.to_string().contains(&format!("{scheme}://")),
        "[{name}] the table lives in the warehouse: {created}"
    );

    // Six small appends: 18 files in 3 day partitions.
    for k in 0..6u64 {
        let f = lake.ndjson(&format!("b{k}.ndjson"), k * 100..k * 100 + 100);
        lake.ok(&["append", t, &f]);
    }
    assert_eq!(lake.floe_rows(t), (600, sum_to(600)), "[{name}]");
    let (rows, sum, before) = lake.independent(t);
    assert_eq!((rows, sum), (600, sum_to(600)), "[{name}] PyIceberg");

    let d = lake.ok(&["diagnose", t]);
    assert_eq!(d["totals"]["data_files"], 18, "[{name}] {d}");
    let location = d["location"].as_str().unwrap().to_string();
    assert!(location.starts_with(&lake.store.warehouse), "[{name}] {d}");
    let listed = lake.store.list(&location);
    assert!(
        listed.iter().filter(|p| p.ends_with(".parquet")).count() == 18,
        "[{name}] the store holds the 18 data files floe wrote: {listed:?}"
    );

    // An orphan from a crashed writer.
    let orphan = format!("{location}/data/crashed-writer-00001.parquet");
    lake.store.put(&orphan);

    // Compaction: same rows and content, one file per day.
    let c = lake.ok(&["compact", t, "--min-input-files", "2"]);
    assert_eq!(c["live_files_before"], 18, "[{name}] {c}");
    assert_eq!(c["live_files_after"], 3, "[{name}] {c}");
    let (rows, sum, after) = lake.independent(t);
    assert_eq!((rows, sum), (600, sum_to(600)), "[{name}]");
    assert_eq!(before, after, "[{name}] compaction changed the content");

    // Streaming ingest (file source, exactly-once positions in the commit).
    let stream = lake.ndjson("stream.ndjson", 600..900);
    let s = lake.ok(&["ingest", t, "--source", &stream, "--writer-id", "e2e"]);
    assert_eq!(s["records"], 300, "[{name}] {s}");
    assert_eq!(lake.floe_rows(t), (900, sum_to(900)), "[{name}]");

    // Orphan removal lists the store, finds exactly the planted object, deletes it.
    let dry = lake.orphans(t);
    assert_eq!(dry["orphan_files"], 1, "[{name}] {dry}");
    assert_eq!(dry["sample"][0], orphan.as_str(), "[{name}] {dry}");
    lake.ok(&["remove-orphan-files", t, "--older-than", "0s", "--force"]);
    assert!(
        !lake.store.list(&location).contains(&orphan),
        "[{name}] the orphan is gone"
    );
    assert_eq!(lake.orphans(t)["orphan_files"], 0, "[{name}]");

    // Expiry deletes what only old snapshots needed, in batches.
    let batches_before = lake
        .store
        .requests()
        .matches(lake.store.batch_marker)
        .count();
    let e = lake.ok(&[
        "expire-snapshots",
        t,
        "--older-than",
        "0s",
        "--retain-last",
        "1",
    ]);
    assert!(
        e["deleted"]["deleted"].as_u64().unwrap() >= 18,
        "[{name}] {e}"
    );
    assert_eq!(e["deleted"]["failed"], 0, "[{name}] {e}");
    // The emulator writes its request log asynchronously: give it a few seconds to flush.
    let batches = lake
        .store
        .requests_matching_after(batches_before, Duration::from_secs(15));
    assert!(
        batches >= 1,
        "[{name}] expiry deleted through the store's batch API (no '{}' in the request log)",
        lake.store.batch_marker
    );
    let (rows, sum, _) = lake.independent(t);
    assert_eq!(
        (rows, sum),
        (900, sum_to(900)),
        "[{name}] PyIceberg after expiry"
    );
    assert_eq!(
        lake.orphans(t)["orphan_files"],
        0,
        "[{name}] nothing left behind"
    );
    let left = lake.store.list(&location);
    let live = lake.ok(&["sql", &format!("SELECT count(*) AS n FROM {t}$files")]);
    assert_eq!(
        left.iter()
            .filter(|p| p.contains("/data/") && p.ends_with(".parquet"))
            .count() as u64,
        live["n"].as_u64().unwrap(),
        "[{name}] the data files on the store are exactly the live ones: {left:?}"
    );

    // A purge removes every object of the table.
    lake.ok(&["table", "drop", t, "--purge"]);
    assert_eq!(
        lake.store.list(&location),
        Vec::<String>::new(),
        "[{name}] purge left objects"
    );
}

#[test]
fn gcs_end_to_end() {
    let lake = Lake::new(Store::gcs);
    every_command_works_on(&lake);
}

#[test]
fn azure_abfss_end_to_end() {
    let lake = Lake::new(|d| Store::azure(d, false));
    every_command_works_on(&lake);
}

#[test]
fn azure_wasbs_end_to_end() {
    let lake = Lake::new(|d| Store::azure(d, true));
    every_command_works_on(&lake);
}

#[test]
fn a_store_that_refuses_is_one_clear_line() {
    // Azure with a wrong key: the error names the operation and the store's answer.
    let lake = Lake::new(|d| {
        let mut s = Store::azure(d, true);
        for (k, v) in s.props.iter_mut() {
            if k == "adls.account-key" {
                *v = "d3Jvbmcta2V5LXdyb25nLWtleQ==".into();
            }
        }
        s.props.retain(|(k, _)| k != "adls.connection-string");
        s
    });
    lake.ok(&["namespace", "create", "db"]);
    let out = lake.run(&["table", "create", "db.t", "--schema", "id bigint"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("wasbs://lake@devstoreaccount1.blob.core.windows.net/warehouse"),
        "names the location: {err}"
    );
    assert!(
        err.contains("PermissionDenied")
            || err.contains("AuthorizationFailure")
            || err.contains("403"),
        "says why: {err}"
    );
    assert!(!err.contains("d3Jvbmcta2V5"), "the key leaked: {err}");
    assert!(err.lines().count() <= 3, "short: {err}");
    // A service principal is refused by name, not ignored.
    let cfg = std::fs::read_to_string(lake.path().join("floe.toml")).unwrap();
    std::fs::write(
        lake.path().join("floe.toml"),
        format!("{cfg}\"adls.client-secret\" = \"s\"\n"),
    )
    .unwrap();
    let out = lake.run(&["table", "create", "db.t", "--schema", "id bigint"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("adls.client-secret"), "{err}");
}
