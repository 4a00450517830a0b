//! Deletion vectors (Iceberg format v3): the positions deleted from one data file, stored as
//! a `deletion-vector-v1` blob inside a Puffin file. The manifest entry of the delete file
//! names the data file (`referenced_data_file`) and where the blob is
//! (`content_offset`, `content_size_in_bytes`).
//!
//! The blob, as the table spec ("Deletion Vectors") and the Puffin spec
//! (`deletion-vector-v1`) lay it out:
//!
//! ```text
//!  length (4 bytes, big-endian: magic + vector) | magic D1 D3 39 64 | vector |
//!  CRC-32 of magic + vector (4 bytes, big-endian)
//! ```
//!
//! The vector is a 64-bit Roaring bitmap in the portable format: the number of 32-bit
//! bitmaps (8 bytes, little-endian), then for each, in ascending order, its key (the high 32
//! bits of the positions, 4 bytes little-endian) and the 32-bit bitmap in Roaring's portable
//! serialization. That is the format `roaring::RoaringTreemap` reads and writes.
//!
//! Decoding checks every part (length, magic, checksum, the bitmap itself) and names the
//! file and offset of a bad blob: a corrupt vector must never be read as "nothing deleted".

use roaring::RoaringTreemap;

use crate::base::error::{Error, Result};

/// The four bytes that open every deletion vector, after its length.
pub const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// The deleted row positions of one data file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeletionVector {
    positions: RoaringTreemap,
}

impl DeletionVector {
    /// A vector deleting `positions`.
    pub fn from_positions(positions: impl IntoIterator<Item = u64>) -> Self {
        Self {
            positions: positions.into_iter().collect(),
        }
    }

    /// Decodes one `deletion-vector-v1` blob; `source` (the Puffin file and offset) names it
    /// in errors.
    pub fn decode(blob: &[u8], source: &str) -> Result<Self> {
        let bad = |reason: String| Error::Metadata {
            location: source.to_string(),
            reason: format!("invalid deletion vector: {reason}"),
            source: None,
        };
        if blob.len() < 12 {
            return Err(bad(format!(
                "{} bytes, shorter than its framing (12)",
                blob.len()
            )));
        }
        let length = u32::from_be_bytes(blob[0..4].try_into().expect("4 bytes")) as usize;
        if length + 8 != blob.len() {
            return Err(bad(format!(
                "its length field says {length} bytes of magic and vector, the blob holds {}",
                blob.len() - 8
            )));
        }
        let body = &blob[4..4 + length];
        if body[0..4] != MAGIC {
            return Err(bad(format!(
                "magic {:02X?}, expected {:02X?}",
                &body[0..4],
                MAGIC
            )));
        }
        let stored = u32::from_be_bytes(blob[4 + length..].try_into().expect("4 bytes"));
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(bad(format!(
                "CRC-32 {stored:08x} does not match its content ({computed:08x})"
            )));
        }
        let vector = &body[4..];
        let positions =
            RoaringTreemap::deserialize_from(vector).map_err(|e| bad(format!("bitmap: {e}")))?;
        if positions.serialized_size() != vector.len() {
            return Err(bad(format!(
                "bitmap of {} bytes followed by {} bytes it does not use",
                positions.serialized_size(),
                vector.len() - positions.serialized_size()
            )));
        }
        Ok(Self { positions })
    }

    /// The `deletion-vector-v1` blob of this vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = MAGIC.to_vec();
        self.positions
            .serialize_into(&mut body)
            .expect("writing to memory cannot fail");
        let mut blob = Vec::with_capacity(body.len() + 8);
        blob.extend_from_slice(&(body.len() as u32).to_be_bytes());
        blob.extend_from_slice(&body);
        blob.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        blob
    }

    /// Whether row `position` is deleted.
    pub fn contains(&self, position: u64) -> bool {
        self.positions.contains(position)
    }

    /// How many rows are deleted.
    pub fn len(&self) -> u64 {
        self.positions.len()
    }

    /// Whether no row is deleted.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The deleted positions, ascending.
    pub fn positions(&self) -> impl Iterator<Item = u64> + '_ {
        self.positions.iter()
    }

    /// Adds the positions of `other` (a data file's vector merged with new deletes).
    pub fn union(&mut self, other: &DeletionVector) {
        self.positions |= &other.positions;
    }
}

