//! Per-partition write buffers under one memory budget.
//!
//! Streaming sinks make small files because every commit closes every open file. floe instead
//! keeps each partition's rows until the commit, then writes them rolled at the target size:
//! a commit adds at most one undersized file per partition (per writer). To keep memory flat
//! over a long commit interval, when the buffers exceed the budget the largest one is spilled
//! to local disk as Arrow IPC (not flushed as a small Parquet file), and read back at commit.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;

use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;
use iceberg::spec::DataFile;

use iceberg::table::Table;

use crate::base::error::{Error, Result};
use crate::write::partition::PartitionSplitter;
use crate::write::{TableWriter, WriteOptions};

struct PartBuf {
    mem: Vec<RecordBatch>,
    mem_bytes: usize,
    rows: u64,
    spill: Option<(PathBuf, StreamWriter<BufWriter<File>>)>,
}

/// One partition's rows at commit time: in memory and/or in a spill file.
pub struct PartData {
    pub partition: String,
    pub mem: Vec<RecordBatch>,
    pub spill: Option<PathBuf>,
    pub rows: u64,
}

/// Splits batches by the table's default partition spec, labelling each piece with its
/// partition path (`ts_day=2026-01-01`; empty when unpartitioned).
pub struct PartitionRouter {
    splitter: Option<PartitionSplitter>,
}

impl PartitionRouter {
    /// A router for `table`'s current schema and default spec.
    pub fn new(table: &Table) -> Result<Self> {
        let md = table.metadata();
        let spec = md.default_partition_spec();
        Ok(Self {
            splitter: match spec.fields().is_empty() {
                true => None,
                false => Some(PartitionSplitter::new(
                    spec.clone(),
                    md.current_schema().clone(),
                )?),
            },
        })
    }

    /// The batch's rows grouped by partition, in the order each partition first appears.
    pub fn split(&self, batch: RecordBatch) -> Result<Vec<(String, RecordBatch)>> {
        if batch.num_rows() == 0 {
            return Ok(vec![]);
        }
        let Some(s) = &self.splitter else {
            return Ok(vec![(String::new(), batch)]);
        };
        Ok(s.split(&batch)?
            .into_iter()
            .map(|(key, piece)| (s.label(&key), piece))
            .collect())
    }
}

/// Buffers of one writer.
pub struct PartitionBuffers {
    parts: HashMap<String, PartBuf>,
    mem_bytes: usize,
    budget: usize,
    spill_dir: PathBuf,
    spill_seq: u64,
    /// Bytes written to spill files since the start.
    pub spilled_bytes: u64,
}

fn spill_err(e: impl ToString) -> Error {
    Error::Io(std::io::Error::other(format!("spill: {}", e.to_string())))
}

impl PartitionBuffers {
    /// Buffers spilling under `spill_dir` beyond `budget` bytes.
    pub fn new(budget: usize, spill_dir: PathBuf) -> Result<Self> {
        std::fs::create_dir_all(&spill_dir)?;
        Ok(Self {
            parts: HashMap::new(),
            mem_bytes: 0,
            budget: budget.max(1),
            spill_dir,
            spill_seq: 0,
            spilled_bytes: 0,
        })
    }

    /// Spills beyond `budget` bytes from the next push on.
    pub fn set_budget(&mut self, budget: usize) {
        self.budget = budget.max(1);
    }

