//! Tags and branches (`floe::refs`): created and dropped as metadata-only commits, refused
//! clearly when wrong, honoured by expiry (a tag keeps its snapshot until its max-ref-age
//! passes; a dropped tag keeps nothing), and seen by PyIceberg.

use floe::operations::Operation;
use std::time::Duration;

use floe::expire::ExpireBuilder;
use floe::iceberg::TableIdent;
use floe::refs::{list_refs, NewRef, RefKind};

use crate::common::{run_python, sum_ids, Fixture};

/// A table with three appends (ids 0..100, 100..200, 200..300); their snapshot ids.
async fn three_snapshots(fx: &Fixture, name: &str) -> (TableIdent, [i64; 3]) {
    let ident = fx.table(name, Some("day(ts)")).await;
    let a = fx.append(&ident, 0, 100).await;
    let b = fx.append(&ident, 100, 200).await;
    let c = fx.append(&ident, 200, 300).await;
    (ident, [a, b, c])
}

fn tag_at(id: i64) -> NewRef {
    NewRef {
        snapshot_id: Some(id),
        ..Default::default()
    }
}

async fn expire_all(fx: &Fixture, ident: &TableIdent) -> floe::expire::ExpireMetrics {
    ExpireBuilder::new(&fx.catalog, ident.clone())
        .older_than(Duration::ZERO)
        .retain_last(1)
        .execute()
        .await
        .unwrap()
}

