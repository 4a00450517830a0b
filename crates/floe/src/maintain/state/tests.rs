use super::*;

fn status(table: &str, ts: i64, files: u64) -> TableStatus {
    TableStatus {
        table: table.to_string(),
        sampled_ms: ts,
        live_data_files: files,
        small_files: files / 2,
        snapshots: 3,
        data_bytes: files * 1000,
        debt: 1.5,
        ..TableStatus::default()
    }
}

fn cost(read: u64, written: u64, deleted: u64) -> Cost {
    Cost {
        bytes_to_read: read,
        bytes_to_write: written,
        files_to_delete: deleted,
        ..Cost::default()
    }
}

#[test]
fn history_keeps_the_newest_samples() {
    let s = ServiceState::new("h1", 0);
    for i in 0..(HISTORY_LEN as i64 + 5) {
        s.record_table(status("ns.t", i, i as u64));
    }
    let (st, history) = s.table("ns.t").unwrap();
    assert_eq!(history.len(), HISTORY_LEN);
    assert_eq!(history[0].ts_ms, 5);
    assert_eq!(history.last().unwrap().ts_ms, HISTORY_LEN as i64 + 4);
    assert_eq!(history.last().unwrap().live_data_files, st.live_data_files);
    assert_eq!(history.last().unwrap().small_files, st.small_files);
    assert_eq!(history.last().unwrap().data_bytes, st.data_bytes);
}

#[test]
fn a_problem_keeps_the_numbers_and_history() {
    let s = ServiceState::new("h1", 0);
    let mut st = status("ns.t", 10, 40);
    st.decisions.push(Decision {
        table: "ns.t".into(),
        job: "compact".into(),
        ..Decision::default()
    });
    s.record_table(st);
    s.record_problem("ns.t", "unreadable metadata".into(), 20);
    s.record_problem("ns.new", "invalid property".into(), 20);
    let (st, history) = s.table("ns.t").unwrap();
    assert_eq!(st.live_data_files, 40);
    assert_eq!(st.sampled_ms, 20);
    assert_eq!(st.problem.as_deref(), Some("unreadable metadata"));
    assert!(st.decisions.is_empty());
    assert_eq!(history.len(), 1);
    let (new, history) = s.table("ns.new").unwrap();
    assert_eq!(new.table, "ns.new");
    assert!(history.is_empty());
    assert_eq!(s.status().tables_with_problems, 2);
    // A good evaluation clears the problem (the caller's status has none).
    s.record_table(status("ns.t", 30, 41));
    assert_eq!(s.table("ns.t").unwrap().0.problem, None);
}

#[test]
fn tables_are_sorted_and_dropped_ones_forgotten() {
    let s = ServiceState::new("h1", 0);
    for t in ["b.t", "a.t", "c.t"] {
        s.record_table(status(t, 1, 1));
    }
    let names: Vec<String> = s.tables().into_iter().map(|t| t.table).collect();
    assert_eq!(names, ["a.t", "b.t", "c.t"]);
    s.retain_tables(&HashSet::from(["a.t".to_string(), "c.t".to_string()]));
    let names: Vec<String> = s.tables().into_iter().map(|t| t.table).collect();
    assert_eq!(names, ["a.t", "c.t"]);
    assert!(s.table("b.t").is_none());
}

#[test]
fn job_lifecycle_and_counters() {
    let s = ServiceState::new("h1", 0);
    let a = s.job_started(
        "ns.t",
        "compact",
        "table",
        "small-files 60 >= 50",
        cost(10, 0, 0),
        100,
    );
    let b = s.job_started(
        "ns.t",
        "expire-snapshots",
        "table",
        "max-snapshots",
        cost(0, 0, 3),
        200,
    );
    let c = s.job_started("ns.u", "compact", "table", "r", Cost::default(), 300);
    assert_eq!(s.status().running_jobs, 3);
    s.job_finished(a, Ok(cost(1000, 900, 7)), 150);
    s.job_finished(b, Err("commit conflict".into()), 250);
    s.job_finished(b, Err("twice".into()), 260); // ignored

    let jobs = s.jobs(10);
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [c, b, a]);
    assert_eq!(jobs[0].state, JobState::Running);
    assert_eq!(jobs[1].state, JobState::Failed);
    assert_eq!(jobs[1].error.as_deref(), Some("commit conflict"));
    assert_eq!(jobs[1].finished_ms, Some(250));
    assert_eq!(jobs[2].state, JobState::Succeeded);
    assert_eq!(jobs[2].actual, Some(cost(1000, 900, 7)));
    assert_eq!(jobs[2].planned, cost(10, 0, 0));
    assert_eq!(s.jobs(1).len(), 1);
    assert_eq!(s.status().running_jobs, 1);

    let m = s.render_metrics();
    for line in [
        "# TYPE floe_maintain_jobs_started_total counter",
        "floe_maintain_jobs_started_total{job=\"compact\"} 2",
        "floe_maintain_jobs_started_total{job=\"expire-snapshots\"} 1",
        "floe_maintain_jobs_started_total{job=\"clean-metadata\"} 0",
        "floe_maintain_jobs_succeeded_total{job=\"compact\"} 1",
        "floe_maintain_jobs_succeeded_total{job=\"remove-orphan-files\"} 0",
        "floe_maintain_jobs_failed_total{job=\"expire-snapshots\"} 1",
        "floe_maintain_jobs_failed_total{job=\"rewrite-manifests\"} 0",
        "floe_maintain_bytes_read_total 1000",
        "floe_maintain_bytes_written_total 900",
        "floe_maintain_files_deleted_total 7",
        "# TYPE floe_maintain_running_jobs gauge",
        "floe_maintain_running_jobs 1",
    ] {
        assert!(m.lines().any(|l| l == line), "missing {line:?} in\n{m}");
    }
}

