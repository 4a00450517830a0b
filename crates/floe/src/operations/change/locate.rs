//! Finding live rows and their positions: the half of a row-level change that reads.
//!
//! A position delete names a row by its data file and its 0-based position in that file
//! (Iceberg spec v2, "Position Delete Files"). To know positions, each candidate data file is
//! read whole, in file order, without its delete files, projecting only the columns the
//! matcher needs (a key, or the columns of a `--where`); the position of a row is its ordinal
//! in that read. Rows a position delete or an equality delete already removed are skipped (the
//! equality delete files that apply to a data file are read once, their rows kept as encoded
//! keys, and the file's equality columns read with the matcher's): a row is never deleted
//! twice, no position delete names a row that is gone, and counts are of live rows only.
//!
//! Reads run a few files at a time; memory is one batch of the projected columns per file.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray};
use arrow::record_batch::RecordBatch;
use futures::{StreamExt, TryStreamExt};
use iceberg::expr::Predicate;
use iceberg::scan::FileScanTask;
use iceberg::spec::{DataContentType, Struct};
use iceberg::table::Table;

use crate::base::error::Result;
use crate::operations::compact::position_deletes::read_position_deletes;
use crate::table::rows::EqualityRows;

/// Data files read at once.
const READ_CONCURRENCY: usize = 4;

/// Selects rows of a batch of the projected columns (in the order asked for); `true` selects.
pub type Matcher = Arc<dyn Fn(&RecordBatch) -> Result<BooleanArray> + Send + Sync>;

/// The live data files of the current snapshot, with the delete files that apply to each;
/// with `filter`, only files whose partition values and column metrics may hold a matching
/// row (the filter only prunes: the matcher decides row by row).
pub async fn candidates(table: &Table, filter: Option<Predicate>) -> Result<Vec<FileScanTask>> {
    crate::table::opaque::refuse(
        table.metadata().current_schema(),
        &format!(
            "change rows of '{}'",
            crate::table::ident_string(table.identifier())
        ),
        "read",
    )?;
    if table.metadata().current_snapshot().is_none() {
        return Ok(vec![]);
    }
    // Through the current schema: a column renamed or added since the last data commit.
    let table = &crate::table::current_state(table)?;
    let scan = match filter {
        Some(f) => table.scan().with_filter(f).build()?,
        None => table.scan().build()?,
    };
    let mut tasks: Vec<FileScanTask> = scan.plan_files().await?.try_collect().await?;
    let dvs = crate::table::deletion_vector::DeletionVectors::of_current(table).await?;
    for t in &mut tasks {
        dvs.attach(t);
    }
    Ok(tasks)
}

/// The selected rows of one data file.
#[derive(Debug, Clone)]
pub struct Matched {
    /// The data file.
    pub path: String,
    /// Its partition spec and partition (where its position deletes go).
    pub spec_id: i32,
    pub partition: Struct,
    pub file_size_in_bytes: u64,
    /// Rows of the file no position or equality delete removed before this change.
    pub live_rows: u64,
    /// Positions of the selected live rows, ascending.
    pub positions: Vec<i64>,
    /// The scan task the file was read from, with the delete files that apply to it (a
    /// copy-on-write rewrite reads the file again through it).
    pub task: FileScanTask,
    /// Format v3: the Puffin file holding the file's deletion vector, if it has one (the new
    /// vector replaces it in the same commit).
    pub vector: Option<String>,
    /// Format v3: the positions deleted before this change (its vector, or the position
    /// delete files of a table upgraded from v2), merged into the new vector. Empty otherwise.
    pub deleted_before: Vec<i64>,
}

impl Matched {
    /// Every live row is selected: the file can leave the table instead of getting deletes.
    pub fn all_live_rows(&self) -> bool {
        self.positions.len() as u64 == self.live_rows
    }
}

/// What a search read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Searched {
    pub files: usize,
    pub bytes: u64,
    pub rows: u64,
}

/// Called with the bytes of each data file read (progress).
pub type OnFile = Arc<dyn Fn(u64) + Send + Sync>;

/// What a search knows of the table before reading any data file: the positions position
/// deletes already remove and each data file's partition spec. Built once for several
/// searches over the same table (one per equality delete file in a conversion).
#[derive(Clone, Default)]
pub struct Known {
    deleted: Arc<HashMap<String, Vec<i64>>>,
    /// The Puffin file of each data file's deletion vector (format v3).
    vectors: Arc<HashMap<String, String>>,
    /// Whether the table takes deletion vectors (format v3): a match then keeps the positions
    /// deleted before it.
    lineage: bool,
    specs: Arc<HashMap<String, i32>>,
    /// The rows of the equality delete files that apply to `tasks`, by delete file path.
    equality: Arc<HashMap<String, Arc<EqualityRows>>>,
}

impl Known {
    /// What is known of the data files of `tasks`, the rows their position and equality
    /// deletes remove included.
    pub async fn of(table: &Table, tasks: &[FileScanTask]) -> Result<Self> {
        Ok(Self {
            equality: Arc::new(equality_rows(table, tasks).await?),
            ..Self::positions_of(table, tasks).await?
        })
    }

