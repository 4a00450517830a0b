use super::*;

fn fence(location: &str, others: &[(&str, &str)], protected: &[&str]) -> Fence {
    Fence::new(
        "n.t".into(),
        location,
        others
            .iter()
            .map(|(t, l)| (t.to_string(), l.to_string()))
            .collect(),
        protected.iter().map(|p| p.to_string()).collect(),
    )
}

#[test]
fn dot_dot_cannot_climb_out_of_the_table() {
    let f = fence("file:///nowhere-floe/w/n/x", &[], &[]);
    assert_eq!(
        f.verdict("file:///nowhere-floe/w/n/x/data/a.parquet"),
        Verdict::Inside
    );
    assert_eq!(
        f.verdict("file:///nowhere-floe/w/n/x/../victim/data/a.parquet"),
        Verdict::Outside
    );
    assert_eq!(
        f.verdict("/nowhere-floe/w/n/x/data/../../x2/a"),
        Verdict::Outside
    );
    assert_eq!(f.verdict("/nowhere-floe/w/n/x/data//./a"), Verdict::Inside);
    assert_eq!(
        f.verdict("/nowhere-floe/w/n/x"),
        Verdict::Outside,
        "the root itself"
    );
    assert_eq!(f.verdict("/../../nowhere-floe/w/n/x/a"), Verdict::Outside);
    assert!(!f.holds_dir("/nowhere-floe/w/n/x/.."));
    assert!(f.holds_dir("/nowhere-floe/w/n/x/data/"));
    assert!(f.holds_dir("file:/nowhere-floe/w/n/x"));
}

#[test]
fn percent_escapes_are_read_both_ways() {
    let f = fence("file:///nowhere-floe/w/n/x", &[], &[]);
    assert_eq!(
        f.verdict("/nowhere-floe/w/n/x/%2e%2e/%2e%2e/etc/passwd"),
        Verdict::Outside
    );
    assert_eq!(
        f.verdict("/nowhere-floe/w/n/x/a%20b.parquet"),
        Verdict::Inside
    );
}

#[test]
fn schemes_and_buckets() {
    let f = fence("s3://lake/w/n/x", &[], &[]);
    assert_eq!(f.verdict("s3a://lake/w/n/x/data/a"), Verdict::Inside);
    assert_eq!(f.verdict("s3://other/w/n/x/data/a"), Verdict::Outside);
    assert_eq!(
        f.verdict("/w/n/x/data/a"),
        Verdict::Outside,
        "local is not S3"
    );
    assert_eq!(f.verdict("gs://lake/w/n/x/data/a"), Verdict::Outside);
}

#[test]
fn other_tables_inside_or_sharing_are_theirs() {
    let f = fence(
        "/nowhere-floe/w",
        &[
            ("n.a", "/nowhere-floe/w/n/a"),
            ("n.b", "/nowhere-floe/w/n/b/"),
        ],
        &["/nowhere-floe/w/catalog.db"],
    );
    assert_eq!(
        f.verdict("/nowhere-floe/w/n/a/data/1.parquet"),
        Verdict::OtherTable("n.a".into())
    );
    assert_eq!(
        f.verdict("/nowhere-floe/w/catalog.db"),
        Verdict::CatalogFile
    );
    assert_eq!(f.verdict("/nowhere-floe/w/n/c/x"), Verdict::Inside);
    assert!(
        f.shared_location(None).is_some(),
        "holds the catalog database"
    );
    // A table nested in another: while the other's files are unknown, nothing inside it may
    // go; once known, what the other references stays and the rest is this table's.
    let mut nested = fence(
        "/nowhere-floe/w/n/a/sub",
        &[("n.a", "/nowhere-floe/w/n/a")],
        &[],
    );
    assert_eq!(nested.containers(), ["n.a"]);
    assert_eq!(
        nested.verdict("/nowhere-floe/w/n/a/sub/data/x"),
        Verdict::OtherTable("n.a".into())
    );
    nested.set_container_files(
        "n.a",
        ["file:///nowhere-floe/w/n/a/sub/data/theirs".to_string()],
    );
    assert_eq!(
        nested.verdict("/nowhere-floe/w/n/a/sub/data/x"),
        Verdict::Inside
    );
    assert_eq!(
        nested.verdict("/nowhere-floe/w/n/a/sub//data/./theirs"),
        Verdict::OtherTable("n.a".into())
    );
    // `t` and `t2` share a prefix, not a location.
    let prefix = fence(
        "/nowhere-floe/w/n/t",
        &[("n.t2", "/nowhere-floe/w/n/t2")],
        &[],
    );
    assert!(prefix.containers().is_empty());
    assert_eq!(
        prefix.verdict("/nowhere-floe/w/n/t/data/x"),
        Verdict::Inside
    );
    assert_eq!(
        prefix.verdict("/nowhere-floe/w/n/t2/data/x"),
        Verdict::OtherTable("n.t2".into())
    );
    assert_eq!(
        nested
            .allow_external(true)
            .verdict("/nowhere-floe/w/n/a/data/x"),
        Verdict::OtherTable("n.a".into())
    );
    let shared = fence(
        "/nowhere-floe/w/n/dots/../a",
        &[("n.a", "/nowhere-floe/w/n/a")],
        &[],
    );
    assert_eq!(
        shared.verdict("/nowhere-floe/w/n/a/data/x"),
        Verdict::OtherTable("n.a".into())
    );
    assert!(shared.shared_location(None).is_some());
}