#[test]
fn finished_jobs_are_bounded_but_running_ones_kept() {
    let s = ServiceState::new("h1", 0);
    let running = s.job_started("ns.t", "compact", "table", "r", Cost::default(), 0);
    for i in 0..(FINISHED_JOBS_LEN as i64 + 10) {
        let id = s.job_started(
            "ns.t",
            "clean-metadata",
            "table",
            "r",
            Cost::default(),
            i + 1,
        );
        s.job_finished(id, Ok(Cost::default()), i + 2);
    }
    let jobs = s.jobs(usize::MAX);
    assert_eq!(jobs.len(), FINISHED_JOBS_LEN + 1);
    assert_eq!(jobs.last().unwrap().id, running);
    assert_eq!(jobs[0].started_ms, FINISHED_JOBS_LEN as i64 + 10);
    // The counters count every job, not only the kept ones.
    assert!(s.render_metrics().contains(&format!(
        "floe_maintain_jobs_succeeded_total{{job=\"clean-metadata\"}} {}",
        FINISHED_JOBS_LEN + 10
    )));
}

#[test]
fn table_gauges_escape_their_labels() {
    let s = ServiceState::new("h1", 0);
    s.record_table(status("ns.a\"b\\c\nd", 1, 8));
    s.record_table(status("ns.plain", 1, 4));
    s.record_problem("ns.plain", "x".into(), 2);
    let m = s.render_metrics();
    for line in [
        "floe_table_live_data_files{table=\"ns.a\\\"b\\\\c\\nd\"} 8",
        "floe_table_live_data_files{table=\"ns.plain\"} 4",
        "floe_table_small_files{table=\"ns.plain\"} 2",
        "floe_table_delete_files{table=\"ns.plain\"} 0",
        "floe_table_snapshots{table=\"ns.plain\"} 3",
        "floe_table_data_bytes{table=\"ns.plain\"} 4000",
        "floe_table_debt{table=\"ns.plain\"} 1.5",
        "floe_maintain_tables 2",
        "floe_maintain_tables_with_problems 1",
        "floe_maintain_table_skipped{table=\"ns.plain\",reason=\"x\"} 1",
        "# HELP floe_table_debt Sum of the benefit of the table's due maintenance jobs.",
    ] {
        assert!(m.lines().any(|l| l == line), "missing {line:?} in\n{m}");
    }
    // Every sample line is `name{labels} value` or `name value`: no raw newline leaked.
    for l in m.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.starts_with("floe_"), "bad line {l:?}");
    }
    let mut nan = status("ns.nan", 3, 1);
    nan.debt = f64::NAN;
    s.record_table(nan);
    assert!(s
        .render_metrics()
        .lines()
        .any(|l| l == "floe_table_debt{table=\"ns.nan\"} NaN"));
}

#[test]
fn last_pass_and_waiting_for() {
    let s = ServiceState::new("host-1", 5);
    assert_eq!(s.holder(), "host-1");
    assert_eq!(s.last_pass_ms(), None);
    s.set_last_pass(
        50,
        Some("catalog unreachable: refused, retrying in 30s".into()),
    );
    assert_eq!(s.last_pass_ms(), Some(50));
    let st = s.status();
    assert_eq!(st.started_ms, 5);
    assert_eq!(
        st.waiting_for.as_deref(),
        Some("catalog unreachable: refused, retrying in 30s")
    );
    s.set_last_pass(80, None);
    assert_eq!(s.status().waiting_for, None);
}

#[test]
fn a_table_skipped_before_any_evaluation_is_exported_as_skipped_not_as_zeros() {
    let s = ServiceState::new("h1", 0);
    s.record_table(status("ns.good", 1, 8));
    s.record_problem(
        "ns.bad",
        "skipped: table property floe.maintain.enabled has an invalid value 'maybe'".into(),
        2,
    );
    let m = s.render_metrics();
    assert!(
        m.lines().any(|l| l
            == "floe_maintain_table_skipped{table=\"ns.bad\",reason=\"skipped: table property \
                floe.maintain.enabled has an invalid value 'maybe'\"} 1"),
        "{m}"
    );
    assert!(
        !m.lines()
            .any(|l| l.starts_with("floe_table_") && l.contains("ns.bad")),
        "{m}"
    );
    assert!(
        m.lines()
            .any(|l| l == "floe_table_debt{table=\"ns.good\"} 1.5"),
        "{m}"
    );
}