    /// [`Known::of`] without the equality deletes (a conversion locates the rows they
    /// remove).
    pub async fn positions_of(table: &Table, tasks: &[FileScanTask]) -> Result<Self> {
        let (deleted, vectors) = deleted_positions(table, tasks).await?;
        Ok(Self {
            deleted: Arc::new(deleted),
            vectors: Arc::new(vectors),
            lineage: table.metadata().format_version() >= iceberg::spec::FormatVersion::V3,
            specs: Arc::new(spec_ids(table, tasks).await?),
            equality: Arc::default(),
        })
    }
}

/// The rows of the equality delete files attached to `tasks` (each read once). A file floe
/// cannot read through the current schema (a dropped column) is left out: its rows only count
/// again, as before it was known.
async fn equality_rows(
    table: &Table,
    tasks: &[FileScanTask],
) -> Result<HashMap<String, Arc<EqualityRows>>> {
    let files: HashMap<String, (u64, Vec<i32>)> = tasks
        .iter()
        .flat_map(|t| &t.deletes)
        .filter(|d| d.file_type == DataContentType::EqualityDeletes)
        .filter_map(|d| {
            let ids = d.equality_ids.clone().filter(|i| !i.is_empty())?;
            Some((d.file_path.clone(), (d.file_size_in_bytes, ids)))
        })
        .collect();
    let reads = files.into_iter().map(|(path, (size, ids))| {
        let table = table.clone();
        async move {
            let rows = EqualityRows::read(&table, &path, size, ids).await.ok();
            Ok::<_, crate::base::error::Error>(rows.map(|r| (path, Arc::new(r))))
        }
    });
    let all: Vec<Option<(String, Arc<EqualityRows>)>> = futures::stream::iter(reads)
        .buffer_unordered(READ_CONCURRENCY * 2)
        .try_collect()
        .await?;
    Ok(all.into_iter().flatten().collect())
}

/// Reads `field_ids` of every row of each task's data file and returns, per file with at least
/// one selected live row, the positions `matcher` selected. `on_file` is called with the bytes
/// of each file read.
pub async fn locate(
    table: &Table,
    tasks: Vec<FileScanTask>,
    field_ids: &[i32],
    matcher: Matcher,
    on_file: Option<OnFile>,
) -> Result<(Vec<Matched>, Searched)> {
    let known = Known::of(table, &tasks).await?;
    locate_known(table, &known, tasks, field_ids, matcher, on_file).await
}

