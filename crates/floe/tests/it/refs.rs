//! Tags and branches (`floe::operations::refs`): created and dropped as metadata-only commits, refused
//! clearly when wrong, honoured by expiry (a tag keeps its snapshot until its max-ref-age
//! passes; a dropped tag keeps nothing), and seen by PyIceberg.

use floe::base::cost::Costed;
use floe::operations::Operation;
use std::time::Duration;

use floe::iceberg::TableIdent;
use floe::operations::expire::ExpireBuilder;
use floe::operations::refs::{list_refs, CreateRefBuilder, DropRefBuilder, NewRef, RefKind};

use crate::common::{read_refs, sum_ids, Fixture};

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

async fn expire_all(fx: &Fixture, ident: &TableIdent) -> floe::operations::expire::ExpireMetrics {
    ExpireBuilder::new(&fx.catalog, ident.clone())
        .with_older_than_age(Duration::ZERO)
        .with_retain_last(1)
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

    let made = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_new_ref(tag_at(a))
        .execute()
        .await
        .unwrap();
    assert_eq!((made.action, made.reference.snapshot_id), ("created", a));
    let made = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("audit")
        .with_new_ref(NewRef {
            max_ref_age_ms: Some(7 * 86_400_000),
            max_snapshot_age_ms: Some(2 * 86_400_000),
            min_snapshots_to_keep: Some(2),
            ..Default::default()
        })
        .execute()
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
    let e = err(CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_new_ref(tag_at(b))
        .execute()
        .await
        .unwrap_err());
    assert!(
        e.contains("already exists") && e.contains("--replace"),
        "{e}"
    );
    let e = err(CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("audit")
        .execute()
        .await
        .unwrap_err());
    assert!(e.contains("a branch named 'audit' exists"), "{e}");
    let e = err(CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("audit")
        .with_new_ref(NewRef {
            replace: true,
            ..Default::default()
        })
        .execute()
        .await
        .unwrap_err());
    assert!(
        e.contains("share one namespace"),
        "even with --replace: {e}"
    );
    let e = err(CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v9")
        .with_new_ref(tag_at(42))
        .execute()
        .await
        .unwrap_err());
    assert!(
        e.contains("--snapshot-id") && e.contains("42") && e.contains("no such snapshot"),
        "{e}"
    );
    let e = err(CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("main")
        .with_new_ref(tag_at(a))
        .execute()
        .await
        .unwrap_err());
    assert!(e.contains("'main'"), "{e}");
    let e = err(DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("main")
        .execute()
        .await
        .unwrap_err());
    assert!(e.contains("cannot be dropped"), "{e}");
    let e = err(DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("nope")
        .execute()
        .await
        .unwrap_err());
    assert!(e.contains("no such tag") && e.contains("v1"), "{e}");
    let e = err(DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("audit")
        .execute()
        .await
        .unwrap_err());
    assert!(
        e.contains("is a branch") && e.contains("branch drop"),
        "{e}"
    );
    let e = err(CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("t0")
        .with_new_ref(NewRef {
            max_ref_age_ms: Some(0),
            ..Default::default()
        })
        .execute()
        .await
        .unwrap_err());
    assert!(e.contains("--retain"), "{e}");
    let empty = fx.table("r.empty", None).await;
    let e = err(CreateRefBuilder::new(&fx.catalog, empty.clone())
        .with_tag("v1")
        .execute()
        .await
        .unwrap_err());
    assert!(e.contains("no snapshot yet"), "{e}");
    assert_eq!(
        fx.load(&ident).await.metadata_location().unwrap(),
        location,
        "nothing committed by a refusal"
    );

    // --replace moves the tag; the same settings again change nothing.
    let moved = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_new_ref(NewRef {
            replace: true,
            ..tag_at(b)
        })
        .execute()
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
    let same = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_new_ref(NewRef {
            replace: true,
            ..tag_at(b)
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(same.action, "unchanged");
    assert_eq!(fx.load(&ident).await.metadata_location().unwrap(), location);

    let dropped = DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("audit")
        .execute()
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
    CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("keep")
        .with_new_ref(tag_at(a))
        .execute()
        .await
        .unwrap();
    CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("gone")
        .with_new_ref(tag_at(b))
        .execute()
        .await
        .unwrap();
    DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("gone")
        .execute()
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
    CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("keep")
        .with_new_ref(NewRef {
            replace: true,
            max_ref_age_ms: Some(1),
            ..tag_at(a)
        })
        .execute()
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
    CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("audit")
        .with_new_ref(NewRef {
            min_snapshots_to_keep: Some(2),
            ..tag_at(b)
        })
        .execute()
        .await
        .unwrap();
    let e = expire_all(&fx, &ident).await;
    assert!(e.plan.expired_snapshots.is_empty(), "{:?}", e.plan);
    let seen = read_refs(&fx, "r.br", &["audit"]);
    assert_eq!(seen["refs"]["audit"]["type"], "branch", "{seen}");
    assert_eq!(seen["refs"]["audit"]["min_snapshots_to_keep"], 2, "{seen}");
    assert_eq!(seen["read"]["audit"]["rows"], 200, "{seen}");
    DropRefBuilder::new(&fx.catalog, ident.clone())
        .with_branch("audit")
        .execute()
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

/// The metadata location of `ident`: a plan must leave it as it is.
async fn location(fx: &Fixture, ident: &TableIdent) -> String {
    fx.load(ident)
        .await
        .metadata_location()
        .unwrap()
        .to_string()
}

/// The snapshot ref `name` of `ident` names, if any.
async fn ref_at(fx: &Fixture, ident: &TableIdent, name: &str) -> Option<i64> {
    list_refs(&fx.load(ident).await)
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
        .map(|r| r.snapshot_id)
}

#[tokio::test]
async fn a_ref_plan_commits_nothing_and_its_apply_makes_exactly_the_planned_change() {
    let fx = Fixture::new().await;
    let (ident, [a, _, c]) = three_snapshots(&fx, "r.plan").await;
    let before = location(&fx, &ident).await;

    let create = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_snapshot_id(a)
        .with_max_ref_age_ms(86_400_000);
    let plan = create.plan().await.unwrap();
    assert_eq!(
        location(&fx, &ident).await,
        before,
        "a plan commits nothing"
    );
    assert_eq!(
        plan.snapshot_id,
        Some(c),
        "planned against the current snapshot"
    );
    assert!(plan.report.dry_run);
    assert_eq!(plan.report.action, "created");
    assert!(plan.cost().is_zero(), "metadata only");
    let planned = serde_json::to_value(&plan).unwrap();
    let done = create.apply(plan).await.unwrap();
    assert!(!done.dry_run);
    let mut applied = serde_json::to_value(&done).unwrap();
    applied["dry_run"] = true.into();
    assert_eq!(applied, planned, "apply reports what the plan said");
    assert_ne!(location(&fx, &ident).await, before);
    let tag = list_refs(&fx.load(&ident).await)
        .unwrap()
        .into_iter()
        .find(|r| r.name == "v1")
        .unwrap();
    assert_eq!(tag, done.reference);
    assert_eq!(
        (tag.kind, tag.snapshot_id, tag.max_ref_age_ms),
        (RefKind::Tag, a, Some(86_400_000))
    );

    // A drop, planned then applied.
    let drop = DropRefBuilder::new(&fx.catalog, ident.clone()).with_tag("v1");
    let at = location(&fx, &ident).await;
    let plan = drop.plan().await.unwrap();
    assert_eq!(location(&fx, &ident).await, at, "a plan commits nothing");
    assert_eq!(
        (plan.report.action, plan.report.reference.snapshot_id),
        ("dropped", a)
    );
    let done = drop.apply(plan).await.unwrap();
    assert_eq!((done.action, done.dry_run), ("dropped", false));
    assert_eq!(ref_at(&fx, &ident, "v1").await, None);
}

#[tokio::test]
async fn a_ref_plan_is_refused_at_apply_when_the_ref_changed_meanwhile() {
    let fx = Fixture::new().await;
    let (ident, [a, b, c]) = three_snapshots(&fx, "r.race").await;
    // Another process: its commits go through its own catalog connection.
    let other = fx.second_connection().await;
    let refused = |e: floe::Error, now: &str| {
        let e = e.to_string();
        assert!(
            e.contains("changed after this was planned") && e.contains(now),
            "{e}"
        );
    };

    // Created meanwhile: the create planned on "no such tag" does not overwrite it.
    let create = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_snapshot_id(a);
    let plan = create.plan().await.unwrap();
    CreateRefBuilder::new(&other, ident.clone())
        .with_tag("v1")
        .with_snapshot_id(b)
        .execute()
        .await
        .unwrap();
    refused(
        create.apply(plan).await.unwrap_err(),
        &format!("then: none; now: a tag at snapshot {b}"),
    );
    assert_eq!(ref_at(&fx, &ident, "v1").await, Some(b));

    // Moved meanwhile: a replace planned on the tag at b does not replace the one at c.
    let replace = CreateRefBuilder::new(&fx.catalog, ident.clone())
        .with_tag("v1")
        .with_snapshot_id(a)
        .with_replace(true);
    let plan = replace.plan().await.unwrap();
    assert_eq!(plan.report.previous.as_ref().unwrap().snapshot_id, b);
    CreateRefBuilder::new(&other, ident.clone())
        .with_tag("v1")
        .with_snapshot_id(c)
        .with_replace(true)
        .execute()
        .await
        .unwrap();
    refused(
        replace.clone().apply(plan).await.unwrap_err(),
        &format!("then: a tag at snapshot {b}; now: a tag at snapshot {c}"),
    );
    assert_eq!(ref_at(&fx, &ident, "v1").await, Some(c));

    // Re-set with other retention: the snapshot is the same, the settings are not.
    let plan = replace.plan().await.unwrap();
    CreateRefBuilder::new(&other, ident.clone())
        .with_tag("v1")
        .with_snapshot_id(c)
        .with_max_ref_age_ms(60_000)
        .with_replace(true)
        .execute()
        .await
        .unwrap();
    refused(
        replace.clone().apply(plan).await.unwrap_err(),
        "its retention settings changed",
    );

    // Dropped meanwhile: the planned drop is refused, naming what it found.
    let drop = DropRefBuilder::new(&fx.catalog, ident.clone()).with_tag("v1");
    let plan = drop.plan().await.unwrap();
    DropRefBuilder::new(&other, ident.clone())
        .with_tag("v1")
        .execute()
        .await
        .unwrap();
    refused(
        drop.apply(plan).await.unwrap_err(),
        &format!("then: a tag at snapshot {c}; now: none"),
    );

    // A plan whose ref did not change applies after an unrelated commit.
    let create = CreateRefBuilder::new(&fx.catalog, ident.clone()).with_branch("audit");
    let plan = create.plan().await.unwrap();
    let d = fx.append(&ident, 300, 400).await;
    let done = create.apply(plan).await.unwrap();
    assert_eq!(
        (done.action, done.reference.snapshot_id),
        ("created", c),
        "at the snapshot current when planned"
    );
    assert_eq!(ref_at(&fx, &ident, "audit").await, Some(c));
    assert_eq!(ref_at(&fx, &ident, "main").await, Some(d));
}
