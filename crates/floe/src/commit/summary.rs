//! Snapshot summaries (Iceberg spec, "Snapshot Summary" / Java's `SnapshotSummary` keys):
//! `added-*` / `deleted-*` / `removed-*` counts of this commit and `total-*` carried from the
//! parent. Counters that are zero are omitted, as Iceberg does.

use std::collections::{HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, Operation, Summary};

#[derive(Default)]
struct Counts {
    data_files: u64,
    delete_files: u64,
    pos_delete_files: u64,
    eq_delete_files: u64,
    records: u64,
    size: u64,
    pos_deletes: u64,
    eq_deletes: u64,
}

impl Counts {
    fn add(&mut self, f: &DataFile) {
        self.size += f.file_size_in_bytes();
        match f.content_type() {
            DataContentType::Data => {
                self.data_files += 1;
                self.records += f.record_count();
            }
            DataContentType::PositionDeletes => {
                self.delete_files += 1;
                self.pos_delete_files += 1;
                self.pos_deletes += f.record_count();
            }
            DataContentType::EqualityDeletes => {
                self.delete_files += 1;
                self.eq_delete_files += 1;
                self.eq_deletes += f.record_count();
            }
        }
    }
}

/// Builds the summary of a commit that adds `added` and removes `removed` files.
pub fn build(
    operation: Operation,
    added: &[&DataFile],
    removed: &[&DataFile],
    parent: Option<&Summary>,
    extra: &HashMap<String, String>,
) -> Summary {
    let mut a = Counts::default();
    let mut r = Counts::default();
    let mut partitions = HashSet::new();
    for f in added {
        a.add(f);
        partitions.insert(format!("{:?}", f.partition()));
    }
    for f in removed {
        r.add(f);
        partitions.insert(format!("{:?}", f.partition()));
    }
    let mut props: HashMap<String, String> = extra.clone();
    let mut put = |k: &str, v: u64| {
        if v > 0 {
            props.insert(k.to_string(), v.to_string());
        }
    };
    put("added-data-files", a.data_files);
    put("deleted-data-files", r.data_files);
    put("added-delete-files", a.delete_files);
    put("removed-delete-files", r.delete_files);
    put("added-position-delete-files", a.pos_delete_files);
    put("removed-position-delete-files", r.pos_delete_files);
    put("added-equality-delete-files", a.eq_delete_files);
    put("removed-equality-delete-files", r.eq_delete_files);
    put("added-records", a.records);
    put("deleted-records", r.records);
    put("added-files-size", a.size);
    put("removed-files-size", r.size);
    put("added-position-deletes", a.pos_deletes);
    put("removed-position-deletes", r.pos_deletes);
    put("added-equality-deletes", a.eq_deletes);
    put("removed-equality-deletes", r.eq_deletes);
    props.insert(
        "changed-partition-count".into(),
        partitions.len().to_string(),
    );

    let totals: [(&str, u64, u64); 6] = [
        ("total-records", a.records, r.records),
        ("total-files-size", a.size, r.size),
        ("total-data-files", a.data_files, r.data_files),
        ("total-delete-files", a.delete_files, r.delete_files),
        ("total-position-deletes", a.pos_deletes, r.pos_deletes),
        ("total-equality-deletes", a.eq_deletes, r.eq_deletes),
    ];
    for (key, plus, minus) in totals {
        let previous = match parent {
            None => Some(0),
            Some(p) => p
                .additional_properties
                .get(key)
                .and_then(|v| v.parse::<u64>().ok()),
        };
        // A parent without totals (written by a tool that omits them) leaves them unknown.
        if let Some(prev) = previous {
            props.insert(
                key.to_string(),
                (prev + plus).saturating_sub(minus).to_string(),
            );
        }
    }
    Summary {
        operation,
        additional_properties: props,
    }
}