/// Reads the deletion vector at `offset` (`length` bytes, the manifest entry's
/// `content_offset` and `content_size_in_bytes`) of the Puffin file at `path`.
pub async fn read(
    io: &iceberg::io::FileIO,
    path: &str,
    offset: u64,
    length: u64,
) -> Result<DeletionVector> {
    let source = format!("{path} (deletion vector at offset {offset}, {length} bytes)");
    let input = io.new_input(path)?;
    let reader = input.reader().await?;
    use iceberg::io::FileRead;
    let bytes = reader.read(offset..offset + length).await?;
    DeletionVector::decode(&bytes, &source)
}

/// Where one deletion vector is, as its manifest entry says.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DvLocation {
    /// The Puffin file holding it (one Puffin file holds the vectors of many data files).
    pub puffin: String,
    /// `content_offset` and `content_size_in_bytes`: the blob inside the Puffin file.
    pub offset: u64,
    pub length: u64,
    /// `record_count`: how many rows it deletes.
    pub cardinality: u64,
}

impl DvLocation {
    /// The vector itself, read and checked.
    pub async fn read(&self, io: &iceberg::io::FileIO) -> Result<DeletionVector> {
        read(io, &self.puffin, self.offset, self.length).await
    }
}

/// The deletion vectors of one snapshot, by the data file each deletes from (Iceberg spec v3,
/// "Scan Planning": a deletion vector applies to the data file its `referenced_data_file`
/// names, and while a data file has one, position delete files are ignored for it: writers
/// merge them into the vector).
///
/// The iceberg crate (0.10.1) plans a Puffin file as if it were a Parquet position delete
/// file attached to every data file of its partition, and its reader cannot open it. Every
/// floe read of a table's rows therefore goes through [`DeletionVectors::attach`], which
/// leaves on a task only the vector of its own data file (and no position delete file while it
/// has one), and reads that vector itself. A reader that does not know the index fails on the
/// Puffin entry rather than ignoring it: a deletion vector is never silently skipped.
#[derive(Debug, Clone, Default)]
pub struct DeletionVectors {
    by_data_file: std::sync::Arc<std::collections::HashMap<String, DvLocation>>,
    puffin: std::sync::Arc<std::collections::HashSet<String>>,
}

impl DeletionVectors {
    /// The vectors among the live files of a snapshot. Two vectors for one data file break
    /// the spec's "at most one per data file": the later one (higher sequence number) is kept,
    /// as it was written with the earlier merged in.
    pub fn from_live(live: &[crate::table::manifests::LiveFile]) -> Self {
        let mut by: std::collections::HashMap<String, (i64, DvLocation)> = Default::default();
        let mut puffin = std::collections::HashSet::new();
        for f in live {
            let Some(dv) = location_of(&f.file) else {
                continue;
            };
            puffin.insert(dv.puffin.clone());
            let Some(data) = f.file.referenced_data_file() else {
                continue;
            };
            match by.get(&data) {
                Some((seq, _)) if *seq > f.sequence_number => {}
                _ => {
                    by.insert(data, (f.sequence_number, dv));
                }
            }
        }
        Self {
            by_data_file: std::sync::Arc::new(by.into_iter().map(|(k, (_, v))| (k, v)).collect()),
            puffin: std::sync::Arc::new(puffin),
        }
    }

