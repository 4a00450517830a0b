//! floe's manifest writer: manifest entries encoded straight to Avro bytes, with the header
//! (schema, metadata) the iceberg crate's writer gives (Iceberg spec, "Manifests"; Avro spec,
//! "Object Container Files").
//!
//! The crate's `ManifestWriter` turns every entry into an apache-avro `Value` through serde and
//! resolves it against the schema before encoding it: about a fifth of the CPU of a compaction
//! of 3,000 small files went there. This writer keeps the crate's file layout and takes its
//! header from the crate itself: [`ManifestWriter::new`] has the crate write an empty manifest
//! of the same schema, spec, format and content to memory, and copies that header (the Avro
//! schema with its field ids, the table schema, the spec, `format-version`, `content`, the
//! codec). Entries are then encoded by following that schema field by field (by Iceberg field
//! id, as [`super::manifest_reader`] reads them), and the manifest list entry
//! ([`ManifestFile`]) is computed as the crate computes it: counts by status, the smallest
//! live sequence number, and the partition field summaries (null, NaN, lower and upper bound).
//!
//! When the crate's schema holds a field this writer does not know, it writes through the
//! crate's writer instead ([`ManifestWriter`] is then a thin wrapper), so the files are the
//! same either way; the test at the bottom reads both back and compares them.

use iceberg::io::{FileIO, OutputFile};
use iceberg::spec::{
    DataFile, Datum, FieldSummary, FormatVersion, Literal, ManifestContentType, ManifestEntry,
    ManifestFile, ManifestStatus, ManifestWriterBuilder, PartitionSpec, PrimitiveLiteral,
    PrimitiveType, SchemaRef, StructType, Type, UNASSIGNED_SEQUENCE_NUMBER,
};

use super::avro::{put_long, AvroType, Container};
use super::manifest_reader::{entry_field, file_field, EntryField, FileField};

/// Bytes of entries per Avro block before the next one starts.
const BLOCK_BYTES: usize = 64 * 1024;

type R<T> = iceberg::Result<T>;

fn invalid(msg: impl Into<String>) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::DataInvalid, msg.into())
}

/// Writes one manifest; the methods are the crate's `ManifestWriter`'s.
pub enum ManifestWriter {
    Ours(Box<Encoder>),
    Crate(Box<iceberg::spec::ManifestWriter>),
}

impl ManifestWriter {
    /// A writer of a manifest at `output` for `schema` and `spec`, format `version`, entries
    /// of `content`, added entries taking `snapshot_id`.
    pub async fn new(
        output: OutputFile,
        snapshot_id: Option<i64>,
        schema: SchemaRef,
        spec: PartitionSpec,
        version: FormatVersion,
        content: ManifestContentType,
    ) -> R<Self> {
        let build = |b| crate_writer(b, version, content);
        // The crate's header for this schema, spec, format and content: an empty manifest
        // written to memory.
        let memory = FileIO::new_with_memory();
        let template_path = "memory:///floe/manifest-template.avro";
        let template = ManifestWriterBuilder::new(
            memory.new_output(template_path)?,
            snapshot_id,
            schema.clone(),
            spec.clone(),
        );
        build(template).write_manifest_file().await?;
        let header = memory.new_input(template_path)?.read().await?;
        let partition_type = spec.partition_type(&schema)?;
        match Encoder::new(
            &header,
            output,
            snapshot_id,
            spec.spec_id(),
            partition_type,
            version,
            content,
        ) {
            Ok(e) => Ok(Self::Ours(Box::new(e))),
            Err(output) => Ok(Self::Crate(Box::new(build(ManifestWriterBuilder::new(
                output,
                snapshot_id,
                schema,
                spec,
            ))))),
        }
    }

    /// Adds `data_file` as added in this snapshot, with data sequence number
    /// `sequence_number` (none when negative: inherited at commit).
    pub fn add_file(&mut self, data_file: DataFile, sequence_number: i64) -> R<()> {
        match self {
            Self::Ours(e) => {
                let snapshot_id = e.snapshot_id;
                e.add(ManifestEntry {
                    status: ManifestStatus::Added,
                    snapshot_id,
                    sequence_number: (sequence_number >= 0).then_some(sequence_number),
                    file_sequence_number: None,
                    data_file,
                })
            }
            Self::Crate(w) => w.add_file(data_file, sequence_number),
        }
    }

