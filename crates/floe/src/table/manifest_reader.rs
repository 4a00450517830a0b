//! floe's manifest reader: the entries of a manifest file decoded straight from the Avro
//! bytes into the iceberg crate's [`ManifestEntry`] (Iceberg spec, "Manifests"; Avro spec,
//! "Binary Encoding").
//!
//! It gives what the iceberg crate's `Manifest::parse_avro` gives (the same entries, equal
//! field by field), about ten times faster: no generic value tree, no schema resolution, no
//! serde pass. The writer schema of the file is followed field by field; fields are matched
//! by Iceberg field id (by name when a writer left the id out), fields it does not use
//! (`block_size_in_bytes`, `distinct_counts`...) are skipped, and values are converted as the
//! crate converts them:
//!
//! - partition values by the partition type of the manifest's spec (matched by field id, then
//!   by name), with the Avro promotions the crate accepts (int to long or date, long to
//!   timestamp, bytes to fixed, uuid or decimal);
//! - column bounds to [`Datum`]s of the column's type in the manifest's schema, bounds of
//!   unknown columns dropped; negative counts dropped;
//! - format v1 entries get sequence numbers 0, as in the crate.
//!
//! [`read`] returns `None` for anything it does not follow (an unknown codec or type, a
//! schema without the fields it needs): the caller then reads the file with the crate.
//! `FLOE_VERIFY_MANIFEST_READER=1` makes [`crate::table::opaque::load_manifest`] decode every
//! manifest both ways and fail on a difference (CI runs with it).

use std::collections::HashMap;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal,
    ManifestEntry, ManifestMetadata, ManifestStatus, NestedFieldRef, PrimitiveLiteral,
    PrimitiveType, Schema, Struct, StructType, Type,
};

use super::avro::{AvroField, AvroType, Container, Cursor};

/// The manifest in `bytes`, or `None` when this reader does not follow it (see the module
/// docs) or the bytes are not a valid manifest (the crate's reader then names the problem).
pub fn read(bytes: &[u8]) -> Option<(ManifestMetadata, Vec<ManifestEntry>)> {
    let mut file = Container::open(bytes)?;
    let metadata = ManifestMetadata::parse(&file.metadata_map()).ok()?;
    let partition_type = metadata
        .partition_spec
        .partition_type(&metadata.schema)
        .ok()?;
    let schema = std::mem::replace(&mut file.schema, AvroType::Null);
    let plan = Plan::new(&schema, &metadata, &partition_type)?;
    let mut entries = Vec::new();
    while let Some((count, block)) = file.next_block()? {
        let mut c = Cursor::new(&block);
        entries.reserve(count);
        for _ in 0..count {
            entries.push(plan.entry(&mut c)?);
        }
        if c.at != block.len() {
            return None;
        }
    }
    Some((metadata, entries))
}

