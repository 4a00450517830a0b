//! The compaction planner: a pure function from live files to file groups (Iceberg's
//! `rewrite_data_files` with the bin-pack strategy; option names and defaults as Iceberg's
//! `SizeBasedFileRewriter` / `BinPackRewriteFilePlanner`).
//!
//! 1. A file is a candidate when its size is outside [`min-file-size-bytes`,
//!    `max-file-size-bytes`], when at least `delete-file-threshold` delete files apply to it, or
//!    when it was written under another partition spec than the table's default (after
//!    `table evolve-partition`; all files with `rewrite-all`). A file of another spec is grouped
//!    by the default-spec partition its rows fall in, so that `hour(ts)` files of one day
//!    become one `day(ts)` file, not 24.
//! 2. Candidates are grouped per (spec id, partition) and bin-packed (largest first) into groups
//!    of at most `max-file-group-size-bytes`.
//! 3. A group is kept when it has `min-input-files` files, or more than one file and more than
//!    a target file's worth of data, or an oversized or delete-heavy file (or `rewrite-all`).
//! 4. Groups are ordered by `rewrite-job-order`.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::base::error::{Error, Result};
use crate::base::properties;

/// Order in which file groups are rewritten (Iceberg's `rewrite-job-order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum JobOrder {
    #[default]
    None,
    BytesAsc,
    BytesDesc,
    FilesAsc,
    FilesDesc,
}

impl JobOrder {
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "bytes-asc" => Self::BytesAsc,
            "bytes-desc" => Self::BytesDesc,
            "files-asc" => Self::FilesAsc,
            "files-desc" => Self::FilesDesc,
            _ => {
                return Err(Error::invalid_option(
                    "rewrite-job-order",
                    s,
                    "expected none, bytes-asc, bytes-desc, files-asc or files-desc",
                ))
            }
        })
    }
}

/// Default of `sort-job-size-bytes`: 1 GiB of input (about 3-5 GiB of Arrow rows while sorted).
pub const SORT_JOB_SIZE_BYTES: u64 = 1024 * 1024 * 1024;

/// Planner options, with Iceberg's defaults relative to the target size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanOptions {
    pub target_file_size_bytes: u64,
    pub min_file_size_bytes: u64,
    pub max_file_size_bytes: u64,
    pub min_input_files: usize,
    pub max_file_group_size_bytes: u64,
    pub delete_file_threshold: usize,
    pub rewrite_all: bool,
    pub rewrite_job_order: JobOrder,
    /// A sorted rewrite (`--sort-by`) orders each job's rows as a whole, in memory, so that
    /// the job's outputs hold disjoint ranges: its jobs are up to this many input bytes (at
    /// least one output's worth), where an unsorted rewrite's are one output each.
    pub sort_job_size_bytes: u64,
}

impl PlanOptions {
    /// Defaults for a target size: min 0.75x, max 1.8x, 5 input files, 100 GiB groups.
    pub fn for_target(target: u64) -> Self {
        Self {
            target_file_size_bytes: target,
            min_file_size_bytes: (target as f64 * 0.75) as u64,
            max_file_size_bytes: (target as f64 * 1.8) as u64,
            min_input_files: 5,
            max_file_group_size_bytes: 100 * 1024 * 1024 * 1024,
            delete_file_threshold: usize::MAX,
            rewrite_all: false,
            rewrite_job_order: JobOrder::None,
            sort_job_size_bytes: SORT_JOB_SIZE_BYTES,
        }
    }

    /// Whether a file of `size` bytes with `deletes` delete files applying (written under
    /// another spec than the default: `other_spec`) is a candidate for rewriting (step 1 of the
    /// plan).
    pub fn is_candidate(&self, size: u64, deletes: usize, other_spec: bool) -> bool {
        self.rewrite_all
            || other_spec
            || size < self.min_file_size_bytes
            || size > self.max_file_size_bytes
            || deletes >= self.delete_file_threshold
    }

