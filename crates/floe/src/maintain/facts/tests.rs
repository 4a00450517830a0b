use super::*;

fn summary(pairs: &[(&str, u64)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn append(files: u64, bytes: u64) -> HashMap<String, String> {
    summary(&[(ADDED_DATA_FILES, files), (ADDED_FILES_SIZE, bytes)])
}

#[test]
fn commits_are_counted_back_to_the_last_compaction() {
    let a1 = append(3, 300);
    let a2 = append(4, 400);
    let deletes = summary(&[
        (ADDED_POS_DELETE_FILES, 2),
        (ADDED_EQ_DELETE_FILES, 1),
        (ADDED_FILES_SIZE, 10),
    ]);
    let compaction = summary(&[(ADDED_DATA_FILES, 1), ("deleted-data-files", 20)]);
    let old = append(100, 10_000);
    // Newest first.
    let branch: Vec<SnapshotRow<'_>> = vec![
        (5_000, "append", &a2),
        (4_000, "overwrite", &deletes),
        (3_000, "append", &a1),
        (2_000, "replace", &compaction),
        (1_000, "append", &old),
    ];
    let f = compute(&branch, &[1_000, 2_000, 3_000, 4_000, 5_000, 500], 7);
    assert_eq!(f.commits_since_compaction, 3);
    assert_eq!(f.data_files_since_compaction, 7);
    assert_eq!(f.bytes_since_compaction, 710);
    assert_eq!(f.pos_delete_files_since_compaction, 2);
    assert_eq!(f.eq_delete_files_since_compaction, 1);
    assert_eq!(f.last_compaction_ms, Some(2_000));
    assert_eq!(f.first_uncompacted_ms, Some(3_000));
    assert_eq!(f.last_write_ms, Some(5_000));
    assert_eq!(f.snapshots, 6);
    assert_eq!(f.oldest_snapshot_ms, Some(500));
    assert_eq!(f.metadata_log_entries, 7);
    assert_eq!(f.manifests, None);
}

#[test]
fn a_table_never_compacted_counts_every_commit() {
    let a = append(2, 20);
    let branch: Vec<SnapshotRow<'_>> = vec![(2_000, "append", &a), (1_000, "append", &a)];
    let f = compute(&branch, &[1_000, 2_000], 1);
    assert_eq!(f.commits_since_compaction, 2);
    assert_eq!(f.data_files_since_compaction, 4);
    assert_eq!(f.last_compaction_ms, None);
    assert_eq!(f.first_uncompacted_ms, Some(1_000));
}

#[test]
fn the_write_activity_looks_past_a_newest_compaction() {
    let a = append(2, 20);
    let c = summary(&[("deleted-data-files", 2), (ADDED_DATA_FILES, 1)]);
    let branch: Vec<SnapshotRow<'_>> = vec![(9_000, "replace", &c), (1_000, "append", &a)];
    let f = compute(&branch, &[1_000, 9_000], 1);
    assert_eq!(f.commits_since_compaction, 0);
    assert_eq!(f.last_compaction_ms, Some(9_000));
    assert_eq!(f.last_write_ms, Some(1_000));
    assert_eq!(f.first_uncompacted_ms, None);
}

#[test]
fn a_manifest_rewrite_is_neither_a_write_nor_a_compaction() {
    let a = append(2, 20);
    let rm = summary(&[("manifests-replaced", 30), ("manifests-created", 2)]);
    assert_eq!(commit_kind("replace", &rm), CommitKind::ManifestRewrite);
    assert_eq!(
        commit_kind("replace", &HashMap::new()),
        CommitKind::Compaction
    );
    assert_eq!(commit_kind("append", &rm), CommitKind::Write);
    let branch: Vec<SnapshotRow<'_>> = vec![(3_000, "replace", &rm), (1_000, "append", &a)];
    let f = compute(&branch, &[1_000, 3_000], 1);
    assert_eq!(f.commits_since_compaction, 1);
    assert_eq!(f.last_compaction_ms, None);
    assert_eq!(f.last_write_ms, Some(1_000));
}

#[test]
fn an_empty_table_has_no_facts_and_bad_counters_count_zero() {
    assert_eq!(compute(&[], &[], 0), TableFacts::default());
    let bad: HashMap<String, String> = [(ADDED_DATA_FILES.to_string(), "lots".to_string())].into();
    let branch: Vec<SnapshotRow<'_>> = vec![(1, "append", &bad)];
    assert_eq!(compute(&branch, &[1], 0).data_files_since_compaction, 0);
}