/// What to do with each field of the writer's `manifest_entry` and `data_file` records.
struct Plan<'m> {
    entry: Vec<(EntryField, &'m AvroType)>,
    file: Vec<(FileField, &'m AvroType)>,
    /// For each field of the writer's partition record: its index in the partition type.
    partition: Vec<Option<usize>>,
    partition_type: &'m StructType,
    schema: &'m Schema,
    spec_id: i32,
    v1: bool,
}

#[derive(Clone, Copy)]
pub(crate) enum EntryField {
    Status,
    SnapshotId,
    SequenceNumber,
    FileSequenceNumber,
    DataFile,
    Skip,
}

#[derive(Clone, Copy)]
pub(crate) enum FileField {
    Content,
    FilePath,
    FileFormat,
    Partition,
    RecordCount,
    FileSize,
    BlockSize,
    ColumnSizes,
    ValueCounts,
    NullValueCounts,
    NanValueCounts,
    LowerBounds,
    UpperBounds,
    KeyMetadata,
    SplitOffsets,
    EqualityIds,
    SortOrderId,
    FirstRowId,
    ReferencedDataFile,
    ContentOffset,
    ContentSize,
    Skip,
}

/// Iceberg field ids of the `manifest_entry` fields, by name for writers without ids.
pub(crate) fn entry_field(f: &AvroField) -> EntryField {
    let id = f.id.or(match f.name.as_str() {
        "status" => Some(0),
        "snapshot_id" => Some(1),
        "data_file" => Some(2),
        "sequence_number" => Some(3),
        "file_sequence_number" => Some(4),
        _ => None,
    });
    match id {
        Some(0) => EntryField::Status,
        Some(1) => EntryField::SnapshotId,
        Some(2) => EntryField::DataFile,
        Some(3) => EntryField::SequenceNumber,
        Some(4) => EntryField::FileSequenceNumber,
        _ => EntryField::Skip,
    }
}

/// Iceberg field ids of the `data_file` fields (spec, "Manifests"), by name for writers
/// without ids.
pub(crate) fn file_field(f: &AvroField) -> FileField {
    let id = f.id.or(match f.name.as_str() {
        "content" => Some(134),
        "file_path" => Some(100),
        "file_format" => Some(101),
        "partition" => Some(102),
        "record_count" => Some(103),
        "file_size_in_bytes" => Some(104),
        "block_size_in_bytes" => Some(105),
        "column_sizes" => Some(108),
        "value_counts" => Some(109),
        "null_value_counts" => Some(110),
        "nan_value_counts" => Some(137),
        "lower_bounds" => Some(125),
        "upper_bounds" => Some(128),
        "key_metadata" => Some(131),
        "split_offsets" => Some(132),
        "equality_ids" => Some(135),
        "sort_order_id" => Some(140),
        "first_row_id" => Some(142),
        "referenced_data_file" => Some(143),
        "content_offset" => Some(144),
        "content_size_in_bytes" => Some(145),
        _ => None,
    });
    match id {
        Some(134) => FileField::Content,
        Some(100) => FileField::FilePath,
        Some(101) => FileField::FileFormat,
        Some(102) => FileField::Partition,
        Some(103) => FileField::RecordCount,
        Some(104) => FileField::FileSize,
        Some(105) => FileField::BlockSize,
        Some(108) => FileField::ColumnSizes,
        Some(109) => FileField::ValueCounts,
        Some(110) => FileField::NullValueCounts,
        Some(137) => FileField::NanValueCounts,
        Some(125) => FileField::LowerBounds,
        Some(128) => FileField::UpperBounds,
        Some(131) => FileField::KeyMetadata,
        Some(132) => FileField::SplitOffsets,
        Some(135) => FileField::EqualityIds,
        Some(140) => FileField::SortOrderId,
        Some(142) => FileField::FirstRowId,
        Some(143) => FileField::ReferencedDataFile,
        Some(144) => FileField::ContentOffset,
        Some(145) => FileField::ContentSize,
        _ => FileField::Skip,
    }
}

impl<'m> Plan<'m> {
    fn new(
        schema: &'m AvroType,
        metadata: &'m ManifestMetadata,
        partition_type: &'m StructType,
    ) -> Option<Self> {
        let entry: Vec<_> = schema
            .fields()?
            .iter()
            .map(|f| (entry_field(f), &f.ty))
            .collect();
        let data_file = entry
            .iter()
            .find(|(k, _)| matches!(k, EntryField::DataFile))?
            .1
            .record_fields()?;
        let file: Vec<_> = data_file.iter().map(|f| (file_field(f), &f.ty)).collect();
        let partition = match file.iter().find(|(k, _)| matches!(k, FileField::Partition)) {
            Some((_, ty)) => ty
                .record_fields()?
                .iter()
                .map(|f| {
                    let fields = partition_type.fields();
                    f.id.and_then(|id| fields.iter().position(|p| p.id == id))
                        .or_else(|| fields.iter().position(|p| p.name == f.name))
                })
                .collect(),
            None => Vec::new(),
        };
        Some(Self {
            entry,
            file,
            partition,
            partition_type,
            schema: &metadata.schema,
            spec_id: metadata.partition_spec.spec_id(),
            v1: metadata.format_version == FormatVersion::V1,
        })
    }

    fn entry(&self, c: &mut Cursor<'_>) -> Option<ManifestEntry> {
        let mut status = None;
        let mut snapshot_id = None;
        let mut sequence_number = None;
        let mut file_sequence_number = None;
        let mut data_file = None;
        for (kind, ty) in &self.entry {
            match kind {
                EntryField::Status => status = Some(ManifestStatus::try_from(int(c, ty)?).ok()?),
                EntryField::SnapshotId => snapshot_id = opt_long(c, ty)?,
                EntryField::SequenceNumber => sequence_number = opt_long(c, ty)?,
                EntryField::FileSequenceNumber => file_sequence_number = opt_long(c, ty)?,
                EntryField::DataFile => data_file = Some(self.data_file(c, ty)?),
                EntryField::Skip => c.skip(ty)?,
            }
        }
        if self.v1 {
            // The crate's v1 entries: a required snapshot id, sequence numbers 0.
            snapshot_id = Some(snapshot_id?);
            sequence_number = Some(0);
            file_sequence_number = Some(0);
        }
        Some(ManifestEntry {
            status: status?,
            snapshot_id,
            sequence_number,
            file_sequence_number,
            data_file: data_file?,
        })
    }

    fn data_file(&self, c: &mut Cursor<'_>, ty: &AvroType) -> Option<DataFile> {
        if let AvroType::Union(branches) = ty {
            // an optional record: only the record branch is a data file
            let b = branches.get(usize::try_from(c.long()?).ok()?)?;
            return self.data_file(c, b);
        }
        let mut b = DataFileBuilder::default();
        b.partition_spec_id(self.spec_id);
        b.content(DataContentType::Data);
        let mut partition = None;
        for (kind, ty) in &self.file {
            match kind {
                FileField::Content => {
                    b.content(DataContentType::try_from(int(c, ty)?).ok()?);
                }
                FileField::FilePath => {
                    b.file_path(string(c, ty)?.to_string());
                }
                FileField::FileFormat => {
                    b.file_format(string(c, ty)?.parse::<DataFileFormat>().ok()?);
                }
                FileField::Partition => partition = Some(self.partition(c, ty)?),
                FileField::RecordCount => {
                    b.record_count(u64::try_from(long(c, ty)?).ok()?);
                }
                FileField::FileSize => {
                    b.file_size_in_bytes(u64::try_from(long(c, ty)?).ok()?);
                }
                FileField::ColumnSizes => {
                    b.column_sizes(counts(c, ty)?);
                }
                FileField::ValueCounts => {
                    b.value_counts(counts(c, ty)?);
                }
                FileField::NullValueCounts => {
                    b.null_value_counts(counts(c, ty)?);
                }
                FileField::NanValueCounts => {
                    b.nan_value_counts(counts(c, ty)?);
                }
                FileField::LowerBounds => {
                    b.lower_bounds(self.bounds(c, ty)?);
                }
                FileField::UpperBounds => {
                    b.upper_bounds(self.bounds(c, ty)?);
                }
                FileField::KeyMetadata => {
                    b.key_metadata(opt(c, ty, |c, t| bytes(c, t).map(<[u8]>::to_vec))?);
                }
                FileField::SplitOffsets => {
                    b.split_offsets(opt(c, ty, |c, t| array(c, t, long))?);
                }
                FileField::EqualityIds => {
                    b.equality_ids(opt(c, ty, |c, t| array(c, t, int))?);
                }
                FileField::SortOrderId => {
                    if let Some(id) = opt(c, ty, int)? {
                        b.sort_order_id(id);
                    }
                }
                FileField::FirstRowId => {
                    b.first_row_id(opt_long(c, ty)?);
                }
                FileField::ReferencedDataFile => {
                    b.referenced_data_file(opt(c, ty, |c, t| string(c, t).map(str::to_string))?);
                }
                FileField::ContentOffset => {
                    b.content_offset(opt_long(c, ty)?);
                }
                FileField::ContentSize => {
                    b.content_size_in_bytes(opt_long(c, ty)?);
                }
                FileField::BlockSize | FileField::Skip => c.skip(ty)?,
            }
        }
        b.partition(partition.unwrap_or_else(Struct::empty));
        b.build().ok()
    }

    fn partition(&self, c: &mut Cursor<'_>, ty: &AvroType) -> Option<Struct> {
        let fields = match ty {
            AvroType::Record(f) => f,
            AvroType::Union(branches) => {
                let b = branches.get(usize::try_from(c.long()?).ok()?)?;
                if *b == AvroType::Null {
                    return Some(Struct::empty());
                }
                return self.partition(c, b);
            }
            _ => return None,
        };
        let target = self.partition_type.fields();
        let mut values: Vec<Option<Literal>> = vec![None; target.len()];
        for (f, slot) in fields.iter().zip(&self.partition) {
            match slot {
                Some(i) => values[*i] = literal(c, &f.ty, &target[*i])?,
                None => c.skip(&f.ty)?,
            }
        }
        if target.is_empty() {
            return Some(Struct::empty());
        }
        Some(Struct::from_iter(values))
    }

    /// Column bounds, as `Datum`s of each column's type; unknown columns are dropped (schema
    /// evolution), as in the crate.
    fn bounds(&self, c: &mut Cursor<'_>, ty: &AvroType) -> Option<HashMap<i32, Datum>> {
        let mut out = HashMap::new();
        let pairs = opt(c, ty, |c, t| key_values(c, t, |c, t| bytes(c, t)))?;
        for (key, value) in pairs.unwrap_or_default() {
            let field = self
                .schema
                .field_by_id(key)
                .or_else(|| iceberg::metadata_columns::get_metadata_field(key).ok());
            if let Some(field) = field {
                let ty = field.field_type.as_primitive_type()?.clone();
                out.insert(key, Datum::try_from_bytes(value, ty).ok()?);
            }
        }
        Some(out)
    }
}

/// The branch of a union that the next value takes (the type itself when it is no union).
fn branch<'t>(c: &mut Cursor<'_>, ty: &'t AvroType) -> Option<&'t AvroType> {
    match ty {
        AvroType::Union(b) => b.get(usize::try_from(c.long()?).ok()?),
        t => Some(t),
    }
}

/// An optional value: `None` on a null branch, `read` on any other.
fn opt<'a, T>(
    c: &mut Cursor<'a>,
    ty: &AvroType,
    read: impl FnOnce(&mut Cursor<'a>, &AvroType) -> Option<T>,
) -> Option<Option<T>> {
    match branch(c, ty)? {
        AvroType::Null => Some(None),
        t => read(c, t).map(Some),
    }
}

fn opt_long(c: &mut Cursor<'_>, ty: &AvroType) -> Option<Option<i64>> {
    opt(c, ty, long)
}

fn long(c: &mut Cursor<'_>, ty: &AvroType) -> Option<i64> {
    match branch(c, ty)? {
        AvroType::Long | AvroType::Int => c.long(),
        _ => None,
    }
}

fn int(c: &mut Cursor<'_>, ty: &AvroType) -> Option<i32> {
    match branch(c, ty)? {
        AvroType::Int | AvroType::Long => c.int(),
        _ => None,
    }
}

fn string<'a>(c: &mut Cursor<'a>, ty: &AvroType) -> Option<&'a str> {
    match branch(c, ty)? {
        AvroType::String | AvroType::Bytes => c.str(),
        _ => None,
    }
}

