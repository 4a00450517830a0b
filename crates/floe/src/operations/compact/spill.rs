//! Candidate scan tasks past `plan-batch-files`, kept in a local file instead of memory.
//!
//! The planning scan reads every manifest once. Below the bound its candidate tasks stay in
//! memory; past it they are appended here, one record each, and the run keeps only what
//! the planner needs per file ([`super::PlanFile`]) and one offset per task. Each batch of
//! file groups then reads back its own tasks ([`TaskSpill::read`]) when it is rewritten: no
//! batch scans the manifests again.
//!
//! A record holds what differs between tasks (path, sizes, record count, format, delete
//! files) as JSON, with the partition tuple as an index into a table of the distinct ones
//! seen (the iceberg crate does not serialize partition values) and the partition spec by
//! id. What every task of one scan shares (schema, projection, name mapping) is kept once.
//! The file is anonymous ([`tempfile::tempfile`], under `TMPDIR`): the operating system
//! removes it when the run ends, a crash included.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use iceberg::scan::{FileScanTask, FileScanTaskDeleteFile};
use iceberg::spec::{DataFileFormat, PartitionSpec, Struct};
use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};

/// What one task holds that others of the same scan do not.
#[derive(Serialize, Deserialize)]
struct Record {
    path: String,
    size: u64,
    start: u64,
    length: u64,
    records: Option<u64>,
    format: DataFileFormat,
    /// Index into [`TaskSpill::partitions`].
    partition: Option<u32>,
    spec: Option<i32>,
    deletes: Vec<FileScanTaskDeleteFile>,
}

/// Spilled scan tasks, in the order they were pushed (index = push order).
pub struct TaskSpill {
    writer: Option<BufWriter<std::fs::File>>,
    file: Option<std::fs::File>,
    /// Start of each record, then the end of the last one.
    offsets: Vec<u64>,
    /// One task's shared fields (its own are replaced on read).
    template: FileScanTask,
    partitions: Vec<Struct>,
    partition_ids: HashMap<Struct, u32>,
    specs: HashMap<i32, Arc<PartitionSpec>>,
}

fn spill_error(e: impl std::fmt::Display) -> Error {
    Error::Io(std::io::Error::other(format!(
        "compaction: spilling planned scan tasks to a local temporary file (TMPDIR): {e}"
    )))
}

impl TaskSpill {
    /// An empty spill whose tasks share `template`'s schema, projection and name mapping.
    pub(super) fn new(template: &FileScanTask) -> Result<Self> {
        let file = tempfile::tempfile().map_err(spill_error)?;
        Ok(Self {
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
            file: None,
            offsets: vec![0],
            template: template.clone(),
            partitions: Vec::new(),
            partition_ids: HashMap::new(),
            specs: HashMap::new(),
        })
    }