    /// Adds `data_file` as deleted in this snapshot, keeping its sequence numbers.
    pub fn add_delete_file(
        &mut self,
        data_file: DataFile,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> R<()> {
        match self {
            Self::Ours(e) => {
                let snapshot_id = e.snapshot_id;
                e.add(ManifestEntry {
                    status: ManifestStatus::Deleted,
                    snapshot_id,
                    sequence_number: Some(sequence_number),
                    file_sequence_number,
                    data_file,
                })
            }
            Self::Crate(w) => w.add_delete_file(data_file, sequence_number, file_sequence_number),
        }
    }

    /// Adds `data_file` as existing, keeping the snapshot and sequence numbers it was added
    /// with.
    pub fn add_existing_file(
        &mut self,
        data_file: DataFile,
        snapshot_id: i64,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> R<()> {
        match self {
            Self::Ours(e) => e.add(ManifestEntry {
                status: ManifestStatus::Existing,
                snapshot_id: Some(snapshot_id),
                sequence_number: Some(sequence_number),
                file_sequence_number,
                data_file,
            }),
            Self::Crate(w) => w.add_existing_file(
                data_file,
                snapshot_id,
                sequence_number,
                file_sequence_number,
            ),
        }
    }

    /// Writes the manifest and gives its manifest list entry (sequence number unassigned).
    pub async fn write_manifest_file(self) -> R<ManifestFile> {
        match self {
            Self::Ours(e) => e.finish().await,
            Self::Crate(w) => w.write_manifest_file().await,
        }
    }
}

/// The iceberg crate's writer of a manifest of `version` holding `content`.
pub(crate) fn crate_writer(
    b: ManifestWriterBuilder,
    version: FormatVersion,
    content: ManifestContentType,
) -> iceberg::spec::ManifestWriter {
    match (version, content) {
        (FormatVersion::V1, _) => b.build_v1(),
        (FormatVersion::V2, ManifestContentType::Data) => b.build_v2_data(),
        (FormatVersion::V2, ManifestContentType::Deletes) => b.build_v2_deletes(),
        (FormatVersion::V3, ManifestContentType::Data) => b.build_v3_data(),
        (FormatVersion::V3, ManifestContentType::Deletes) => b.build_v3_deletes(),
    }
}

/// What the crate's header says about the file: the writer schema's fields, the header bytes.
struct Layout {
    entry: Vec<(EntryField, AvroType)>,
    file: Vec<(FileField, AvroType)>,
    partition: Vec<(Option<usize>, AvroType)>,
    sync: Vec<u8>,
    header: Vec<u8>,
    summaries: Vec<Summary>,
}

/// The state of a manifest being encoded by floe.
pub struct Encoder {
    output: OutputFile,
    snapshot_id: Option<i64>,
    spec_id: i32,
    partition_type: StructType,
    v1: bool,
    content: ManifestContentType,
    entry: Vec<(EntryField, AvroType)>,
    file: Vec<(FileField, AvroType)>,
    /// The writer schema's partition fields and, for each, its index in the partition type.
    partition: Vec<(Option<usize>, AvroType)>,
    sync: Vec<u8>,
    /// The header, then every finished block.
    out: Vec<u8>,
    block: Vec<u8>,
    in_block: i64,
    added: (u32, u64),
    existing: (u32, u64),
    deleted: (u32, u64),
    min_sequence_number: Option<i64>,
    summaries: Vec<Summary>,
}

impl Encoder {
    /// The encoder of a manifest with the crate's `header`; the output back when this
    /// writer does not follow the header's schema.
    fn new(
        header: &[u8],
        output: OutputFile,
        snapshot_id: Option<i64>,
        spec_id: i32,
        partition_type: StructType,
        version: FormatVersion,
        content: ManifestContentType,
    ) -> Result<Self, OutputFile> {
        match Self::layout(header, &partition_type) {
            Some(l) => Ok(Self {
                output,
                snapshot_id,
                spec_id,
                partition_type,
                v1: version == FormatVersion::V1,
                content,
                entry: l.entry,
                file: l.file,
                partition: l.partition,
                sync: l.sync,
                out: l.header,
                block: Vec::with_capacity(BLOCK_BYTES + 4096),
                in_block: 0,
                added: (0, 0),
                existing: (0, 0),
                deleted: (0, 0),
                min_sequence_number: None,
                summaries: l.summaries,
            }),
            None => Err(output),
        }
    }

    fn layout(header: &[u8], partition_type: &StructType) -> Option<Layout> {
        let file = Container::open(header)?;
        if !file.is_uncompressed() {
            return None;
        }
        let entry: Vec<_> = file
            .schema
            .fields()?
            .iter()
            .map(|f| (entry_field(f), f.ty.clone()))
            .collect();
        let data_file = entry
            .iter()
            .find(|(k, _)| matches!(k, EntryField::DataFile))?
            .1
            .clone();
        let fields: Vec<_> = data_file
            .fields()?
            .iter()
            .map(|f| (file_field(f), f.ty.clone()))
            .collect();
        // A field this writer does not fill must at least take a null.
        let unknown_ok = |ty: &AvroType| null_branch(ty).is_some();
        if entry
            .iter()
            .any(|(k, t)| matches!(k, EntryField::Skip) && !unknown_ok(t))
            || fields
                .iter()
                .any(|(k, t)| matches!(k, FileField::Skip) && !unknown_ok(t))
        {
            return None;
        }
        let partition = match fields
            .iter()
            .find(|(k, _)| matches!(k, FileField::Partition))
        {
            Some((_, ty)) => {
                let target = partition_type.fields();
                ty.fields()?
                    .iter()
                    .map(|f| {
                        let at =
                            f.id.and_then(|id| target.iter().position(|p| p.id == id))
                                .or_else(|| target.iter().position(|p| p.name == f.name));
                        (at, f.ty.clone())
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        let summaries = partition_type
            .fields()
            .iter()
            .map(|f| Some(Summary::new(f.field_type.as_primitive_type()?.clone())))
            .collect::<Option<Vec<_>>>()?;
        Some(Layout {
            entry,
            file: fields,
            partition,
            sync: file.sync().to_vec(),
            header: header[..file.data_start()].to_vec(),
            summaries,
        })
    }

    fn add(&mut self, e: ManifestEntry) -> R<()> {
        let f = &e.data_file;
        let data = f.content_type() == iceberg::spec::DataContentType::Data;
        if data != (self.content == ManifestContentType::Data) {
            return Err(invalid(format!(
                "file {} has content {:?}, which a {} manifest does not hold",
                f.file_path(),
                f.content_type(),
                self.content
            )));
        }
        if e.status != ManifestStatus::Added
            && (e.sequence_number.is_none() || e.file_sequence_number.is_none())
        {
            return Err(invalid(
                "Manifest entry with status Existing or Deleted should have sequence number",
            ));
        }
        let rows = f.record_count();
        let slot = match e.status {
            ManifestStatus::Added => &mut self.added,
            ManifestStatus::Existing => &mut self.existing,
            ManifestStatus::Deleted => &mut self.deleted,
        };
        slot.0 += 1;
        slot.1 += rows;
        if e.is_alive() {
            if let Some(seq) = e.sequence_number {
                self.min_sequence_number =
                    Some(self.min_sequence_number.map_or(seq, |m| m.min(seq)));
            }
        }
        let values: Vec<Option<&Literal>> = f.partition().iter().collect();
        if values.len() != self.summaries.len() {
            return Err(invalid(format!(
                "file {} has {} partition values, the partition spec {} has {} fields",
                f.file_path(),
                values.len(),
                self.spec_id,
                self.summaries.len()
            )));
        }
        for (v, s) in values.iter().zip(self.summaries.iter_mut()) {
            s.update(v.and_then(Literal::as_primitive_literal))?;
        }
        let mut b = std::mem::take(&mut self.block);
        let encoded = self.entry_bytes(&mut b, &e);
        self.block = b;
        encoded.ok_or_else(|| {
            invalid(format!(
                "manifest entry of {} does not fit the manifest schema",
                f.file_path()
            ))
        })?;
        self.in_block += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.end_block();
        }
        Ok(())
    }

    fn end_block(&mut self) {
        if self.in_block == 0 {
            return;
        }
        put_long(&mut self.out, self.in_block);
        put_long(&mut self.out, self.block.len() as i64);
        self.out.extend_from_slice(&self.block);
        self.out.extend_from_slice(&self.sync);
        self.block.clear();
        self.in_block = 0;
    }

    async fn finish(mut self) -> R<ManifestFile> {
        self.end_block();
        let length = self.out.len();
        let location = self.output.location().to_string();
        self.output.write(bytes::Bytes::from(self.out)).await?;
        Ok(ManifestFile {
            manifest_path: location,
            manifest_length: length as i64,
            partition_spec_id: self.spec_id,
            content: self.content,
            sequence_number: UNASSIGNED_SEQUENCE_NUMBER,
            min_sequence_number: self
                .min_sequence_number
                .unwrap_or(UNASSIGNED_SEQUENCE_NUMBER),
            added_snapshot_id: self.snapshot_id.unwrap_or(-1),
            added_files_count: Some(self.added.0),
            existing_files_count: Some(self.existing.0),
            deleted_files_count: Some(self.deleted.0),
            added_rows_count: Some(self.added.1),
            existing_rows_count: Some(self.existing.1),
            deleted_rows_count: Some(self.deleted.1),
            partitions: Some(
                self.summaries
                    .into_iter()
                    .map(Summary::finish)
                    .collect::<R<_>>()?,
            ),
            key_metadata: None,
            first_row_id: None,
        })
    }

    fn entry_bytes(&self, b: &mut Vec<u8>, e: &ManifestEntry) -> Option<()> {
        for (kind, ty) in &self.entry {
            match kind {
                EntryField::Status => put_int(b, ty, e.status as i32)?,
                EntryField::SnapshotId if self.v1 => {
                    put_long_of(b, ty, e.snapshot_id.unwrap_or_default())?
                }
                EntryField::SnapshotId => put_opt_long(b, ty, e.snapshot_id)?,
                EntryField::SequenceNumber => put_opt_long(b, ty, e.sequence_number)?,
                EntryField::FileSequenceNumber => put_opt_long(b, ty, e.file_sequence_number)?,
                EntryField::DataFile => self.data_file_bytes(b, ty, &e.data_file)?,
                EntryField::Skip => put_null(b, ty)?,
            }
        }
        Some(())
    }

    fn data_file_bytes(&self, b: &mut Vec<u8>, ty: &AvroType, f: &DataFile) -> Option<()> {
        // a record, or an optional one: its non-null branch
        let AvroType::Record(_) = some_branch(b, ty)? else {
            return None;
        };
        for (kind, ty) in &self.file {
            match kind {
                FileField::Content => put_int(b, ty, f.content_type() as i32)?,
                FileField::FilePath => put_str(b, ty, f.file_path())?,
                FileField::FileFormat => {
                    put_str(b, ty, &f.file_format().to_string().to_ascii_uppercase())?
                }
                FileField::Partition => self.partition_bytes(b, ty, f)?,
                FileField::RecordCount => {
                    put_long_of(b, ty, i64::try_from(f.record_count()).ok()?)?
                }
                FileField::FileSize => {
                    put_long_of(b, ty, i64::try_from(f.file_size_in_bytes()).ok()?)?
                }
                FileField::BlockSize => match null_branch(ty) {
                    // v1's required block_size_in_bytes: 0, as the crate writes it
                    Some(i) if !self.v1 => put_long(b, i as i64),
                    _ => put_long_of(b, ty, 0)?,
                },
                FileField::ColumnSizes => put_counts(b, ty, f.column_sizes())?,
                FileField::ValueCounts => put_counts(b, ty, f.value_counts())?,
                FileField::NullValueCounts => put_counts(b, ty, f.null_value_counts())?,
                FileField::NanValueCounts => put_counts(b, ty, f.nan_value_counts())?,
                FileField::LowerBounds => put_bounds(b, ty, f.lower_bounds())?,
                FileField::UpperBounds => put_bounds(b, ty, f.upper_bounds())?,
                FileField::KeyMetadata => put_opt(b, ty, f.key_metadata(), put_bytes)?,
                FileField::SplitOffsets => put_opt(b, ty, f.split_offsets(), |b, t, v| {
                    put_array(b, t, v, |b, t, x| put_long_of(b, t, *x))
                })?,
                FileField::EqualityIds => put_opt(b, ty, f.equality_ids(), |b, t, v| {
                    put_array(b, t, &v, |b, t, x| put_int(b, t, *x))
                })?,
                FileField::SortOrderId => put_opt(b, ty, f.sort_order_id(), put_int)?,
                FileField::FirstRowId => put_opt_long(b, ty, f.first_row_id())?,
                FileField::ReferencedDataFile => {
                    put_opt(b, ty, f.referenced_data_file(), |b, t, s| put_str(b, t, &s))?
                }
                FileField::ContentOffset => put_opt_long(b, ty, f.content_offset())?,
                FileField::ContentSize => put_opt_long(b, ty, f.content_size_in_bytes())?,
                FileField::Skip => put_null(b, ty)?,
            }
        }
        Some(())
    }

    fn partition_bytes(&self, b: &mut Vec<u8>, ty: &AvroType, f: &DataFile) -> Option<()> {
        // a record, or an optional one: its non-null branch
        let AvroType::Record(_) = some_branch(b, ty)? else {
            return None;
        };
        let values: Vec<Option<&Literal>> = f.partition().iter().collect();
        let target = self.partition_type.fields();
        for (at, ty) in &self.partition {
            let value = at.and_then(|i| values.get(i).copied().flatten());
            match (value, at) {
                (None, _) => put_null(b, ty)?,
                (Some(v), Some(i)) => {
                    let Type::Primitive(p) = target[*i].field_type.as_ref() else {
                        return None;
                    };
                    put_literal(b, ty, p, v.as_primitive_literal().as_ref()?)?
                }
                (Some(_), None) => return None,
            }
        }
        Some(())
    }
}

/// The index of the null branch of a union.
fn null_branch(ty: &AvroType) -> Option<usize> {
    match ty {
        AvroType::Union(b) => b.iter().position(|t| *t == AvroType::Null),
        AvroType::Null => Some(usize::MAX),
        _ => None,
    }
}

/// The first branch of a union that is not null, with its index.
fn non_null_branch(ty: &AvroType) -> Option<(usize, &AvroType)> {
    match ty {
        AvroType::Union(b) => b.iter().enumerate().find(|(_, t)| **t != AvroType::Null),
        _ => None,
    }
}

/// Writes the union index of the non-null branch (nothing when `ty` is no union) and gives
/// the type of the value to write.
fn some_branch<'t>(b: &mut Vec<u8>, ty: &'t AvroType) -> Option<&'t AvroType> {
    match ty {
        AvroType::Union(_) => {
            let (i, t) = non_null_branch(ty)?;
            put_long(b, i as i64);
            Some(t)
        }
        AvroType::Null => None,
        t => Some(t),
    }
}

fn put_null(b: &mut Vec<u8>, ty: &AvroType) -> Option<()> {
    match null_branch(ty)? {
        usize::MAX => {}
        i => put_long(b, i as i64),
    }
    Some(())
}

fn put_opt<T>(
    b: &mut Vec<u8>,
    ty: &AvroType,
    v: Option<T>,
    put: impl FnOnce(&mut Vec<u8>, &AvroType, T) -> Option<()>,
) -> Option<()> {
    match v {
        Some(v) => {
            let t = some_branch(b, ty)?;
            put(b, t, v)
        }
        None => put_null(b, ty),
    }
}

fn put_opt_long(b: &mut Vec<u8>, ty: &AvroType, v: Option<i64>) -> Option<()> {
    put_opt(b, ty, v, put_long_of)
}

fn put_long_of(b: &mut Vec<u8>, ty: &AvroType, v: i64) -> Option<()> {
    match some_branch(b, ty)? {
        AvroType::Long => put_long(b, v),
        AvroType::Int => put_long(b, i64::from(i32::try_from(v).ok()?)),
        _ => return None,
    }
    Some(())
}

fn put_int(b: &mut Vec<u8>, ty: &AvroType, v: i32) -> Option<()> {
    match some_branch(b, ty)? {
        AvroType::Int | AvroType::Long => put_long(b, i64::from(v)),
        _ => return None,
    }
    Some(())
}

fn put_raw(b: &mut Vec<u8>, v: &[u8]) {
    put_long(b, v.len() as i64);
    b.extend_from_slice(v);
}

fn put_str(b: &mut Vec<u8>, ty: &AvroType, v: &str) -> Option<()> {
    match some_branch(b, ty)? {
        AvroType::String | AvroType::Bytes => put_raw(b, v.as_bytes()),
        _ => return None,
    }
    Some(())
}

fn put_bytes(b: &mut Vec<u8>, ty: &AvroType, v: &[u8]) -> Option<()> {
    match ty {
        AvroType::Bytes | AvroType::String => put_raw(b, v),
        AvroType::Fixed(n) if *n == v.len() => b.extend_from_slice(v),
        _ => return None,
    }
    Some(())
}

fn put_array<T>(
    b: &mut Vec<u8>,
    ty: &AvroType,
    items: &[T],
    put: impl Fn(&mut Vec<u8>, &AvroType, &T) -> Option<()>,
) -> Option<()> {
    let AvroType::Array(item) = ty else {
        return None;
    };
    if !items.is_empty() {
        put_long(b, items.len() as i64);
        for x in items {
            put(b, item, x)?;
        }
    }
    put_long(b, 0);
    Some(())
}

/// An Iceberg map with int keys, as the array of `{key, value}` records the crate writes
/// (always present, possibly empty).
fn put_key_values<V>(
    b: &mut Vec<u8>,
    ty: &AvroType,
    pairs: &std::collections::HashMap<i32, V>,
    put: impl Fn(&mut Vec<u8>, &AvroType, &V) -> Option<()>,
) -> Option<()> {
    let AvroType::Array(item) = some_branch(b, ty)? else {
        return None;
    };
    let fields = item.fields()?;
    if !pairs.is_empty() {
        put_long(b, pairs.len() as i64);
        for (k, v) in pairs {
            for f in fields {
                match f.name.as_str() {
                    "key" => put_int(b, &f.ty, *k)?,
                    "value" => put(b, &f.ty, v)?,
                    _ => put_null(b, &f.ty)?,
                }
            }
        }
    }
    put_long(b, 0);
    Some(())
}

fn put_counts(
    b: &mut Vec<u8>,
    ty: &AvroType,
    counts: &std::collections::HashMap<i32, u64>,
) -> Option<()> {
    put_key_values(b, ty, counts, |b, t, v| {
        put_long_of(b, t, i64::try_from(*v).ok()?)
    })
}

fn put_bounds(
    b: &mut Vec<u8>,
    ty: &AvroType,
    bounds: &std::collections::HashMap<i32, Datum>,
) -> Option<()> {
    put_key_values(b, ty, bounds, |b, t, v| {
        let bytes = v.to_bytes().ok()?;
        let t = some_branch(b, t)?;
        put_bytes(b, t, &bytes)
    })
}

/// A partition value `v` of the partition field type `p`, in the writer's type `ty`.
fn put_literal(
    b: &mut Vec<u8>,
    ty: &AvroType,
    p: &PrimitiveType,
    v: &PrimitiveLiteral,
) -> Option<()> {
    let t = some_branch(b, ty)?;
    match (t, v) {
        (AvroType::Boolean, PrimitiveLiteral::Boolean(x)) => b.push(u8::from(*x)),
        (AvroType::Int | AvroType::Long, PrimitiveLiteral::Int(x)) => put_long(b, i64::from(*x)),
        (AvroType::Long, PrimitiveLiteral::Long(x)) => put_long(b, *x),
        (AvroType::Float, PrimitiveLiteral::Float(x)) => b.extend_from_slice(&x.0.to_le_bytes()),
        (AvroType::Double, PrimitiveLiteral::Double(x)) => b.extend_from_slice(&x.0.to_le_bytes()),
        (AvroType::Double, PrimitiveLiteral::Float(x)) => {
            b.extend_from_slice(&f64::from(x.0).to_le_bytes())
        }
        (AvroType::String, PrimitiveLiteral::String(x)) => put_raw(b, x.as_bytes()),
        (AvroType::Bytes | AvroType::Fixed(_), PrimitiveLiteral::Binary(x)) => put_bytes(b, t, x)?,
        (AvroType::Bytes | AvroType::Fixed(_), PrimitiveLiteral::UInt128(x)) => {
            put_bytes(b, t, &x.to_be_bytes())?
        }
        // A uuid in the crate's schema: Avro's `uuid` logical type on a string.
        (AvroType::String, PrimitiveLiteral::UInt128(x)) if *p == PrimitiveType::Uuid => {
            put_raw(b, uuid::Uuid::from_u128(*x).to_string().as_bytes())
        }
        (AvroType::Bytes | AvroType::Fixed(_), PrimitiveLiteral::Int128(x)) => {
            let PrimitiveType::Decimal { precision, .. } = p else {
                return None;
            };
            let n = Type::decimal_required_bytes(*precision).ok()? as usize;
            let wide = x.to_be_bytes();
            put_bytes(b, t, wide.get(16usize.checked_sub(n)?..)?)?
        }
        _ => return None,
    }
    Some(())
}

/// A partition field's summary in the manifest list (spec, "Manifest Lists",
/// `field_summary`), as the crate computes it.
struct Summary {
    ty: PrimitiveType,
    contains_null: bool,
    contains_nan: bool,
    lower: Option<Datum>,
    upper: Option<Datum>,
    last: Option<PrimitiveLiteral>,
}

impl Summary {
    fn new(ty: PrimitiveType) -> Self {
        Self {
            ty,
            contains_null: false,
            contains_nan: false,
            lower: None,
            upper: None,
            last: None,
        }
    }

    fn update(&mut self, v: Option<PrimitiveLiteral>) -> R<()> {
        let Some(v) = v else {
            self.contains_null = true;
            return Ok(());
        };
        if self.last.as_ref() == Some(&v) {
            return Ok(()); // most entries share the previous one's partition
        }
        if !self.ty.compatible(&v) {
            return Err(invalid(format!(
                "partition value {v:?} is not of type {}",
                self.ty
            )));
        }
        let d = Datum::try_from_bytes(&single_value_bytes(&v), self.ty.clone())?;
        self.last = Some(v);
        if d.is_nan() {
            self.contains_nan = true;
            return Ok(());
        }
        if self.lower.as_ref().is_none_or(|l| d < *l) {
            self.lower = Some(d.clone());
        }
        if self.upper.as_ref().is_none_or(|u| d > *u) {
            self.upper = Some(d);
        }
        Ok(())
    }

    fn finish(self) -> R<FieldSummary> {
        Ok(FieldSummary {
            contains_null: self.contains_null,
            contains_nan: Some(self.contains_nan),
            lower_bound: self.lower.map(|d| d.to_bytes()).transpose()?,
            upper_bound: self.upper.map(|d| d.to_bytes()).transpose()?,
        })
    }
}

/// Iceberg's single-value serialization of a literal (spec, Appendix D), for
/// `Datum::try_from_bytes`.
fn single_value_bytes(v: &PrimitiveLiteral) -> Vec<u8> {
    match v {
        PrimitiveLiteral::Boolean(x) => vec![u8::from(*x)],
        PrimitiveLiteral::Int(x) => x.to_le_bytes().to_vec(),
        PrimitiveLiteral::Long(x) => x.to_le_bytes().to_vec(),
        PrimitiveLiteral::Float(x) => x.0.to_le_bytes().to_vec(),
        PrimitiveLiteral::Double(x) => x.0.to_le_bytes().to_vec(),
        PrimitiveLiteral::String(x) => x.as_bytes().to_vec(),
        PrimitiveLiteral::Binary(x) => x.clone(),
        PrimitiveLiteral::Int128(x) => x.to_be_bytes().to_vec(),
        PrimitiveLiteral::UInt128(x) => x.to_be_bytes().to_vec(),
        PrimitiveLiteral::AboveMax | PrimitiveLiteral::BelowMin => Vec::new(),
    }
}
