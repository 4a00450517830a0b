//! The file and row counts of a manifest list, read by field id.
//!
//! The table spec names a manifest list's counts by field id ("Manifest Lists": 504
//! `added_files_count`, 505 `existing_files_count`, 506 `deleted_files_count`, 512-514 the row
//! counts). Readers must match fields by id, not by name ("Avro": "field IDs ... are used to
//! resolve fields"), and writers have used two spellings: Iceberg's Java implementation writes
//! `added_files_count` in format v1 too, where the iceberg crate's v1 reader looks for
//! `added_data_files_count` by name and reads nothing. A table Java wrote would then show no
//! counts, and floe's next commit would carry its manifests into a list with NULL counts, which
//! Java's `files`, `entries` and `manifests` metadata tables refuse.
//!
//! [`fill_by_id`] reads the counts a list holds by id; [`complete`] counts the entries of any
//! manifest whose list held none (the spec makes the v1 counts optional), so that a list floe
//! writes never holds a NULL count.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::spec::{ManifestFile, ManifestStatus};

use super::avro::{AvroType, Container, Cursor};
use crate::base::error::{Error, Result};

/// The counts of one manifest, by field id.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    files: [Option<i64>; 3],
    rows: [Option<i64>; 3],
}

/// True when `m` lacks a count.
pub fn lacks_counts(m: &ManifestFile) -> bool {
    m.added_files_count.is_none()
        || m.existing_files_count.is_none()
        || m.deleted_files_count.is_none()
        || m.added_rows_count.is_none()
        || m.existing_rows_count.is_none()
        || m.deleted_rows_count.is_none()
}

/// Fills the counts `manifests` lack from the manifest list at `list`, read by field id.
pub async fn fill_by_id(io: &FileIO, list: &str, manifests: &mut [ManifestFile]) -> Result<()> {
    if !manifests.iter().any(lacks_counts) {
        return Ok(());
    }
    let bytes = io.new_input(list)?.read().await?;
    let Some(by_path) = counts_by_id(&bytes) else {
        return Err(Error::Metadata {
            location: list.to_string(),
            reason: "the manifest list's counts could not be read by field id".into(),
            source: None,
        });
    };
    for m in manifests.iter_mut() {
        if let Some(c) = by_path.get(&m.manifest_path) {
            apply(m, c);
        }
    }
    Ok(())
}

fn apply(m: &mut ManifestFile, c: &Counts) {
    let file = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
    let row = |v: Option<i64>| v.and_then(|n| u64::try_from(n).ok());
    m.added_files_count = m.added_files_count.or(file(c.files[0]));
    m.existing_files_count = m.existing_files_count.or(file(c.files[1]));
    m.deleted_files_count = m.deleted_files_count.or(file(c.files[2]));
    m.added_rows_count = m.added_rows_count.or(row(c.rows[0]));
    m.existing_rows_count = m.existing_rows_count.or(row(c.rows[1]));
    m.deleted_rows_count = m.deleted_rows_count.or(row(c.rows[2]));
}

/// Counts every manifest of `manifests` that still lacks one from its entries (status and
/// record count), so no list floe writes holds a NULL count.
pub async fn complete(io: &FileIO, manifests: &mut [ManifestFile]) -> Result<()> {
    for m in manifests.iter_mut().filter(|m| lacks_counts(m)) {
        let manifest = super::opaque::load_manifest(m, io).await?;
        let mut c = Counts::default();
        for e in manifest.entries() {
            let i = match e.status() {
                ManifestStatus::Added => 0,
                ManifestStatus::Existing => 1,
                ManifestStatus::Deleted => 2,
            };
            c.files[i] = Some(c.files[i].unwrap_or(0) + 1);
            c.rows[i] = Some(c.rows[i].unwrap_or(0) + e.data_file().record_count() as i64);
        }
        for i in 0..3 {
            c.files[i] = c.files[i].or(Some(0));
            c.rows[i] = c.rows[i].or(Some(0));
        }
        apply(m, &c);
    }
    Ok(())
}

/// The counts of every manifest a manifest list's bytes name, by manifest path; `None` when
/// the file cannot be decoded.
fn counts_by_id(bytes: &[u8]) -> Option<HashMap<String, Counts>> {
    let mut file = Container::open(bytes)?;
    let fields = file.schema.fields()?.to_vec();
    let mut out = HashMap::new();
    while let Some((count, block)) = file.next_block()? {
        let mut c = Cursor::new(&block);
        for _ in 0..count {
            let mut path = None;
            let mut counts = Counts::default();
            for f in &fields {
                match f.id {
                    Some(500) => path = Some(string(&mut c, &f.ty)?),
                    Some(id @ (504..=506)) => {
                        counts.files[(id - 504) as usize] = number(&mut c, &f.ty)?
                    }
                    Some(id @ (512..=514)) => {
                        counts.rows[(id - 512) as usize] = number(&mut c, &f.ty)?
                    }
                    _ => c.skip(&f.ty)?,
                }
            }
            out.insert(path??, counts);
        }
    }
    Some(out)
}

/// An int or long (or null), through unions.
fn number(c: &mut Cursor, ty: &AvroType) -> Option<Option<i64>> {
    match ty {
        AvroType::Int | AvroType::Long => Some(Some(c.long()?)),
        AvroType::Null => Some(None),
        AvroType::Union(branches) => {
            let b = branches.get(usize::try_from(c.long()?).ok()?)?;
            number(c, b)
        }
        other => {
            c.skip(other)?;
            Some(None)
        }
    }
}

/// A string (or null), through unions.
fn string(c: &mut Cursor, ty: &AvroType) -> Option<Option<String>> {
    match ty {
        AvroType::String | AvroType::Bytes => Some(Some(c.str()?.to_string())),
        AvroType::Null => Some(None),
        AvroType::Union(branches) => {
            let b = branches.get(usize::try_from(c.long()?).ok()?)?;
            string(c, b)
        }
        other => {
            c.skip(other)?;
            Some(None)
        }
    }
}
