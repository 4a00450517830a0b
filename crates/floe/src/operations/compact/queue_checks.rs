//! What a distributed compaction accepts from its queue.
//!
//! The queue never holds a secret, so it is less trusted than the table's storage: whoever can
//! write a row there must not be able to make a worker read another table, or a coordinator
//! commit or delete a file it did not plan for (safety: untrusted input never steers a path or
//! a delete). So:
//!
//! - **a worker** reads only files inside the location of the table its task's metadata file
//!   describes, and that metadata file only from the table's `metadata/` directory
//!   ([`check_task`]); and it names every output after its run and task ([`output_prefix`]);
//! - **the coordinator** keeps its plan ([`PlannedTask`]) and accepts a task's outputs only
//!   for the tasks it queued, in the groups it queued them in, when every output is a new data
//!   file of this run and task (by name) inside the table's data location, never a planned
//!   input or a live file, in the default partition spec (`decode_outputs`), and the rows add up to the planned
//!   input rows minus the deletion vectors' (exactly, or at most that when other delete files
//!   apply) ([`check_outputs`]);
//! - anything else fails the task's group, naming the run, the task and what was wrong; the
//!   coordinator then deletes only files it can prove its own run wrote ([`owned`]): inside the
//!   data location, named after this run, never an input or a live file. Whatever else a
//!   report names is left to `remove-orphan-files`, which proves a file unreferenced.

use std::collections::HashSet;

use iceberg::spec::{DataContentType, DataFile};
use iceberg::table::Table;

use crate::storage::fence::{Fence, Verdict};

/// What every output file of task `task` of run `run_id` is named after.
pub fn output_prefix(run_id: &str, task: i64) -> String {
    format!("c-{run_id}-{task}")
}

/// The data location of `table` (where the iceberg crate's writers put data files).
pub fn data_location(table: &Table) -> String {
    let md = table.metadata();
    let p = md.properties();
    p.get("write.data.path")
        .or(p.get("write.folder-storage.path"))
        .cloned()
        .unwrap_or_else(|| format!("{}/data", md.location().trim_end_matches('/')))
}

/// A worker's check of a task on `table` (read from the task's metadata file at
/// `metadata_location`): that file lies in the table's `metadata/` directory, and every file
/// the task reads (`reads`: inputs, their delete files, deletion vectors and Puffin files)
/// inside the table's location. `name` is the table the task names, for the message.
pub fn check_task<'a>(
    table: &Table,
    name: &str,
    metadata_location: &str,
    mut reads: impl Iterator<Item = &'a str>,
) -> Result<(), String> {
    let location = table.metadata().location();
    let metadata_dir = Fence::at(&format!("{}/metadata", location.trim_end_matches('/')));
    if metadata_dir.verdict(metadata_location) != Verdict::Inside {
        return Err(format!(
            "its metadata file {metadata_location} is not in the metadata directory of the \
             table it describes ({location})"
        ));
    }
    let fence = Fence::at(location);
    match reads.find(|p| fence.verdict(p) != Verdict::Inside) {
        Some(p) => Err(format!(
            "it names {p}, which lies outside the location of table {name} ({location}); a \
             worker reads only the files of the table its task names"
        )),
        None => Ok(()),
    }
}

/// What the coordinator queued as one task.
#[derive(Debug, Clone)]
pub struct PlannedTask {
    pub group: usize,
    /// Input rows minus the rows their deletion vectors delete.
    pub rows: u64,
    /// True when no other delete file applies, so the outputs hold exactly `rows` rows.
    pub exact: bool,
}

/// Checks the outputs task `task` of run `run_id` reported against its plan. `all_inputs`:
/// every input of the run; `live`: live data files known at planning (may be empty);
/// `accepted`: outputs already accepted in this run (a path is accepted once).
#[allow(clippy::too_many_arguments)]
pub fn check_outputs(
    table: &Table,
    run_id: &str,
    task: i64,
    plan: &PlannedTask,
    files: &[DataFile],
    all_inputs: &HashSet<String>,
    live: &HashSet<String>,
    accepted: &HashSet<String>,
) -> Result<(), String> {
    let data = data_location(table);
    let fence = Fence::at(&data);
    let prefix = format!("{}-", output_prefix(run_id, task));
    let mut rows = 0u64;
    let mut seen = HashSet::new();
    for f in files {
        let path = f.file_path();
        let name = path.rsplit('/').next().unwrap_or(path);
        let why = if f.content_type() != DataContentType::Data {
            Some("is not a data file".to_string())
        } else if fence.verdict(path) != Verdict::Inside {
            Some(format!("lies outside the table's data location {data}"))
        } else if !name.starts_with(&prefix) {
            Some(format!(
                "is not named after this run and task ({prefix}...): not a file the task wrote"
            ))
        } else if all_inputs.contains(path) {
            Some("is an input of the compaction".to_string())
        } else if live.contains(path) {
            Some("is a live file of the table".to_string())
        } else if accepted.contains(path) || !seen.insert(path.to_string()) {
            Some("is reported twice".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!("output {path} {why}"));
        }
        rows += f.record_count();
    }
    match plan.exact {
        true if rows != plan.rows => Err(format!(
            "its outputs hold {rows} row(s), and its inputs {} once deletes apply",
            plan.rows
        )),
        false if rows > plan.rows => Err(format!(
            "its outputs hold {rows} row(s), more than its inputs' {}",
            plan.rows
        )),
        _ => Ok(()),
    }
}

/// Whether the coordinator of run `run_id` may delete `path`, reported as an output of task
/// `task`: a file its own run wrote (inside the data location, named after this run and
/// task), never an input or a live file.
pub fn owned(
    table: &Table,
    run_id: &str,
    task: i64,
    path: &str,
    all_inputs: &HashSet<String>,
    live: &HashSet<String>,
) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    Fence::at(&data_location(table)).verdict(path) == Verdict::Inside
        && name.starts_with(&format!("{}-", output_prefix(run_id, task)))
        && !all_inputs.contains(path)
        && !live.contains(path)
}
