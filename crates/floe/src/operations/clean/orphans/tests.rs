//! Unit tests of orphan classification on synthetic listings.

use std::time::Duration;

use super::*;
use crate::table::reach::{FileKind, Reached};

/// What the metadata references.
fn reach(paths: &[&str]) -> Reachable {
    let mut r = Reachable::default();
    for p in paths {
        r.files.insert(
            p.to_string(),
            Reached {
                kind: FileKind::Data,
                size: Some(1),
            },
        );
    }
    r
}

fn file(path: &str, size: u64, modified: SystemTime) -> ListedFile {
    ListedFile {
        path: path.to_string(),
        size,
        modified,
    }
}

fn cutoff() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn old() -> SystemTime {
    cutoff() - Duration::from_secs(3600)
}

fn young() -> SystemTime {
    cutoff() + Duration::from_secs(60)
}

fn eq() -> HashMap<String, String> {
    parse_equal_schemes(None).unwrap()
}

fn paths(files: &[ListedFile]) -> Vec<&str> {
    files.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn a_referenced_file_is_never_an_orphan_whatever_its_age_or_spelling() {
    let r = reach(&["/w/t/data/a.parquet", "s3://b/t/data/c.parquet"]);
    let listed = vec![
        file("/w/t/data/a.parquet", 10, old()),
        // No scheme on one side matches any scheme; `//` collapses.
        file("file:///w/t//data/a.parquet", 10, old()),
        // s3a is s3 by default; young, yet referenced first.
        file("s3a://b/t/data/c.parquet", 10, young()),
    ];
    let c = classify(listed, &r, &eq(), cutoff(), PrefixMismatchMode::Delete);
    assert_eq!(c.referenced, 3);
    assert_eq!(c.too_recent, 0);
    assert_eq!(c.prefix_mismatches, 0);
    assert!(c.candidates.is_empty(), "{:?}", c.candidates);
    assert!(c.refused.is_empty());
}

#[test]
fn an_unreferenced_file_is_a_candidate_only_when_older_than_the_cutoff() {
    let r = reach(&["/w/t/data/a.parquet"]);
    let listed = vec![
        file("/w/t/data/young.parquet", 1, young()),
        // Modified exactly at the cutoff: not older than it.
        file("/w/t/data/edge.parquet", 2, cutoff()),
        file("/w/t/data/old.parquet", 4, old()),
        file("/w/t/metadata/old.avro", 8, old()),
    ];
    let c = classify(listed, &r, &eq(), cutoff(), PrefixMismatchMode::Error);
    assert_eq!(c.referenced, 0);
    assert_eq!(c.too_recent, 2);
    assert_eq!(
        paths(&c.candidates),
        ["/w/t/data/old.parquet", "/w/t/metadata/old.avro"]
    );
    // Sizes and times travel with the candidates.
    assert_eq!(c.candidates[1].size, 8);
    assert_eq!(c.candidates[1].modified, old());
}

#[test]
fn a_prefix_mismatch_follows_the_mode() {
    let r = reach(&["s3://bucket/t/data/x.parquet"]);
    let listed = || {
        vec![
            file("s3://other/t/data/x.parquet", 1, old()),
            file("s3://bucket/t/data/y.parquet", 2, old()),
            // A young mismatch is too recent before it is a mismatch.
            file("gs://bucket/t/data/x.parquet", 4, young()),
        ]
    };
    let error = classify(listed(), &r, &eq(), cutoff(), PrefixMismatchMode::Error);
    assert_eq!(error.prefix_mismatches, 1);
    assert_eq!(error.too_recent, 1);
    assert_eq!(error.refused, ["s3://other/t/data/x.parquet"]);
    assert_eq!(paths(&error.candidates), ["s3://bucket/t/data/y.parquet"]);

    let ignore = classify(listed(), &r, &eq(), cutoff(), PrefixMismatchMode::Ignore);
    assert_eq!(ignore.prefix_mismatches, 1);
    assert!(ignore.refused.is_empty());
    assert_eq!(paths(&ignore.candidates), ["s3://bucket/t/data/y.parquet"]);

    let delete = classify(listed(), &r, &eq(), cutoff(), PrefixMismatchMode::Delete);
    assert_eq!(delete.prefix_mismatches, 1);
    assert!(delete.refused.is_empty());
    assert_eq!(
        paths(&delete.candidates),
        [
            "s3://other/t/data/x.parquet",
            "s3://bucket/t/data/y.parquet"
        ]
    );
}

#[test]
fn equal_schemes_decide_what_is_a_mismatch() {
    let r = reach(&["s3://bucket/t/data/x.parquet"]);
    let listed = vec![file("s3a://bucket/t/data/x.parquet", 1, old())];
    // Without the s3a = s3 rule, s3a is another scheme.
    let none = parse_equal_schemes(Some("wasb=abfs")).unwrap();
    let c = classify(
        listed.clone(),
        &r,
        &none,
        cutoff(),
        PrefixMismatchMode::Error,
    );
    assert_eq!(c.prefix_mismatches, 1);
    assert_eq!(c.refused, ["s3a://bucket/t/data/x.parquet"]);
    let c = classify(listed, &r, &eq(), cutoff(), PrefixMismatchMode::Error);
    assert_eq!(c.referenced, 1);
    assert!(c.refused.is_empty());
}

#[test]
fn settle_drops_what_fresh_metadata_references_then_what_the_fence_keeps() {
    let candidates = vec![
        file("/w/t/data/a.parquet", 1, old()),
        file("/w/t/data/b.parquet", 2, old()),
        file("/w/t/other/c.parquet", 4, old()),
    ];
    let fresh = reach(&["file:///w/t/data/b.parquet"]);
    let mut asked = Vec::new();
    let s = settle(candidates, Some(&fresh), &eq(), |paths| {
        asked = paths.clone();
        let (ok, no): (Vec<String>, Vec<String>) =
            paths.into_iter().partition(|p| !p.contains("/other/"));
        let kept = KeptFiles {
            other_tables: no.len() as u64,
            sample: no,
            ..Default::default()
        };
        (ok, kept)
    });
    assert_eq!(asked, ["/w/t/data/a.parquet", "/w/t/other/c.parquet"]);
    assert_eq!(s.became_referenced, 1);
    assert_eq!(paths(&s.orphans), ["/w/t/data/a.parquet"]);
    assert_eq!(s.orphans[0].size, 1);
    assert_eq!(s.kept.other_tables, 1);
    assert_eq!(s.kept.total(), 1);
}

#[test]
fn settle_without_a_change_keeps_every_candidate_the_fence_allows() {
    let candidates = vec![
        file("/w/t/data/a.parquet", 1, old()),
        file("/w/t/data/b.parquet", 2, old()),
    ];
    let s = settle(candidates, None, &eq(), |paths| {
        (paths, KeptFiles::default())
    });
    assert_eq!(s.became_referenced, 0);
    assert_eq!(
        paths(&s.orphans),
        ["/w/t/data/a.parquet", "/w/t/data/b.parquet"]
    );
    assert_eq!(s.kept.total(), 0);
}

#[test]
fn prefix_mismatch_modes_parse() {
    assert_eq!(
        "DELETE".parse::<PrefixMismatchMode>().unwrap(),
        PrefixMismatchMode::Delete
    );
    assert_eq!(
        "ignore".parse::<PrefixMismatchMode>().unwrap(),
        PrefixMismatchMode::Ignore
    );
    assert!("drop".parse::<PrefixMismatchMode>().is_err());
}