#[tokio::test]
async fn tags_and_branches_are_created_listed_replaced_and_dropped() {
    let fx = Fixture::new().await;
    let (ident, [a, b, c]) = three_snapshots(&fx, "r.t").await;
    let before = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();

    let made = fx
        .catalog
        .create_ref(&ident, "v1", RefKind::Tag, tag_at(a))
        .await
        .unwrap();
    assert_eq!((made.action, made.reference.snapshot_id), ("created", a));
    let made = fx
        .catalog
        .create_ref(
            &ident,
            "audit",
            RefKind::Branch,
            NewRef {
                max_ref_age_ms: Some(7 * 86_400_000),
                max_snapshot_age_ms: Some(2 * 86_400_000),
                min_snapshots_to_keep: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        made.reference.snapshot_id, c,
        "default: the current snapshot"
    );

    let t = fx.load(&ident).await;
    assert_ne!(
        t.metadata_location().unwrap(),
        before,
        "a new metadata file"
    );
    assert_eq!(
        t.metadata().current_snapshot_id(),
        Some(c),
        "main is unchanged"
    );
    assert_eq!(t.metadata().snapshots().count(), 3, "no snapshot added");
    let refs = list_refs(&t).unwrap();
    let names: Vec<(&str, RefKind, i64)> = refs
        .iter()
        .map(|r| (r.name.as_str(), r.kind, r.snapshot_id))
        .collect();
    assert_eq!(
        names,
        [
            ("main", RefKind::Branch, c),
            ("audit", RefKind::Branch, c),
            ("v1", RefKind::Tag, a)
        ]
    );
    let audit = &refs[1];
    assert_eq!(
        (
            audit.max_ref_age_ms,
            audit.max_snapshot_age_ms,
            audit.min_snapshots_to_keep
        ),
        (Some(604_800_000), Some(172_800_000), Some(2))
    );

    // Refusals, each naming what is wrong; nothing is committed.
    let location = t.metadata_location().unwrap().to_string();
    let err = |e: floe::Error| e.to_string();
    let e = err(fx
        .catalog
        .create_ref(&ident, "v1", RefKind::Tag, tag_at(b))
        .await
        .unwrap_err());
    assert!(
        e.contains("already exists") && e.contains("--replace"),
        "{e}"
    );
    let e = err(fx
        .catalog
        .create_ref(&ident, "audit", RefKind::Tag, NewRef::default())
        .await
        .unwrap_err());
    assert!(e.contains("a branch named 'audit' exists"), "{e}");
    let e = err(fx
        .catalog
        .create_ref(
            &ident,
            "audit",
            RefKind::Tag,
            NewRef {
                replace: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err());
    assert!(
        e.contains("share one namespace"),
        "even with --replace: {e}"
    );
    let e = err(fx
        .catalog
        .create_ref(&ident, "v9", RefKind::Tag, tag_at(42))
        .await
        .unwrap_err());
    assert!(
        e.contains("--snapshot-id") && e.contains("42") && e.contains("no such snapshot"),
        "{e}"
    );
    let e = err(fx
        .catalog
        .create_ref(&ident, "main", RefKind::Branch, tag_at(a))
        .await
        .unwrap_err());
    assert!(e.contains("'main'"), "{e}");
    let e = err(fx
        .catalog
        .drop_ref(&ident, "main", RefKind::Branch)
        .await
        .unwrap_err());
    assert!(e.contains("cannot be dropped"), "{e}");
    let e = err(fx
        .catalog
        .drop_ref(&ident, "nope", RefKind::Tag)
        .await
        .unwrap_err());
    assert!(e.contains("no such tag") && e.contains("v1"), "{e}");
    let e = err(fx
        .catalog
        .drop_ref(&ident, "audit", RefKind::Tag)
        .await
        .unwrap_err());
    assert!(
        e.contains("is a branch") && e.contains("branch drop"),
        "{e}"
    );
    let e = err(fx
        .catalog
        .create_ref(
            &ident,
            "t0",
            RefKind::Tag,
            NewRef {
                max_ref_age_ms: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap_err());
    assert!(e.contains("--retain"), "{e}");
    let empty = fx.table("r.empty", None).await;
    let e = err(fx
        .catalog
        .create_ref(&empty, "v1", RefKind::Tag, NewRef::default())
        .await
        .unwrap_err());
    assert!(e.contains("no snapshot yet"), "{e}");
    assert_eq!(
        fx.load(&ident).await.metadata_location().unwrap(),
        location,
        "nothing committed by a refusal"
    );

    // --replace moves the tag; the same settings again change nothing.
    let moved = fx
        .catalog
        .create_ref(
            &ident,
            "v1",
            RefKind::Tag,
            NewRef {
                replace: true,
                ..tag_at(b)
            },
        )
        .await
        .unwrap();
    assert_eq!(moved.action, "replaced");
    assert_eq!(moved.previous.unwrap().snapshot_id, a);
    let location = fx
        .load(&ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string();
    let same = fx
        .catalog
        .create_ref(
            &ident,
            "v1",
            RefKind::Tag,
            NewRef {
                replace: true,
                ..tag_at(b)
            },
        )
        .await
        .unwrap();
    assert_eq!(same.action, "unchanged");
    assert_eq!(fx.load(&ident).await.metadata_location().unwrap(), location);

    let dropped = fx
        .catalog
        .drop_ref(&ident, "audit", RefKind::Branch)
        .await
        .unwrap();
    assert_eq!(
        (dropped.action, dropped.reference.snapshot_id),
        ("dropped", c)
    );
    let left: Vec<String> = list_refs(&fx.load(&ident).await)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(left, ["main", "v1"]);
}

#[tokio::test]
async fn expiry_keeps_tagged_snapshots_until_the_tag_ages_out_or_is_dropped() {
    let fx = Fixture::new().await;
    let (ident, [a, b, c]) = three_snapshots(&fx, "r.exp").await;
    let d = fx.append(&ident, 300, 400).await;
    fx.catalog
        .create_ref(&ident, "keep", RefKind::Tag, tag_at(a))
        .await
        .unwrap();
    fx.catalog
        .create_ref(&ident, "gone", RefKind::Tag, tag_at(b))
        .await
        .unwrap();
    fx.catalog
        .drop_ref(&ident, "gone", RefKind::Tag)
        .await
        .unwrap();

    let e = expire_all(&fx, &ident).await;
    assert_eq!(e.plan.expired_snapshots, {
        let mut v = vec![b, c];
        v.sort();
        v
    });
    assert!(e.plan.expired_refs.is_empty(), "{:?}", e.plan.expired_refs);
    let t = fx.load(&ident).await;
    let mut kept: Vec<i64> = t.metadata().snapshots().map(|s| s.snapshot_id()).collect();
    kept.sort();
    let mut want = vec![a, d];
    want.sort();
    assert_eq!(kept, want, "the tagged snapshot and main's head");

    // The tagged snapshot's rows are still readable, by PyIceberg too.
    let seen = read_refs(&fx, "r.exp", &["keep", "main"]);
    assert_eq!(seen["refs"]["keep"]["type"], "tag", "{seen}");
    assert_eq!(seen["refs"]["keep"]["snapshot_id"], a, "{seen}");
    assert_eq!(seen["read"]["keep"]["rows"], 100, "{seen}");
    assert_eq!(seen["read"]["keep"]["sum"], sum_ids(0, 100), "{seen}");
    assert_eq!(seen["read"]["main"]["rows"], 400, "{seen}");

    // A max-ref-age that has passed: expiry removes the tag, then its snapshot.
    fx.catalog
        .create_ref(
            &ident,
            "keep",
            RefKind::Tag,
            NewRef {
                replace: true,
                max_ref_age_ms: Some(1),
                ..tag_at(a)
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let e = expire_all(&fx, &ident).await;
    assert_eq!(e.plan.expired_refs, ["keep"]);
    assert_eq!(e.plan.expired_snapshots, [a]);
    let t = fx.load(&ident).await;
    assert_eq!(t.metadata().snapshots().count(), 1);
    assert_eq!(list_refs(&t).unwrap().len(), 1, "only main");
    assert_eq!(fx.count_and_sum(&ident).await, (400, sum_ids(0, 400)));
}

#[tokio::test]
async fn a_branch_keeps_its_own_history_by_its_retention() {
    let fx = Fixture::new().await;
    let (ident, [a, b, c]) = three_snapshots(&fx, "r.br").await;
    // The branch at b keeps two snapshots of its line (b and its parent a) whatever their age.
    fx.catalog
        .create_ref(
            &ident,
            "audit",
            RefKind::Branch,
            NewRef {
                min_snapshots_to_keep: Some(2),
                ..tag_at(b)
            },
        )
        .await
        .unwrap();
    let e = expire_all(&fx, &ident).await;
    assert!(e.plan.expired_snapshots.is_empty(), "{:?}", e.plan);
    let seen = read_refs(&fx, "r.br", &["audit"]);
    assert_eq!(seen["refs"]["audit"]["type"], "branch", "{seen}");
    assert_eq!(seen["refs"]["audit"]["min_snapshots_to_keep"], 2, "{seen}");
    assert_eq!(seen["read"]["audit"]["rows"], 200, "{seen}");
    fx.catalog
        .drop_ref(&ident, "audit", RefKind::Branch)
        .await
        .unwrap();
    let e = expire_all(&fx, &ident).await;
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(e.plan.expired_snapshots, want);
    assert_eq!(
        fx.load(&ident).await.metadata().current_snapshot_id(),
        Some(c)
    );
}

/// `tests/interop/read_refs.py`: the refs PyIceberg sees and what it reads at `read` refs.
fn read_refs(fx: &Fixture, table: &str, read: &[&str]) -> serde_json::Value {
    let wh = fx.warehouse().display().to_string();
    let uri = format!("sqlite:///{}/catalog.db", wh.trim_start_matches('/'));
    let mut args = vec!["--catalog-uri", &uri, "--warehouse", &wh, "--table", table];
    for r in read {
        args.extend(["--read", r]);
    }
    run_python("tests/interop/read_refs.py", &args)
}