    /// Tasks pushed so far.
    pub(super) fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Appends `task` (its index is the previous [`Self::len`]).
    pub(super) fn push(&mut self, task: &FileScanTask) -> Result<()> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| spill_error("push after the spill was sealed"))?;
        let partition = match &task.partition {
            None => None,
            Some(p) => Some(match self.partition_ids.get(p) {
                Some(id) => *id,
                None => {
                    let id = self.partitions.len() as u32;
                    self.partitions.push(p.clone());
                    self.partition_ids.insert(p.clone(), id);
                    id
                }
            }),
        };
        let spec = task.partition_spec.as_ref().map(|s| {
            let id = s.spec_id();
            self.specs.entry(id).or_insert_with(|| s.clone());
            id
        });
        let record = Record {
            path: task.data_file_path.clone(),
            size: task.file_size_in_bytes,
            start: task.start,
            length: task.length,
            records: task.record_count,
            format: task.data_file_format,
            partition,
            spec,
            deletes: task.deletes.clone(),
        };
        let bytes = serde_json::to_vec(&record).map_err(spill_error)?;
        writer.write_all(&bytes).map_err(spill_error)?;
        let end = self.offsets.last().copied().unwrap_or(0) + bytes.len() as u64;
        self.offsets.push(end);
        Ok(())
    }

    /// Ends the writing: every pushed task can be read.
    pub(super) fn seal(&mut self) -> Result<()> {
        if let Some(w) = self.writer.take() {
            self.file = Some(w.into_inner().map_err(|e| spill_error(e.error()))?);
        }
        Ok(())
    }

    /// The tasks at `indexes`, in that order.
    pub(super) fn read(&self, indexes: &[usize]) -> Result<Vec<FileScanTask>> {
        let file = self
            .file
            .as_ref()
            .ok_or_else(|| spill_error("read before the spill was sealed"))?;
        let mut buf = Vec::new();
        indexes
            .iter()
            .map(|&i| {
                let (start, end) = match (self.offsets.get(i), self.offsets.get(i + 1)) {
                    (Some(s), Some(e)) => (*s, *e),
                    _ => return Err(spill_error(format!("no spilled task {i}"))),
                };
                buf.resize((end - start) as usize, 0);
                file.read_exact_at(&mut buf, start).map_err(spill_error)?;
                let r: Record = serde_json::from_slice(&buf).map_err(spill_error)?;
                let mut task = self.template.clone();
                task.data_file_path = r.path;
                task.file_size_in_bytes = r.size;
                task.start = r.start;
                task.length = r.length;
                task.record_count = r.records;
                task.data_file_format = r.format;
                task.partition = r.partition.map(|p| self.partitions[p as usize].clone());
                task.partition_spec = r.spec.and_then(|s| self.specs.get(&s).cloned());
                task.deletes = r.deletes;
                Ok(task)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataContentType, Literal, NestedField, PrimitiveType, Schema, Type};

    fn task(i: usize) -> FileScanTask {
        let schema = Arc::new(
            Schema::builder()
                .with_fields(vec![Arc::new(NestedField::required(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                ))])
                .build()
                .unwrap(),
        );
        FileScanTask {
            file_size_in_bytes: 100 + i as u64,
            start: 0,
            length: 100 + i as u64,
            record_count: (!i.is_multiple_of(3)).then_some(i as u64),
            data_file_path: format!("file:///w/data/{i}.parquet"),
            data_file_format: DataFileFormat::Parquet,
            schema,
            project_field_ids: vec![1],
            predicate: None,
            deletes: (0..i % 3)
                .map(|d| FileScanTaskDeleteFile {
                    file_path: format!("file:///w/data/del-{i}-{d}.parquet"),
                    file_size_in_bytes: 7,
                    file_type: if d == 0 {
                        DataContentType::PositionDeletes
                    } else {
                        DataContentType::EqualityDeletes
                    },
                    partition_spec_id: 0,
                    equality_ids: (d > 0).then(|| vec![1]),
                })
                .collect(),
            partition: (!i.is_multiple_of(4))
                .then(|| Struct::from_iter([Some(Literal::int(i as i32 % 5))])),
            partition_spec: None,
            name_mapping: None,
            case_sensitive: true,
        }
    }

    #[test]
    fn spilled_tasks_read_back_as_they_were_in_any_order() {
        let tasks: Vec<FileScanTask> = (0..50).map(task).collect();
        let mut spill = TaskSpill::new(&tasks[0]).unwrap();
        for t in &tasks {
            spill.push(t).unwrap();
        }
        spill.seal().unwrap();
        assert_eq!(spill.len(), 50);
        assert_eq!(
            spill.partitions.len(),
            5,
            "distinct partition tuples kept once"
        );
        let order = [49, 0, 17, 3, 3, 28];
        let back = spill.read(&order).unwrap();
        for (t, &i) in back.iter().zip(&order) {
            assert_eq!(t, &tasks[i], "task {i}");
        }
        assert!(
            spill.read(&[50]).is_err(),
            "an index past the end is an error"
        );
    }
}