    /// The vectors of `table`'s current snapshot: read from its delete manifests, only for a
    /// format v3 table (v1 and v2 have none).
    pub async fn of_current(table: &iceberg::table::Table) -> Result<Self> {
        if table.metadata().format_version() < iceberg::spec::FormatVersion::V3 {
            return Ok(Self::default());
        }
        let deletes: Vec<_> = crate::table::manifests::current_manifests(table)
            .await?
            .into_iter()
            .filter(|m| m.content == iceberg::spec::ManifestContentType::Deletes)
            .collect();
        if deletes.is_empty() {
            return Ok(Self::default());
        }
        let live = crate::table::manifests::live_files_of(table, &deletes).await?;
        Ok(Self::from_live(&live))
    }

    /// The vectors of some data files, with every Puffin file of the snapshot (what a
    /// distributed compaction task carries: its files' vectors only).
    pub fn from_parts(vectors: Vec<(String, DvLocation)>, puffin: Vec<String>) -> Self {
        Self {
            by_data_file: std::sync::Arc::new(vectors.into_iter().collect()),
            puffin: std::sync::Arc::new(puffin.into_iter().collect()),
        }
    }

    /// The Puffin files of the snapshot, sorted.
    pub fn puffin_files(&self) -> Vec<String> {
        let mut v: Vec<String> = self.puffin.iter().cloned().collect();
        v.sort();
        v
    }

    /// No vector at all.
    pub fn is_empty(&self) -> bool {
        self.puffin.is_empty()
    }

    /// Whether `path` is a Puffin file of deletion vectors.
    pub fn is_puffin(&self, path: &str) -> bool {
        self.puffin.contains(path)
    }

    /// The vector of data file `path`, if it has one.
    pub fn of_file(&self, path: &str) -> Option<&DvLocation> {
        self.by_data_file.get(path)
    }

    /// Number of data files with a vector.
    pub fn len(&self) -> usize {
        self.by_data_file.len()
    }

    /// Leaves on `task` the delete files that apply to its data file: the Puffin entries of
    /// other files' vectors are removed, its own vector stays (once), and while it has one its
    /// position delete files go (the vector holds them).
    pub fn attach(&self, task: &mut iceberg::scan::FileScanTask) {
        if self.is_empty() {
            return;
        }
        let own = self.of_file(&task.data_file_path).map(|d| d.puffin.clone());
        let mut kept_own = false;
        task.deletes.retain(|d| {
            if d.file_type != iceberg::spec::DataContentType::PositionDeletes {
                return true;
            }
            if own.as_deref() == Some(d.file_path.as_str()) && !kept_own {
                kept_own = true;
                return true;
            }
            own.is_none() && !self.is_puffin(&d.file_path)
        });
        if let (Some(puffin), false) = (own, kept_own) {
            // The planner matched by partition and sequence number; the vector names its file.
            task.deletes.push(iceberg::scan::FileScanTaskDeleteFile {
                file_path: puffin,
                file_size_in_bytes: 0,
                file_type: iceberg::spec::DataContentType::PositionDeletes,
                partition_spec_id: task.partition_spec.as_ref().map_or(0, |s| s.spec_id()),
                equality_ids: None,
            });
        }
    }

    /// The vector an attached `task` carries, if any.
    pub fn of_task(&self, task: &iceberg::scan::FileScanTask) -> Option<&DvLocation> {
        let dv = self.of_file(&task.data_file_path)?;
        task.deletes
            .iter()
            .any(|d| d.file_path == dv.puffin)
            .then_some(dv)
    }
}