#[test]
fn external_files_only_with_the_flag() {
    let f = fence("/nowhere-floe/w/n/x", &[], &[]);
    assert_eq!(f.verdict("/elsewhere/a.parquet"), Verdict::Outside);
    let f = f.allow_external(true);
    assert_eq!(f.verdict("/elsewhere/a.parquet"), Verdict::External);
}

#[test]
fn symlinks_out_of_the_table_are_outside() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("n/x");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(table.join("data")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, table.join("data/linkdir")).unwrap();
    let f = fence(&format!("file://{}", table.display()), &[], &[]);
    let via_link = format!("{}/data/linkdir/old.parquet", table.display());
    assert_eq!(f.verdict(&via_link), Verdict::Outside);
    assert!(!f.holds_dir(&format!("{}/data/linkdir", table.display())));
    assert_eq!(
        f.verdict(&format!("{}/data/real.parquet", table.display())),
        Verdict::Inside
    );
    // A symlinked table location is followed on both sides.
    let alias = dir.path().join("alias");
    std::os::unix::fs::symlink(&table, &alias).unwrap();
    let f = fence(&alias.display().to_string(), &[], &[]);
    assert_eq!(
        f.verdict(&format!("{}/data/real.parquet", table.display())),
        Verdict::Outside,
        "lexically outside the alias"
    );
    assert_eq!(
        f.verdict(&format!("{}/data/real.parquet", alias.display())),
        Verdict::Inside
    );
}

/// An independent resolver (std's path components) for the property test.
fn reference(p: &str) -> Option<Vec<String>> {
    let p = p.strip_prefix("file://").unwrap_or(p);
    let mut out: Vec<String> = Vec::new();
    for c in Path::new(p).components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop()?;
            }
            std::path::Component::Normal(s) => out.push(s.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    Some(out)
}

use proptest::prelude::*;

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(String::new()),
        Just("%2e%2e".to_string()),
        Just("%2E.".to_string()),
        Just("victim".to_string()),
        Just("x".to_string()),
        "[a-z0-9_-]{1,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the spelling, `Inside` means strictly under the root in every reading.
    #[test]
    fn inside_means_under_the_root_in_every_reading(
        rel in proptest::collection::vec(segment(), 0..8),
        scheme in prop_oneof![Just(""), Just("file://")],
    ) {
        let f = fence("file:///nowhere-floe/w/n/x", &[("n.victim", "/nowhere-floe/w/n/victim")], &[]);
        let path = format!("{scheme}/nowhere-floe/w/n/x/{}", rel.join("/"));
        let root = reference("/nowhere-floe/w/n/x").unwrap();
        let v = f.verdict(&path);
        if v == Verdict::Inside {
            for reading in [path.clone(), percent_decode(&path)] {
                let r = reference(&reading).expect("an inside path does not climb out");
                prop_assert!(r.len() > root.len() && r[..root.len()] == root[..], "{reading}");
            }
        }
        // Plain segments are always inside; nothing ever lands in the neighbour.
        let plain = rel.iter().all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains('%'));
        if plain && !rel.is_empty() {
            prop_assert_eq!(&v, &Verdict::Inside, "{}", path);
        }
        if let Some(r) = reference(&path) {
            if r.starts_with(&reference("/nowhere-floe/w/n/victim").unwrap()) {
                prop_assert!(!v.deletable(), "{path} reaches the neighbour");
            }
        }
    }
}