fn bytes<'a>(c: &mut Cursor<'a>, ty: &AvroType) -> Option<&'a [u8]> {
    match branch(c, ty)? {
        AvroType::Bytes | AvroType::String => c.bytes(),
        AvroType::Fixed(n) => c.fixed(*n),
        _ => None,
    }
}

fn array<'a, T>(
    c: &mut Cursor<'a>,
    ty: &AvroType,
    item: impl Fn(&mut Cursor<'a>, &AvroType) -> Option<T>,
) -> Option<Vec<T>> {
    let AvroType::Array(item_ty) = branch(c, ty)? else {
        return None;
    };
    let mut out = Vec::new();
    loop {
        let n = c.block_count()?;
        if n == 0 {
            return Some(out);
        }
        out.reserve(n);
        for _ in 0..n {
            out.push(item(c, item_ty)?);
        }
    }
}

/// An Iceberg map with int keys: an array of `{key, value}` records (or an Avro map whose
/// string keys are the ids).
fn key_values<'a, T>(
    c: &mut Cursor<'a>,
    ty: &AvroType,
    value: impl Fn(&mut Cursor<'a>, &AvroType) -> Option<T>,
) -> Option<Vec<(i32, T)>> {
    let mut out = Vec::new();
    match branch(c, ty)? {
        AvroType::Array(item) => {
            let fields = item.fields()?;
            let key_at = fields.iter().position(|f| f.name == "key")?;
            let value_at = fields.iter().position(|f| f.name == "value")?;
            loop {
                let n = c.block_count()?;
                if n == 0 {
                    return Some(out);
                }
                out.reserve(n);
                for _ in 0..n {
                    let (mut k, mut v) = (None, None);
                    for (i, f) in fields.iter().enumerate() {
                        if i == key_at {
                            k = Some(int(c, &f.ty)?);
                        } else if i == value_at {
                            v = Some(value(c, &f.ty)?);
                        } else {
                            c.skip(&f.ty)?;
                        }
                    }
                    out.push((k?, v?));
                }
            }
        }
        AvroType::Map(value_ty) => loop {
            let n = c.block_count()?;
            if n == 0 {
                return Some(out);
            }
            for _ in 0..n {
                let k = c.str()?.parse().ok()?;
                out.push((k, value(c, value_ty)?));
            }
        },
        _ => None,
    }
}

