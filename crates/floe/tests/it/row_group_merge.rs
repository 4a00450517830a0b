//! Row-group merge in compaction: inputs' row groups copied without decoding give the same
//! rows, content and data-file metrics as a decoded rewrite (read by floe, PyIceberg and
//! DuckDB), and the path is refused where it would change the table: deletes to apply, an
//! older schema, a sorted rewrite, small row groups under `auto`, bloom filters.

use floe::iceberg::spec::{DataContentType, DataFile, Struct};
use floe::iceberg::TableIdent;
use floe::operations::compact::{CompactBuilder, CompactMetrics};
use floe::operations::Operation;

use crate::common::{read_with_python as read, rows, sum_ids, Fixture};

async fn compact(fx: &Fixture, ident: &TableIdent, opts: &[(&str, &str)]) -> CompactMetrics {
    let mut b = CompactBuilder::new(&fx.catalog, ident.clone());
    for (k, v) in opts {
        b = b.with_option(*k, *v);
    }
    b.execute().await.unwrap()
}

async fn live_data(fx: &Fixture, ident: &TableIdent) -> Vec<DataFile> {
    let t = fx.load(ident).await;
    floe::table::manifests::live_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| f.file)
        .collect()
}

fn row_groups(f: &DataFile) -> Vec<i64> {
    let path = f.file_path().trim_start_matches("file://");
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(path).unwrap())
            .unwrap();
    use parquet::file::reader::FileReader;
    reader
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect()
}