/// The deletion vector a manifest entry describes, if it is one (a Puffin position delete
/// entry with its blob's offset and length).
pub fn location_of(f: &iceberg::spec::DataFile) -> Option<DvLocation> {
    if f.content_type() != iceberg::spec::DataContentType::PositionDeletes
        || f.file_format() != iceberg::spec::DataFileFormat::Puffin
    {
        return None;
    }
    Some(DvLocation {
        puffin: f.file_path().to_string(),
        offset: f.content_offset()?.max(0) as u64,
        length: f.content_size_in_bytes()?.max(0) as u64,
        cardinality: f.record_count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::manifests::test_support::{deletion_vector, live_file};
    use iceberg::spec::{DataContentType, Struct};

    fn task(data: &str, deletes: &[(&str, DataContentType)]) -> iceberg::scan::FileScanTask {
        let schema = std::sync::Arc::new(
            iceberg::spec::Schema::builder()
                .build()
                .expect("empty schema"),
        );
        iceberg::scan::FileScanTask {
            file_size_in_bytes: 10,
            start: 0,
            length: 10,
            record_count: None,
            data_file_path: data.to_string(),
            data_file_format: iceberg::spec::DataFileFormat::Parquet,
            schema,
            project_field_ids: vec![],
            predicate: None,
            deletes: deletes
                .iter()
                .map(|(p, t)| iceberg::scan::FileScanTaskDeleteFile {
                    file_path: p.to_string(),
                    file_size_in_bytes: 10,
                    file_type: *t,
                    partition_spec_id: 0,
                    equality_ids: None,
                })
                .collect(),
            partition: None,
            partition_spec: None,
            name_mapping: None,
            case_sensitive: true,
        }
    }

    fn paths(t: &iceberg::scan::FileScanTask) -> Vec<&str> {
        t.deletes.iter().map(|d| d.file_path.as_str()).collect()
    }

    /// The planner attaches a Puffin file to every data file of its partition, once per vector
    /// in it; attached, a task keeps its own vector once and, while it has one, no Parquet
    /// position delete file (the vector holds its positions); equality deletes stay.
    #[test]
    fn a_task_keeps_only_its_own_vector_and_its_equality_deletes() {
        use DataContentType::{EqualityDeletes as Eq, PositionDeletes as Pos};
        let live = vec![
            live_file("d1", DataContentType::Data, Struct::empty(), 1, None),
            deletion_vector("a.puffin", "d1", 4, 3),
            deletion_vector("a.puffin", "d2", 60, 3),
            deletion_vector("old.puffin", "d2", 4, 2),
            live_file("pos.parquet", Pos, Struct::empty(), 2, None),
        ];
        let dvs = DeletionVectors::from_live(&live);
        assert_eq!(dvs.len(), 2);
        assert!(dvs.is_puffin("a.puffin") && !dvs.is_puffin("pos.parquet"));
        // d2's two vectors: the later one (sequence 3) is the one that applies.
        assert_eq!(dvs.of_file("d2").unwrap().offset, 60);

        let planned = [
            ("a.puffin", Pos),
            ("a.puffin", Pos),
            ("pos.parquet", Pos),
            ("eq.parquet", Eq),
        ];
        let mut t1 = task("d1", &planned);
        dvs.attach(&mut t1);
        assert_eq!(paths(&t1), vec!["a.puffin", "eq.parquet"]);
        assert_eq!(dvs.of_task(&t1).unwrap().offset, 4);

        let mut t3 = task("d3", &planned);
        dvs.attach(&mut t3);
        assert_eq!(paths(&t3), vec!["pos.parquet", "eq.parquet"]);
        assert!(dvs.of_task(&t3).is_none());

        // The planner did not attach it (another partition's sequence numbers): added.
        let mut t2 = task("d2", &[("eq.parquet", Eq)]);
        dvs.attach(&mut t2);
        assert_eq!(paths(&t2), vec!["eq.parquet", "a.puffin"]);
        assert_eq!(dvs.of_task(&t2).unwrap().offset, 60);

        // No vector in the table: tasks are left as planned.
        let mut t = task("d1", &planned);
        DeletionVectors::default().attach(&mut t);
        assert_eq!(t.deletes.len(), 4);
    }

    /// A blob written by hand from the spec's layout, not by `encode`: positions 1, 3 and
    /// 2^32 + 5 (two 32-bit bitmaps, keys 0 and 1), each in Roaring's portable format (a
    /// cookie of 12346 with no run containers: cookie, container count, then per container
    /// its key and cardinality - 1, then the container offsets, then the array containers).
    fn spec_blob() -> Vec<u8> {
        let bitmap32 = |values: &[u16]| {
            let mut b = Vec::new();
            b.extend_from_slice(&12346u32.to_le_bytes()); // SERIAL_COOKIE_NO_RUNCONTAINER
            b.extend_from_slice(&1u32.to_le_bytes()); // one container
            b.extend_from_slice(&0u16.to_le_bytes()); // its key (high 16 bits)
            b.extend_from_slice(&(values.len() as u16 - 1).to_le_bytes());
            b.extend_from_slice(&16u32.to_le_bytes()); // offset of the container
            for v in values {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b
        };
        let mut vector = Vec::new();
        vector.extend_from_slice(&2u64.to_le_bytes());
        vector.extend_from_slice(&0u32.to_le_bytes());
        vector.extend_from_slice(&bitmap32(&[1, 3]));
        vector.extend_from_slice(&1u32.to_le_bytes());
        vector.extend_from_slice(&bitmap32(&[5]));
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&vector);
        let mut blob = (body.len() as u32).to_be_bytes().to_vec();
        blob.extend_from_slice(&body);
        blob.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        blob
    }

    #[test]
    fn a_blob_laid_out_by_the_spec_decodes_to_its_positions() {
        let dv = DeletionVector::decode(&spec_blob(), "t.puffin").unwrap();
        assert_eq!(dv.positions().collect::<Vec<_>>(), [1, 3, (1 << 32) + 5]);
        assert!(dv.contains(3) && !dv.contains(2) && dv.contains((1 << 32) + 5));
        assert_eq!(dv.len(), 3);
        // And encoding gives the same bytes back.
        assert_eq!(dv.encode(), spec_blob());
    }

    #[test]
    fn round_trip_over_many_positions() {
        let positions: Vec<u64> = (0..100_000u64)
            .filter(|p| p % 7 == 0)
            .chain([u32::MAX as u64, 1 << 40])
            .collect();
        let dv = DeletionVector::from_positions(positions.clone());
        let back = DeletionVector::decode(&dv.encode(), "t.puffin").unwrap();
        assert_eq!(back.positions().collect::<Vec<_>>(), positions);
        assert_eq!(back, dv);
        let mut merged = DeletionVector::from_positions([1, 2]);
        merged.union(&DeletionVector::from_positions([2, 9]));
        assert_eq!(merged.positions().collect::<Vec<_>>(), [1, 2, 9]);
        assert!(DeletionVector::default().is_empty());
    }

    #[test]
    fn every_corruption_is_refused_naming_the_file() {
        let good = spec_blob();
        let refused = |blob: &[u8], needle: &str| {
            let e = DeletionVector::decode(blob, "s3://b/t/data/x.puffin@4")
                .unwrap_err()
                .to_string();
            assert!(e.contains("s3://b/t/data/x.puffin@4"), "{e}");
            assert!(e.contains(needle), "{needle}: {e}");
        };
        refused(&good[..10], "shorter than its framing");
        refused(&good[..good.len() - 1], "length field");
        let mut magic = good.clone();
        magic[4] = 0;
        refused(&magic, "magic");
        let mut flipped = good.clone();
        flipped[14] ^= 1;
        refused(&flipped, "CRC-32");
        let mut crc = good.clone();
        let n = crc.len();
        crc[n - 1] ^= 0xFF;
        refused(&crc, "CRC-32");
        // A well-framed blob whose bitmap is cut short.
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&2u64.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        let mut cut = (body.len() as u32).to_be_bytes().to_vec();
        cut.extend_from_slice(&body);
        cut.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        refused(&cut, "bitmap");
    }
}