    /// Bytes held in memory.
    pub fn mem_bytes(&self) -> usize {
        self.mem_bytes
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Rows buffered.
    pub fn rows(&self) -> u64 {
        self.parts.values().map(|p| p.rows).sum()
    }

    /// Adds rows of one partition (labelled by [`PartitionRouter::split`]).
    pub fn push(&mut self, label: String, b: RecordBatch) -> Result<()> {
        if b.num_rows() == 0 {
            return Ok(());
        }
        let size = b.get_array_memory_size();
        let part = self.parts.entry(label).or_insert_with(|| PartBuf {
            mem: Vec::new(),
            mem_bytes: 0,
            rows: 0,
            spill: None,
        });
        part.rows += b.num_rows() as u64;
        part.mem_bytes += size;
        part.mem.push(b);
        self.mem_bytes += size;
        while self.mem_bytes > self.budget {
            self.spill_largest()?;
        }
        Ok(())
    }

    fn spill_largest(&mut self) -> Result<()> {
        let Some((label, _)) = self
            .parts
            .iter()
            .filter(|(_, p)| p.mem_bytes > 0)
            .max_by_key(|(_, p)| p.mem_bytes)
            .map(|(l, p)| (l.clone(), p.mem_bytes))
        else {
            return Ok(());
        };
        self.spill_seq += 1;
        let path = self
            .spill_dir
            .join(format!("spill-{}.arrows", self.spill_seq));
        let part = self.parts.get_mut(&label).expect("exists");
        if part.spill.is_none() {
            let schema = part.mem[0].schema();
            let file = BufWriter::new(File::create(&path)?);
            let writer = StreamWriter::try_new(file, &schema).map_err(spill_err)?;
            part.spill = Some((path, writer));
        }
        let (_, writer) = part.spill.as_mut().expect("set above");
        for b in part.mem.drain(..) {
            writer.write(&b).map_err(spill_err)?;
        }
        self.mem_bytes -= part.mem_bytes;
        self.spilled_bytes += part.mem_bytes as u64;
        part.mem_bytes = 0;
        Ok(())
    }

    /// Takes everything buffered (for a commit), leaving the buffers empty.
    pub fn take(&mut self) -> Result<Vec<PartData>> {
        self.mem_bytes = 0;
        let mut out = Vec::with_capacity(self.parts.len());
        for (partition, p) in self.parts.drain() {
            let spill = match p.spill {
                None => None,
                Some((path, mut w)) => {
                    w.finish().map_err(spill_err)?;
                    Some(path)
                }
            };
            out.push(PartData {
                partition,
                mem: p.mem,
                spill,
                rows: p.rows,
            });
        }
        out.sort_by(|a, b| a.partition.cmp(&b.partition));
        Ok(out)
    }
}

/// Turns a buffered batch into the rows to write (an upsert window keeps each key's last
/// change, in the table schema).
pub type RowsToWrite = std::sync::Arc<dyn Fn(&RecordBatch) -> Result<RecordBatch> + Send + Sync>;

/// Writes buffered partitions into data files rolled at the target size, one partition at a
/// time (so only one Parquet writer is open), each batch passed through `rows` when given.
/// Spill files are deleted once read.
pub async fn write_parts(
    table: &Table,
    parts: Vec<PartData>,
    options: &WriteOptions,
    rows: Option<RowsToWrite>,
) -> Result<Vec<DataFile>> {
    let mut files = Vec::new();
    for part in parts {
        let mut writer = TableWriter::new(table, options).await?;
        let result = write_part(&mut writer, &part, rows.as_ref()).await;
        if let Some(p) = &part.spill {
            let _ = std::fs::remove_file(p);
        }
        let closed = match result {
            Ok(()) => writer.close().await,
            Err(e) => {
                writer.abort().await;
                Err(e)
            }
        };
        match closed {
            Ok(written) => files.extend(written),
            Err(e) => {
                let mut ledger = crate::commit::Ledger::of(table);
                ledger.stage_files(&files);
                ledger.discard().await;
                return Err(e);
            }
        }
    }
    Ok(files)
}

async fn write_part(
    writer: &mut TableWriter,
    part: &PartData,
    rows: Option<&RowsToWrite>,
) -> Result<()> {
    let pick = |b: RecordBatch| match rows {
        Some(f) => f(&b),
        None => Ok(b),
    };
    if let Some(path) = &part.spill {
        let reader =
            StreamReader::try_new(BufReader::new(File::open(path)?), None).map_err(spill_err)?;
        for b in reader {
            let b = pick(b.map_err(spill_err)?)?;
            if b.num_rows() > 0 {
                writer.write(b).await?;
            }
        }
    }
    for b in &part.mem {
        let b = pick(b.clone())?;
        if b.num_rows() > 0 {
            writer.write(b).await?;
        }
    }
    Ok(())
}