    /// Rejects inconsistent options with an error naming the option.
    pub fn validate(&self) -> Result<()> {
        if self.target_file_size_bytes == 0 {
            return Err(Error::invalid_option(
                "target-file-size-bytes",
                0,
                "must be positive",
            ));
        }
        if self.min_file_size_bytes > self.target_file_size_bytes {
            return Err(Error::invalid_option(
                "min-file-size-bytes",
                self.min_file_size_bytes,
                format!(
                    "must not exceed target-file-size-bytes ({})",
                    self.target_file_size_bytes
                ),
            ));
        }
        if self.max_file_size_bytes < self.target_file_size_bytes {
            return Err(Error::invalid_option(
                "max-file-size-bytes",
                self.max_file_size_bytes,
                format!(
                    "must be at least target-file-size-bytes ({})",
                    self.target_file_size_bytes
                ),
            ));
        }
        if self.min_input_files == 0 {
            return Err(Error::invalid_option(
                "min-input-files",
                0,
                "must be at least 1",
            ));
        }
        if self.max_file_group_size_bytes == 0 {
            return Err(Error::invalid_option(
                "max-file-group-size-bytes",
                0,
                "must be positive",
            ));
        }
        Ok(())
    }
}

/// What the planner needs to know of a live data file.
#[derive(Debug, Clone)]
pub struct PlanFile {
    /// Index into the caller's file list.
    pub index: usize,
    pub size: u64,
    pub records: u64,
    pub spec_id: i32,
    /// A printable partition key (equal keys = same partition).
    pub partition: String,
    /// Number of delete files that apply to it.
    pub deletes: usize,
    /// Written under another spec than the table's default: rewritten whatever its size.
    pub other_spec: bool,
}

/// One unit of rewrite work: files of one partition rewritten together.
#[derive(Debug, Clone, Serialize)]
pub struct FileGroup {
    pub spec_id: i32,
    pub partition: String,
    /// Indexes into the caller's file list.
    #[serde(skip)]
    pub files: Vec<usize>,
    pub input_files: usize,
    pub input_bytes: u64,
    pub input_records: u64,
    pub expected_output_files: u64,
}

/// The plan: groups to rewrite, in order.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub groups: Vec<FileGroup>,
    pub live_files: usize,
    pub candidate_files: usize,
}

impl Plan {
    pub fn input_files(&self) -> usize {
        self.groups.iter().map(|g| g.input_files).sum()
    }
    pub fn input_bytes(&self) -> u64 {
        self.groups.iter().map(|g| g.input_bytes).sum()
    }
}

/// Output files a group of `bytes` becomes: like Iceberg, round down unless the remainder is
/// large enough to stand as its own file (over min size), never zero.
pub fn expected_outputs(bytes: u64, opts: &PlanOptions) -> u64 {
    let target = opts.target_file_size_bytes.max(1);
    let full = bytes / target;
    let rest = bytes % target;
    let n = if full == 0 || rest >= opts.min_file_size_bytes {
        full + 1
    } else {
        full
    };
    n.max(1)
}

/// Plans a rewrite of `files`.
pub fn plan(files: &[PlanFile], opts: &PlanOptions) -> Plan {
    let too_large = |f: &PlanFile| f.size > opts.max_file_size_bytes;
    let delete_heavy = |f: &PlanFile| f.deletes >= opts.delete_file_threshold;
    let candidates: Vec<&PlanFile> = files
        .iter()
        .filter(|f| opts.is_candidate(f.size, f.deletes, f.other_spec))
        .collect();
    let mut by_partition: BTreeMap<(i32, &str), Vec<&PlanFile>> = BTreeMap::new();
    for f in &candidates {
        by_partition
            .entry((f.spec_id, f.partition.as_str()))
            .or_default()
            .push(f);
    }
    let mut groups = Vec::new();
    for ((spec_id, partition), mut fs) in by_partition {
        // First-fit decreasing bin packing by size.
        fs.sort_by(|a, b| b.size.cmp(&a.size).then(a.index.cmp(&b.index)));
        let mut bins: Vec<(u64, Vec<&PlanFile>)> = Vec::new();
        for f in fs {
            match bins
                .iter_mut()
                .find(|(used, _)| used + f.size <= opts.max_file_group_size_bytes)
            {
                Some(bin) => {
                    bin.0 += f.size;
                    bin.1.push(f);
                }
                None => bins.push((f.size, vec![f])),
            }
        }
        for (bytes, members) in bins {
            let enough_files = members.len() >= opts.min_input_files;
            let enough_content = members.len() > 1 && bytes > opts.target_file_size_bytes;
            let must = members
                .iter()
                .any(|f| too_large(f) || delete_heavy(f) || f.other_spec);
            if !(opts.rewrite_all || enough_files || enough_content || must) {
                continue;
            }
            groups.push(FileGroup {
                spec_id,
                partition: partition.to_string(),
                files: members.iter().map(|f| f.index).collect(),
                input_files: members.len(),
                input_bytes: bytes,
                input_records: members.iter().map(|f| f.records).sum(),
                expected_output_files: expected_outputs(bytes, opts),
            });
        }
    }
    match opts.rewrite_job_order {
        JobOrder::None => {}
        JobOrder::BytesAsc => groups.sort_by_key(|g| g.input_bytes),
        JobOrder::BytesDesc => groups.sort_by_key(|g| std::cmp::Reverse(g.input_bytes)),
        JobOrder::FilesAsc => groups.sort_by_key(|g| g.input_files),
        JobOrder::FilesDesc => groups.sort_by_key(|g| std::cmp::Reverse(g.input_files)),
    }
    Plan {
        groups,
        live_files: files.len(),
        candidate_files: candidates.len(),
    }
}