/// Six appends of 2,000 rows (one row group each) into `name`.
async fn six_files(fx: &Fixture, name: &str) -> TableIdent {
    let ident = fx.table(name, None).await;
    for i in 0..6 {
        fx.append(&ident, i * 2000, i * 2000 + 2000).await;
    }
    ident
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copied_row_groups_have_the_rows_content_and_metrics_of_a_decoded_rewrite() {
    let fx = Fixture::new().await;
    let merged = six_files(&fx, "db.merged").await;
    let decoded = six_files(&fx, "db.decoded").await;
    let before = read(&fx, "db.merged");

    let m = compact(&fx, &merged, &[("row-group-merge", "always")]).await;
    assert_eq!(m.row_group_merge.files, 6, "{:?}", m.row_group_merge);
    assert_eq!(m.row_group_merge.row_groups, 6);
    assert!(m.row_group_merge.bytes > 0);
    assert_eq!((m.rewritten_files, m.added_files, m.rows), (6, 1, 12_000));
    let d = compact(&fx, &decoded, &[("row-group-merge", "never")]).await;
    assert_eq!(d.row_group_merge.files, 0);
    assert_eq!((d.rewritten_files, d.added_files, d.rows), (6, 1, 12_000));

    let (m_out, d_out) = (
        live_data(&fx, &merged).await,
        live_data(&fx, &decoded).await,
    );
    assert_eq!((m_out.len(), d_out.len()), (1, 1));
    let (mf, df) = (&m_out[0], &d_out[0]);
    // The copy keeps the inputs' row groups; the decoded rewrite re-cut them.
    assert_eq!(row_groups(mf), vec![2000; 6]);
    assert_eq!(row_groups(df).iter().sum::<i64>(), 12_000);
    // Metrics: exactly those of the decoded rewrite (sizes differ with the encoding).
    assert_eq!(mf.record_count(), df.record_count());
    assert_eq!(mf.value_counts(), df.value_counts());
    assert_eq!(mf.null_value_counts(), df.null_value_counts());
    assert_eq!(mf.nan_value_counts(), df.nan_value_counts());
    assert_eq!(mf.lower_bounds(), df.lower_bounds());
    assert_eq!(mf.upper_bounds(), df.upper_bounds());
    assert_eq!(mf.split_offsets().map(<[i64]>::len), Some(6));

    assert_eq!(
        fx.count_and_sum(&merged).await,
        (12_000, sum_ids(0, 12_000))
    );
    let after = read(&fx, "db.merged");
    for reader in ["pyiceberg", "duckdb"] {
        assert_eq!(after[reader]["rows"], 12_000, "{after}");
        assert_eq!(after[reader]["files"], 1, "{after}");
        assert_eq!(
            after[reader]["checksum"], before["duckdb"]["checksum"],
            "{reader}"
        );
    }
    // A bounds-pruned scan still finds its rows in the copied file.
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.merged", "id BETWEEN 3990 AND 4009").await,
        20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_copies_only_inputs_whose_row_groups_reach_the_threshold() {
    let fx = Fixture::new().await;
    let ident = six_files(&fx, "db.auto").await;
    // Files of ~40 KB are far under 8 MiB row groups: decoded into full row groups.
    let m = compact(
        &fx,
        &ident,
        &[("row-group-merge", "auto"), ("rewrite-all", "true")],
    )
    .await;
    assert_eq!(m.row_group_merge.files, 0, "{:?}", m.row_group_merge);
    let out = live_data(&fx, &ident).await;
    assert_eq!(row_groups(&out[0]), vec![12_000]);
    // With a threshold they reach, the same inputs are copied.
    for i in 6..9 {
        fx.append(&ident, i * 2000, i * 2000 + 2000).await;
    }
    let m = compact(
        &fx,
        &ident,
        &[
            ("row-group-merge", "auto"),
            ("row-group-merge-min-bytes", "1KiB"),
            ("rewrite-all", "true"),
        ],
    )
    .await;
    assert_eq!(m.row_group_merge.files, 4, "{:?}", m.row_group_merge);
    assert_eq!(fx.count_and_sum(&ident).await, (18_000, sum_ids(0, 18_000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_with_deletes_an_older_schema_or_a_sort_are_decoded() {
    let fx = Fixture::new().await;

    // Deletes: the file with a position delete is decoded (its rows applied), the rest copied.
    let ident = six_files(&fx, "db.del").await;
    let t = fx.load(&ident).await;
    let first = live_data(&fx, &ident)
        .await
        .into_iter()
        .find(|f| f.lower_bounds()[&1] == floe::iceberg::spec::Datum::long(0))
        .unwrap();
    let del = floe::write::deletes::write_position_delete_file(
        &t,
        0,
        Struct::empty(),
        vec![
            (first.file_path().to_string(), 0),
            (first.file_path().to_string(), 1),
        ],
        false,
    )
    .await
    .unwrap()
    .unwrap();
    floe::commit::Committer::new(&fx.catalog, &ident)
        .commit(floe::commit::SnapshotUpdate::delete(&t, vec![], vec![del]))
        .await
        .unwrap();
    let m = compact(&fx, &ident, &[("row-group-merge", "always")]).await;
    assert_eq!(m.row_group_merge.files, 5, "{:?}", m.row_group_merge);
    assert_eq!(
        fx.count_and_sum(&ident).await,
        (11_998, sum_ids(0, 12_000) - 1)
    );

    // An older schema: files written before a column was added are decoded (the column is
    // filled with nulls), files of the current schema copied.
    let ident = fx.table("db.evolved", None).await;
    for i in 0..3 {
        fx.append(&ident, i * 1000, i * 1000 + 1000).await;
    }
    floe::operations::alter::schema::AlterSchemaBuilder::new(&fx.catalog, ident.clone())
        .with_changes([floe::operations::alter::schema::SchemaChange::add("n int").unwrap()])
        .execute()
        .await
        .unwrap();
    for i in 3..5 {
        let b = rows(&fx, &ident, i * 1000, i * 1000 + 1000).await;
        floe::operations::append::AppendBuilder::from_batches(&fx.catalog, ident.clone(), vec![b])
            .execute()
            .await
            .unwrap();
    }
    let m = compact(&fx, &ident, &[("row-group-merge", "always")]).await;
    assert_eq!(m.row_group_merge.files, 2, "{:?}", m.row_group_merge);
    assert_eq!(fx.count_and_sum(&ident).await, (5000, sum_ids(0, 5000)));
    let r = read(&fx, "db.evolved");
    assert_eq!(r["pyiceberg"]["rows"], 5000, "{r}");
    assert_eq!(r["pyiceberg"]["checksum"], r["duckdb"]["checksum"], "{r}");
    assert_eq!(
        crate::common::count_where(&fx.catalog, "db.evolved", "n IS NULL").await,
        3000
    );

    // A sorted rewrite decodes everything (row groups would keep their own order).
    let ident = six_files(&fx, "db.sorted").await;
    let m = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("row-group-merge", "always")
        .with_sort_by(Some("id desc".into()))
        .execute()
        .await
        .unwrap();
    assert_eq!(m.row_group_merge.files, 0);
    assert_eq!(m.rows, 12_000);

    // Bloom filters the copied chunks would not carry: decoded.
    let ident = six_files(&fx, "db.bloom").await;
    fx.set_property(
        &ident,
        "write.parquet.bloom-filter-enabled.column.id",
        "true",
    )
    .await;
    let m = compact(&fx, &ident, &[("row-group-merge", "always")]).await;
    assert_eq!(m.row_group_merge.files, 0);

    // A bad mode is an error naming the option.
    let e = CompactBuilder::new(&fx.catalog, ident.clone())
        .with_option("row-group-merge", "sometimes")
        .execute()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("row-group-merge"), "{e}");
}