/// Counts by column id; negative counts are dropped, as in the crate.
fn counts(c: &mut Cursor<'_>, ty: &AvroType) -> Option<HashMap<i32, u64>> {
    let pairs = opt(c, ty, |c, t| key_values(c, t, long))?.unwrap_or_default();
    Some(
        pairs
            .into_iter()
            .filter_map(|(k, v)| u64::try_from(v).ok().map(|v| (k, v)))
            .collect(),
    )
}

/// A partition value of the writer's type `ty`, as a literal of the partition field's type
/// (the conversions of the crate's `RawLiteral`).
fn literal(c: &mut Cursor<'_>, ty: &AvroType, field: &NestedFieldRef) -> Option<Option<Literal>> {
    let Type::Primitive(target) = field.field_type.as_ref() else {
        return None;
    };
    let p = |v| Some(Some(Literal::Primitive(v)));
    match branch(c, ty)? {
        AvroType::Null => Some(None),
        AvroType::Boolean => p(PrimitiveLiteral::Boolean(c.boolean()?)),
        AvroType::Int | AvroType::Long => {
            let v = c.long()?;
            match target {
                PrimitiveType::Int | PrimitiveType::Date => {
                    p(PrimitiveLiteral::Int(i32::try_from(v).ok()?))
                }
                PrimitiveType::Long
                | PrimitiveType::Time
                | PrimitiveType::Timestamp
                | PrimitiveType::Timestamptz
                | PrimitiveType::TimestampNs
                | PrimitiveType::TimestamptzNs => p(PrimitiveLiteral::Long(v)),
                _ => None,
            }
        }
        AvroType::Float => {
            let v = c.f32()?;
            match target {
                PrimitiveType::Float => p(PrimitiveLiteral::Float(v.into())),
                PrimitiveType::Double => p(PrimitiveLiteral::Double(f64::from(v).into())),
                _ => None,
            }
        }
        AvroType::Double => {
            let v = c.f64()?;
            match target {
                PrimitiveType::Double => p(PrimitiveLiteral::Double(v.into())),
                _ => None,
            }
        }
        AvroType::String => {
            let v = c.str()?;
            match target {
                PrimitiveType::String => p(PrimitiveLiteral::String(v.to_string())),
                _ => None,
            }
        }
        t @ (AvroType::Bytes | AvroType::Fixed(_)) => {
            let v = match t {
                AvroType::Fixed(n) => c.fixed(*n)?,
                _ => c.bytes()?,
            };
            match target {
                PrimitiveType::Binary => p(PrimitiveLiteral::Binary(v.to_vec())),
                PrimitiveType::Fixed(n) if v.len() as u64 == *n => {
                    p(PrimitiveLiteral::Binary(v.to_vec()))
                }
                PrimitiveType::Uuid => p(PrimitiveLiteral::UInt128(u128::from_be_bytes(
                    v.try_into().ok()?,
                ))),
                PrimitiveType::Decimal { precision, .. } => {
                    let need = Type::decimal_required_bytes(*precision).ok()? as usize;
                    if v.len() != need || need > 16 {
                        return None;
                    }
                    let fill = if v.first().is_some_and(|b| b & 0x80 != 0) {
                        0xff
                    } else {
                        0
                    };
                    let mut wide = [fill; 16];
                    wide[16 - v.len()..].copy_from_slice(v);
                    p(PrimitiveLiteral::Int128(i128::from_be_bytes(wide)))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::io::FileIO;
    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal, Manifest,
        ManifestContentType, ManifestWriterBuilder, NestedField, PartitionSpec, PrimitiveType,
        Schema, Struct, Transform, Type,
    };

    fn schema() -> Schema {
        let f = |id, name: &str, t| Arc::new(NestedField::optional(id, name, Type::Primitive(t)));
        Schema::builder()
            .with_schema_id(0)
            .with_fields(vec![
                Arc::new(NestedField::required(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
                f(2, "name", PrimitiveType::String),
                f(3, "ts", PrimitiveType::Timestamp),
                f(4, "day", PrimitiveType::Date),
                f(5, "amount", PrimitiveType::Double),
                f(
                    6,
                    "price",
                    PrimitiveType::Decimal {
                        precision: 12,
                        scale: 2,
                    },
                ),
                f(7, "key", PrimitiveType::Uuid),
                f(8, "flag", PrimitiveType::Boolean),
                f(9, "blob", PrimitiveType::Binary),
                f(10, "small", PrimitiveType::Int),
                f(11, "ratio", PrimitiveType::Float),
                f(12, "code", PrimitiveType::Fixed(3)),
            ])
            .build()
            .unwrap()
    }

    fn spec(schema: &Schema, partitioned: bool) -> PartitionSpec {
        let mut b = PartitionSpec::builder(Arc::new(schema.clone())).with_spec_id(3);
        if partitioned {
            for (src, name, t) in [
                ("id", "id_bucket", Transform::Bucket(16)),
                ("name", "name", Transform::Identity),
                ("ts", "ts_day", Transform::Day),
                ("day", "day", Transform::Identity),
                ("price", "price", Transform::Identity),
                ("flag", "flag", Transform::Identity),
                ("small", "small", Transform::Identity),
                ("code", "code", Transform::Identity),
                ("blob", "blob_head", Transform::Truncate(4)),
            ] {
                b = b.add_partition_field(src, name, t).unwrap();
            }
        }
        b.build().unwrap()
    }

    fn partition(i: i64, partitioned: bool) -> Struct {
        if !partitioned {
            return Struct::empty();
        }
        let null = i % 3 == 0;
        let some = |l: Literal| if null { None } else { Some(l) };
        Struct::from_iter([
            Some(Literal::int((i % 16) as i32)),
            some(Literal::string(format!("n{i}"))),
            Some(Literal::date(19_000 + i as i32)),
            some(Literal::date(-3 + i as i32)),
            some(Literal::decimal(12_345 * i as i128 - 100_000)),
            some(Literal::bool(i % 2 == 0)),
            some(Literal::int(i as i32 - 7)),
            some(Literal::fixed(vec![1u8, 2, i as u8])),
            some(Literal::binary(vec![0u8, i as u8])),
        ])
    }

    fn data_file(
        i: i64,
        spec_id: i32,
        partitioned: bool,
        content: DataContentType,
    ) -> iceberg::spec::DataFile {
        let mut b = DataFileBuilder::default();
        b.content(content)
            .file_path(format!("file:///wh/t/data/f-{i}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .partition(partition(i, partitioned))
            .partition_spec_id(spec_id)
            .record_count(100 + i as u64)
            .file_size_in_bytes(4096 + i as u64)
            .column_sizes((1..=12).map(|c| (c, 10 * c as u64 + i as u64)).collect())
            .value_counts([(1, 100 + i as u64), (2, 99)].into())
            .null_value_counts([(2, 1), (5, 0)].into())
            .nan_value_counts([(5, i as u64 % 2)].into())
            .lower_bounds(
                [
                    (1, Datum::long(-i)),
                    (2, Datum::string(format!("a{i}"))),
                    (3, Datum::timestamp_micros(1_700_000_000_000_000 + i)),
                    (4, Datum::date(19_000)),
                    (5, Datum::double(-1.5)),
                    (8, Datum::bool(false)),
                    (10, Datum::int(-4)),
                    (11, Datum::float(0.25)),
                ]
                .into(),
            )
            .upper_bounds([(1, Datum::long(i * 1000)), (2, Datum::string("zz"))].into())
            .split_offsets(Some(vec![4, 4000 + i]))
            .key_metadata((i % 4 == 1).then(|| vec![9u8, 8, 7]));
        if i % 5 == 0 {
            b.sort_order_id(1);
        }
        match content {
            DataContentType::EqualityDeletes => {
                b.equality_ids(Some(vec![1, 2]));
            }
            DataContentType::PositionDeletes if i % 2 == 0 => {
                b.file_format(DataFileFormat::Puffin)
                    .referenced_data_file(Some(format!("file:///wh/t/data/f-{}.parquet", i - 1)))
                    .content_offset(Some(4 + i))
                    .content_size_in_bytes(Some(40 + i));
            }
            _ => {}
        }
        b.build().unwrap()
    }

    /// Every (format, partitioned, content) a manifest can have (v1 has no delete manifests).
    fn shapes() -> Vec<(FormatVersion, bool, ManifestContentType)> {
        let mut out = Vec::new();
        for version in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
            for partitioned in [true, false] {
                for content in [ManifestContentType::Data, ManifestContentType::Deletes] {
                    if version != FormatVersion::V1 || content == ManifestContentType::Data {
                        out.push((version, partitioned, content));
                    }
                }
            }
        }
        out
    }

    /// Writes manifests with the iceberg crate's writer (every format, data and deletes,
    /// partitioned or not, added, existing and deleted entries) and reads each both ways.
    #[tokio::test]
    async fn entries_equal_the_crate_reader_on_every_format_and_partition_type() {
        let dir = tempfile::tempdir().unwrap();
        let io = FileIO::new_with_fs();
        let schema = Arc::new(schema());
        let mut read = 0;
        for (version, partitioned, content) in shapes() {
            let spec = spec(&schema, partitioned);
            let path = format!(
                "{}/m-{version}-{partitioned}-{content}.avro",
                dir.path().display()
            );
            let b = ManifestWriterBuilder::new(
                io.new_output(&path).unwrap(),
                Some(77),
                schema.clone(),
                spec.clone(),
            );
            let mut w = crate::table::manifest_writer::crate_writer(b, version, content);
            for i in 0..60i64 {
                let kind = match content {
                    ManifestContentType::Data => DataContentType::Data,
                    _ if i % 3 == 0 => DataContentType::EqualityDeletes,
                    _ => DataContentType::PositionDeletes,
                };
                let f = data_file(i, spec.spec_id(), partitioned, kind);
                match i % 3 {
                    0 => w.add_file(f, 5).unwrap(),
                    1 => w.add_existing_file(f, 11, 2, Some(2)).unwrap(),
                    _ => w.add_delete_file(f, 3, Some(3)).unwrap(),
                }
            }
            w.write_manifest_file().await.unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let theirs = Manifest::parse_avro(&bytes).unwrap();
            let (metadata, entries) = super::read(&bytes).expect("floe reads it");
            assert_eq!(entries.len(), 60);
            let ours = Manifest::new(metadata, entries);
            assert_eq!(ours, theirs, "{path}");
            read += 1;
        }
        assert_eq!(read, 10);
    }

    /// floe's writer against the crate's, same entries in: the files read back equal (by the
    /// crate's reader and by floe's), and so do their manifest list entries.
    #[tokio::test]
    async fn floe_writer_writes_what_the_crate_writer_writes() {
        use crate::table::manifest_writer::ManifestWriter;
        let dir = tempfile::tempdir().unwrap();
        let io = FileIO::new_with_fs();
        let schema = Arc::new(schema());
        let mut compared = 0;
        for (version, partitioned, content) in shapes() {
            let spec = spec(&schema, partitioned);
            let theirs_path = format!(
                "{}/c-{version}-{partitioned}-{content}.avro",
                dir.path().display()
            );
            let ours_path = format!(
                "{}/f-{version}-{partitioned}-{content}.avro",
                dir.path().display()
            );
            let b = ManifestWriterBuilder::new(
                io.new_output(&theirs_path).unwrap(),
                Some(77),
                schema.clone(),
                spec.clone(),
            );
            let mut theirs = crate::table::manifest_writer::crate_writer(b, version, content);
            let mut ours = ManifestWriter::new(
                io.new_output(&ours_path).unwrap(),
                Some(77),
                schema.clone(),
                spec.clone(),
                version,
                content,
            )
            .await
            .unwrap();
            assert!(
                matches!(ours, ManifestWriter::Ours(_)),
                "floe's encoder, not the fallback"
            );
            // enough entries for several Avro blocks
            for i in 0..900i64 {
                let kind = match content {
                    ManifestContentType::Data => DataContentType::Data,
                    _ if i % 3 == 0 => DataContentType::EqualityDeletes,
                    _ => DataContentType::PositionDeletes,
                };
                let f = data_file(i % 97, spec.spec_id(), partitioned, kind);
                match i % 3 {
                    0 => {
                        theirs
                            .add_file(f.clone(), if i % 2 == 0 { 5 } else { -1 })
                            .unwrap();
                        ours.add_file(f, if i % 2 == 0 { 5 } else { -1 }).unwrap();
                    }
                    1 => {
                        theirs
                            .add_existing_file(f.clone(), 11, 2 + i, Some(2))
                            .unwrap();
                        ours.add_existing_file(f, 11, 2 + i, Some(2)).unwrap();
                    }
                    _ => {
                        theirs.add_delete_file(f.clone(), 3, Some(3)).unwrap();
                        ours.add_delete_file(f, 3, Some(3)).unwrap();
                    }
                }
            }
            let mut theirs_mf = theirs.write_manifest_file().await.unwrap();
            let mut ours_mf = ours.write_manifest_file().await.unwrap();
            let theirs_bytes = std::fs::read(&theirs_path).unwrap();
            let ours_bytes = std::fs::read(&ours_path).unwrap();
            assert_eq!(ours_mf.manifest_length as usize, ours_bytes.len());
            let read_back =
                Manifest::parse_avro(&ours_bytes).expect("the crate reads floe's manifest");
            assert_eq!(
                read_back,
                Manifest::parse_avro(&theirs_bytes).unwrap(),
                "{ours_path}"
            );
            let (md, entries) = super::read(&ours_bytes).unwrap();
            assert_eq!(Manifest::new(md, entries), read_back);
            assert_eq!(read_back.entries().len(), 900);
            for mf in [&mut theirs_mf, &mut ours_mf] {
                mf.manifest_path.clear();
                mf.manifest_length = 0;
            }
            assert_eq!(ours_mf, theirs_mf, "{ours_path}");
            compared += 1;
        }
        assert_eq!(compared, 10);
    }

    /// The same manifest with its blocks compressed the way Iceberg Java writes them
    /// (`deflate`, its default for manifests) and with `zstandard`: floe reads each as the
    /// uncompressed one.
    #[tokio::test]
    async fn compressed_blocks_read_as_uncompressed_ones() {
        use crate::table::avro::{put_header_metadata, put_long, Container};
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let io = FileIO::new_with_fs();
        let schema = Arc::new(schema());
        let spec = spec(&schema, true);
        let path = format!("{}/plain.avro", dir.path().display());
        let mut w = ManifestWriterBuilder::new(
            io.new_output(&path).unwrap(),
            Some(5),
            schema.clone(),
            spec.clone(),
        )
        .build_v2_data();
        for i in 0..200 {
            w.add_file(data_file(i, spec.spec_id(), true, DataContentType::Data), 4)
                .unwrap();
        }
        w.write_manifest_file().await.unwrap();
        let plain = std::fs::read(&path).unwrap();
        let expected = super::read(&plain).unwrap();
        let mut file = Container::open(&plain).unwrap();
        let mut blocks = Vec::new();
        while let Some((n, b)) = file.next_block().unwrap() {
            blocks.push((n, b.into_owned()));
        }
        for codec in ["deflate", "zstandard"] {
            let meta: Vec<(&str, &[u8])> = file
                .metadata
                .iter()
                .map(|(k, v)| {
                    (
                        *k,
                        if *k == "avro.codec" {
                            codec.as_bytes()
                        } else {
                            *v
                        },
                    )
                })
                .collect();
            let mut out = Vec::new();
            put_header_metadata(&mut out, &meta);
            out.extend_from_slice(file.sync());
            for (n, b) in &blocks {
                let packed = match codec {
                    "deflate" => {
                        let mut e = flate2::write::DeflateEncoder::new(
                            Vec::new(),
                            flate2::Compression::default(),
                        );
                        e.write_all(b).unwrap();
                        e.finish().unwrap()
                    }
                    _ => zstd::stream::encode_all(&b[..], 3).unwrap(),
                };
                put_long(&mut out, *n as i64);
                put_long(&mut out, packed.len() as i64);
                out.extend_from_slice(&packed);
                out.extend_from_slice(file.sync());
            }
            assert!(out.len() < plain.len(), "{codec} compressed the blocks");
            let got = super::read(&out).unwrap_or_else(|| panic!("floe reads a {codec} manifest"));
            assert_eq!(got, expected, "{codec}");
            // a block cut short is refused (the crate's reader then names the problem)
            assert!(super::read(&out[..out.len() - 20]).is_none());
        }
    }

    #[test]
    fn anything_else_is_left_to_the_crate() {
        assert!(super::read(b"not avro").is_none());
        assert!(super::read(b"Obj\x01").is_none(), "truncated header");
    }
}