/// Splits a group's files (index, size) into write jobs of about one target file each, so a
/// large group is encoded on several cores. Largest first into the emptiest job; the number
/// of jobs is the group's expected output count.
pub fn split_into_jobs(files: &[(usize, u64)], opts: &PlanOptions) -> Vec<Vec<usize>> {
    let total: u64 = files.iter().map(|f| f.1).sum();
    let n = expected_outputs(total, opts).max(1) as usize;
    let mut sorted: Vec<&(usize, u64)> = files.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut jobs: Vec<(u64, Vec<usize>)> = vec![(0, vec![]); n.min(files.len().max(1))];
    for (index, size) in sorted {
        let job = jobs
            .iter_mut()
            .min_by_key(|(used, _)| *used)
            .expect("at least one job");
        job.0 += size;
        job.1.push(*index);
    }
    jobs.into_iter()
        .map(|(_, f)| f)
        .filter(|f| !f.is_empty())
        .collect()
}

/// The planner options `floe compact` would start from with these properties and no
/// `--option`, checked as it checks them (min <= target <= max, ...).
pub fn check_property_defaults(props: &HashMap<String, String>) -> Result<()> {
    // Malformed values are reported on their own (when set, or by the command reading them).
    let size = |option: &str, default: u64| -> u64 {
        props
            .get(&format!("{}{option}", properties::COMPACT_PREFIX))
            .and_then(|v| properties::parse_size(option, v).ok())
            .unwrap_or(default)
    };
    let table_target = props
        .get(properties::WRITE_TARGET_FILE_SIZE_BYTES.key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(properties::WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT);
    let target = size("target-file-size-bytes", table_target);
    let mut o = PlanOptions::for_target(target);
    o.min_file_size_bytes = size("min-file-size-bytes", o.min_file_size_bytes);
    o.max_file_size_bytes = size("max-file-size-bytes", o.max_file_size_bytes);
    o.min_input_files = size("min-input-files", o.min_input_files as u64) as usize;
    o.max_file_group_size_bytes = size("max-file-group-size-bytes", o.max_file_group_size_bytes);
    o.validate().map_err(|e| match e {
        Error::InvalidOption {
            option,
            value,
            reason,
        } => Error::invalid_option(
            format!("table property {}{option}", properties::COMPACT_PREFIX),
            value,
            format!("{reason} (the defaults floe compact would run with)"),
        ),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_order_the_property_accepts_parses() {
        for w in crate::base::properties::JOB_ORDERS {
            let order = JobOrder::parse(w).unwrap();
            assert_eq!(serde_json::to_value(order).unwrap(), w);
        }
        assert!(JobOrder::parse("largest-first").is_err());
    }

    const MB: u64 = 1 << 20;

    fn f(index: usize, size: u64, partition: &str) -> PlanFile {
        PlanFile {
            index,
            size,
            records: 10,
            spec_id: 0,
            partition: partition.to_string(),
            deletes: 0,
            other_spec: false,
        }
    }

    #[test]
    fn small_files_of_a_partition_form_one_group() {
        let opts = PlanOptions::for_target(512 * MB);
        let files: Vec<_> = (0..10).map(|i| f(i, MB, "d=1")).collect();
        let p = plan(&files, &opts);
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].input_files, 10);
        assert_eq!(p.groups[0].expected_output_files, 1);
    }

    #[test]
    fn files_of_an_older_spec_are_rewritten_whatever_their_size() {
        let opts = PlanOptions::for_target(100 * MB);
        let old = |i, size, p: &str| PlanFile {
            spec_id: 1,
            other_spec: true,
            ..f(i, size, p)
        };
        // One well-sized file alone, and two small files of one new partition.
        let files = vec![
            old(0, 100 * MB, "-> d=1"),
            old(1, MB, "-> d=2"),
            old(2, MB, "-> d=2"),
            f(3, 100 * MB, "d=1"),
        ];
        let p = plan(&files, &opts);
        let mut groups: Vec<_> = p.groups.iter().map(|g| g.files.clone()).collect();
        groups.sort();
        assert_eq!(groups, vec![vec![0], vec![1, 2]], "{p:?}");
    }

    #[test]
    fn well_sized_files_are_left_alone_and_few_small_files_wait() {
        let opts = PlanOptions::for_target(100 * MB);
        let mut files: Vec<_> = (0..3).map(|i| f(i, 100 * MB, "a")).collect();
        files.extend((3..6).map(|i| f(i, MB, "b"))); // 3 < min-input-files (5)
        let p = plan(&files, &opts);
        assert!(p.groups.is_empty(), "{p:?}");
        assert_eq!(p.candidate_files, 3);
    }

    #[test]
    fn oversized_file_is_split_alone_and_partitions_never_mix() {
        let opts = PlanOptions::for_target(100 * MB);
        let files = vec![
            f(0, 400 * MB, "a"),
            f(1, MB, "b"),
            f(2, MB, "b"),
            f(3, MB, "c"),
        ];
        let p = plan(&files, &opts);
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].files, vec![0]);
        assert_eq!(p.groups[0].expected_output_files, 4);
    }

    #[test]
    fn groups_are_bounded_by_max_group_size_and_ordered() {
        let mut opts = PlanOptions::for_target(100 * MB);
        opts.max_file_group_size_bytes = 10 * MB;
        opts.min_input_files = 2;
        opts.rewrite_job_order = JobOrder::BytesDesc;
        let files: Vec<_> = (0..25).map(|i| f(i, MB + (i as u64 % 2), "p")).collect();
        let p = plan(&files, &opts);
        assert!(p.groups.iter().all(|g| g.input_bytes <= 10 * MB));
        assert_eq!(
            p.input_files(),
            25,
            "every candidate lands in exactly one group"
        );
        assert!(p
            .groups
            .windows(2)
            .all(|w| w[0].input_bytes >= w[1].input_bytes));
    }

    #[test]
    fn delete_heavy_and_rewrite_all_select_well_sized_files() {
        let mut opts = PlanOptions::for_target(100 * MB);
        opts.delete_file_threshold = 2;
        let mut heavy = f(0, 100 * MB, "a");
        heavy.deletes = 3;
        let p = plan(&[heavy, f(1, 100 * MB, "a")], &opts);
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.groups[0].files, vec![0]);
        opts.rewrite_all = true;
        let p = plan(&[f(0, 100 * MB, "a"), f(1, 100 * MB, "a")], &opts);
        assert_eq!(p.input_files(), 2);
    }

    #[test]
    fn large_groups_split_into_balanced_jobs_of_about_one_output_each() {
        let opts = PlanOptions::for_target(100 * MB);
        let files: Vec<(usize, u64)> = (0..50).map(|i| (i, 10 * MB)).collect();
        let jobs = split_into_jobs(&files, &opts);
        assert_eq!(jobs.len(), 5);
        assert!(jobs.iter().all(|j| j.len() == 10));
        let mut all: Vec<usize> = jobs.concat();
        all.sort();
        assert_eq!(
            all,
            (0..50).collect::<Vec<_>>(),
            "every file in exactly one job"
        );
        assert_eq!(split_into_jobs(&[(7, MB)], &opts), vec![vec![7]]);
    }

    #[test]
    fn a_million_live_files_plan_into_one_group_per_partition() {
        let opts = PlanOptions::for_target(512 * MB);
        let files: Vec<PlanFile> = (0..1_000_000)
            .map(|i| PlanFile {
                index: i,
                size: 4096 + (i as u64 % 100) * 1024,
                records: 10,
                spec_id: 0,
                partition: format!("day={}", i % 1000),
                deletes: 0,
                other_spec: false,
            })
            .collect();
        let p = plan(&files, &opts);
        assert_eq!(p.groups.len(), 1000);
        assert_eq!(p.input_files(), 1_000_000);
        assert!(p
            .groups
            .iter()
            .all(|g| g.input_files == 1000 && g.expected_output_files == 1));
    }

    #[test]
    fn inconsistent_options_name_the_option() {
        let mut opts = PlanOptions::for_target(100 * MB);
        opts.min_file_size_bytes = 200 * MB;
        assert!(opts
            .validate()
            .unwrap_err()
            .to_string()
            .contains("min-file-size-bytes"));
        let mut opts = PlanOptions::for_target(100 * MB);
        opts.max_file_size_bytes = MB;
        assert!(opts
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max-file-size-bytes"));
    }
}
