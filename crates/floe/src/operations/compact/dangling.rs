//! `remove-dangling-deletes`: after compaction, delete files that no longer apply to any live
//! data file are dropped in a separate `delete` commit (as Iceberg's
//! `RemoveDanglingDeleteFiles` action does). Table content does not change.
//!
//! Rules (Iceberg spec v2, "Scan Planning"): a position delete that references a data file
//! applies only to that file; otherwise position deletes apply to data files of the same spec
//! and partition with a data sequence number <= theirs, and equality deletes to those with a
//! sequence number < theirs. A delete file no live data file can match is dangling.

use std::collections::{HashMap, HashSet};

use iceberg::spec::DataContentType;

use crate::commit::LiveFile;

/// Paths of delete files among `live` that apply to no live data file.
pub fn dangling_deletes(live: &[LiveFile]) -> Vec<String> {
    let data_paths: HashSet<&str> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| f.file.file_path())
        .collect();
    // Minimum data sequence number of live data files per (spec, partition).
    let mut min_seq: HashMap<(i32, String), i64> = HashMap::new();
    for f in live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
    {
        let key = (f.spec_id, format!("{:?}", f.file.partition()));
        let e = min_seq.entry(key).or_insert(f.sequence_number);
        *e = (*e).min(f.sequence_number);
    }
    let global_min = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| f.sequence_number)
        .min();
    let mut out = Vec::new();
    let mut live_paths: HashSet<&str> = HashSet::new();
    for d in live
        .iter()
        .filter(|f| f.file.content_type() != DataContentType::Data)
    {
        let unpartitioned = d.file.partition().fields().is_empty();
        let min = if unpartitioned {
            global_min
        } else {
            min_seq
                .get(&(d.spec_id, format!("{:?}", d.file.partition())))
                .copied()
        };
        let dangling = match d.file.content_type() {
            DataContentType::PositionDeletes => match d.file.referenced_data_file() {
                Some(path) => !data_paths.contains(path.as_str()),
                None => min.is_none_or(|m| d.sequence_number < m),
            },
            DataContentType::EqualityDeletes => min.is_none_or(|m| d.sequence_number <= m),
            DataContentType::Data => false,
        };
        if dangling {
            out.push(d.file.file_path().to_string());
        } else {
            live_paths.insert(d.file.file_path());
        }
    }
    // Removal goes by path, and one Puffin file holds the deletion vectors of many data
    // files: it is dangling only when every vector in it is.
    out.retain(|p| !live_paths.contains(p.as_str()));
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::Struct;

    fn f(path: &str, content: DataContentType, seq: i64, referenced: Option<&str>) -> LiveFile {
        crate::commit::test_support::live_file(path, content, Struct::empty(), seq, referenced)
    }

    #[test]
    fn deletes_older_than_every_data_file_are_dangling() {
        let live = vec![
            f("d1", DataContentType::Data, 5, None),
            f("eq-old", DataContentType::EqualityDeletes, 5, None),
            f("eq-new", DataContentType::EqualityDeletes, 6, None),
            f(
                "pos-gone",
                DataContentType::PositionDeletes,
                9,
                Some("old-file"),
            ),
            f("pos-live", DataContentType::PositionDeletes, 9, Some("d1")),
            f("pos-part-old", DataContentType::PositionDeletes, 4, None),
            f("pos-part-same", DataContentType::PositionDeletes, 5, None),
        ];
        let mut d = dangling_deletes(&live);
        d.sort();
        assert_eq!(d, vec!["eq-old", "pos-gone", "pos-part-old"]);
    }

    /// One Puffin file holds the vectors of several data files and goes by path: it dangles
    /// only when none of them is live any more.
    #[test]
    fn a_puffin_file_dangles_only_when_every_vector_in_it_does() {
        use crate::commit::test_support::deletion_vector;
        let mut live = vec![
            f("d1", DataContentType::Data, 5, None),
            deletion_vector("a.puffin", "d1", 4, 6),
            deletion_vector("a.puffin", "gone-1", 60, 6),
            deletion_vector("b.puffin", "gone-2", 4, 6),
            deletion_vector("b.puffin", "gone-3", 60, 6),
        ];
        assert_eq!(dangling_deletes(&live), vec!["b.puffin"]);
        live.remove(0);
        assert_eq!(dangling_deletes(&live), vec!["a.puffin", "b.puffin"]);
    }
}