/// [`locate`] with what is [`Known`] already (a superset of `tasks`' files).
pub async fn locate_known(
    table: &Table,
    known: &Known,
    tasks: Vec<FileScanTask>,
    field_ids: &[i32],
    matcher: Matcher,
    on_file: Option<OnFile>,
) -> Result<(Vec<Matched>, Searched)> {
    let specs = &known.specs;
    let searched = Searched {
        files: tasks.len(),
        bytes: tasks.iter().map(|t| t.file_size_in_bytes).sum(),
        rows: 0,
    };
    // Every read owns what it uses (no borrow of this frame inside the stream), so a locate
    // stays `Send` inside spawned tasks.
    let field_ids: Arc<[i32]> = field_ids.into();
    let reads = tasks.into_iter().map(|t| {
        let (table, field_ids) = (table.clone(), field_ids.clone());
        let (matcher, known, on_file) = (matcher.clone(), known.clone(), on_file.clone());
        async move {
            let size = t.file_size_in_bytes;
            let out = read_one(&table, t, &field_ids, &matcher, &known).await;
            if let Some(f) = on_file {
                f(size);
            }
            out
        }
    });
    let found: Vec<(Option<Matched>, u64)> = futures::stream::iter(reads)
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut rows = 0;
    let mut out = Vec::new();
    for (m, n) in found {
        rows += n;
        if let Some(mut m) = m {
            m.spec_id = specs.get(&m.path).copied().unwrap_or(m.spec_id);
            out.push(m);
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((out, Searched { rows, ..searched }))
}

/// One file: its selected live positions (`None` when none) and the rows read.
async fn read_one(
    table: &Table,
    mut task: FileScanTask,
    field_ids: &[i32],
    matcher: &Matcher,
    known: &Known,
) -> Result<(Option<Matched>, u64)> {
    let (deleted, equality) = (&known.deleted, &known.equality);
    let original = task.clone();
    let path = task.data_file_path.clone();
    let partition = task.partition.clone().unwrap_or_else(Struct::empty);
    let size = task.file_size_in_bytes;
    // The equality deletes that apply to this file, and the columns they compare: read after
    // the matcher's.
    let eq: Vec<&Arc<EqualityRows>> = task
        .deletes
        .iter()
        .filter(|d| d.file_type == DataContentType::EqualityDeletes)
        .filter_map(|d| equality.get(&d.file_path))
        .collect();
    let mut project = field_ids.to_vec();
    for e in &eq {
        for id in e.ids() {
            if !project.contains(id) {
                project.push(*id);
            }
        }
    }
    let matcher_cols: Vec<usize> = (0..field_ids.len()).collect();
    task.deletes = vec![];
    task.predicate = None;
    task.project_field_ids = project.clone();
    let mut stream = table
        .reader_builder()
        .with_batch_size(8192)
        .with_data_file_concurrency_limit(1)
        .build()
        .read(futures::stream::iter([Ok(task)]).boxed())?
        .stream();
    let gone: &[i64] = deleted.get(&path).map(Vec::as_slice).unwrap_or(&[]);
    let mut next: i64 = 0;
    let mut positions = Vec::new();
    let mut live_rows = 0u64;
    while let Some(batch) = stream.try_next().await? {
        // Rows an equality delete removed.
        let mut removed = vec![false; batch.num_rows()];
        for e in &eq {
            let cols: Vec<ArrayRef> = e
                .ids()
                .iter()
                .map(|id| {
                    let i = project.iter().position(|p| p == id).unwrap_or_default();
                    batch.column(i).clone()
                })
                .collect();
            for (r, d) in removed.iter_mut().zip(e.deletes(&cols)?) {
                *r |= d;
            }
        }
        let mask = matcher(&batch.project(&matcher_cols)?)?;
        for (i, selected) in mask.iter().enumerate() {
            let p = next + i as i64;
            if removed[i] || gone.binary_search(&p).is_ok() {
                continue;
            }
            live_rows += 1;
            if selected == Some(true) {
                positions.push(p);
            }
        }
        next += batch.num_rows() as i64;
    }
    let matched = (!positions.is_empty()).then(|| Matched {
        spec_id: table.metadata().default_partition_spec_id(),
        partition,
        file_size_in_bytes: size,
        live_rows,
        positions,
        task: original,
        vector: known.vectors.get(&path).cloned(),
        deleted_before: if known.lineage {
            gone.to_vec()
        } else {
            Vec::new()
        },
        path,
    });
    Ok((matched, next as u64))
}

/// Positions already deleted by position delete files and deletion vectors, per data file of
/// `tasks` (sorted), and the Puffin file of each data file's vector. Each delete file is read
/// once (the iceberg crate attaches every position delete file of a partition to each of its
/// data files).
async fn deleted_positions(
    table: &Table,
    tasks: &[FileScanTask],
) -> Result<(HashMap<String, Vec<i64>>, HashMap<String, String>)> {
    let wanted: BTreeSet<&str> = tasks.iter().map(|t| t.data_file_path.as_str()).collect();
    // A data file with a deletion vector (format v3) has only that: its positions are read
    // from the vector, not from a Parquet position delete file.
    let dvs = crate::table::deletion_vector::DeletionVectors::of_current(table).await?;
    let files: BTreeSet<String> = tasks
        .iter()
        .flat_map(|t| &t.deletes)
        .filter(|d| d.file_type == DataContentType::PositionDeletes && !dvs.is_puffin(&d.file_path))
        .map(|d| d.file_path.clone())
        .collect();
    let with_vector: Vec<(String, crate::table::deletion_vector::DvLocation)> = tasks
        .iter()
        .filter_map(|t| Some((t.data_file_path.clone(), dvs.of_task(t)?.clone())))
        .collect();
    let puffin_of: HashMap<String, String> = with_vector
        .iter()
        .map(|(path, dv)| (path.clone(), dv.puffin.clone()))
        .collect();
    let io = table.file_io().clone();
    let vectors = with_vector.into_iter().map(move |(path, dv)| {
        let io = io.clone();
        async move {
            let v = dv.read(&io).await?;
            Ok::<_, crate::base::error::Error>((path, v))
        }
    });
    let vectors: Vec<(String, crate::table::deletion_vector::DeletionVector)> =
        futures::stream::iter(vectors)
            .buffer_unordered(READ_CONCURRENCY * 2)
            .try_collect()
            .await?;
    let reads = files.into_iter().map(|f| {
        let table = table.clone();
        async move { read_position_deletes(&table, &f).await }
    });
    let all: Vec<Vec<(String, i64)>> = futures::stream::iter(reads)
        .buffer_unordered(READ_CONCURRENCY * 2)
        .try_collect()
        .await?;
    let mut out: HashMap<String, Vec<i64>> = HashMap::new();
    for (path, pos) in all.into_iter().flatten() {
        if wanted.contains(path.as_str()) {
            out.entry(path).or_default().push(pos);
        }
    }
    for (path, v) in vectors {
        out.entry(path)
            .or_default()
            .extend(v.positions().map(|p| p as i64));
    }
    for v in out.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    Ok((out, puffin_of))
}

/// The partition spec of each data file of `tasks` (scan tasks do not carry it): the one spec
/// of a table that never changed its partitioning, else from the manifests.
async fn spec_ids(table: &Table, tasks: &[FileScanTask]) -> Result<HashMap<String, i32>> {
    let md = table.metadata();
    if md.partition_specs_iter().count() <= 1 || tasks.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(crate::table::manifests::live_files(table)
        .await?
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| (f.file.file_path().to_string(), f.spec_id))
        .collect())
}
