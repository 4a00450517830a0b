//! Table health commands: diagnose, expire-snapshots, remove-orphan-files, clean-metadata,
//! rewrite-manifests, rewrite-position-delete-files, convert-equality-deletes.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Subcommand;
use floe::base::properties::parse_duration;
use floe::catalog::{parse_table_ident, Catalog};
use floe::operations::diagnose::render;
use floe::operations::expire::OlderThan;
use floe::operations::{Operation, Query};

use crate::output::{human_bytes, Out};

#[derive(Subcommand, Debug)]
pub enum HealthCmd {
    /// What kind of small files the table grows, why, and what to run (metadata only).
    ///
    /// Also: the writer's pace, commit duration and freshness, with the commit interval that
    /// would make files of min-file-size-bytes; who keeps history (each tag, branch, writer
    /// watermark and the retention window, with what only it keeps); the object-store requests
    /// of a full scan, now and compacted.
    #[command(after_help = "Examples:
  floe diagnose db.events
  floe diagnose db.events --json | jq '.history.writer, .history.retained_by, .scan_requests'
  floe diagnose db.events --save before.json
  floe compact db.events && floe diagnose db.events --compare before.json --html cmp.html")]
    Diagnose {
        /// Table as NAMESPACE.TABLE.
        table: String,
        /// Also write a self-contained HTML report with plots (with --compare: before and after).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Also time a full read of the table's live data (rows, elapsed ms).
        #[arg(long)]
        probe: bool,
        /// Write the report (JSON, with the probe) to FILE, to --compare against later.
        #[arg(long, value_name = "FILE")]
        save: Option<PathBuf>,
        /// Compare with a report saved by --save: before (FILE) and after (now), side by side.
        #[arg(long, value_name = "FILE")]
        compare: Option<PathBuf>,
        /// With --compare: compare with a saved report of another table (a warning, not an error).
        #[arg(long, requires = "compare")]
        force: bool,
    },
    /// Removes old snapshots (history.expire.* defaults) and the files only they referenced.
    ExpireSnapshots {
        table: String,
        /// Expire snapshots older than an age (5d, 12h, 0s) or committed before a time:
        /// 2026-11-30T10:00:00Z, 2026-11-30T10:00:00+01:00, '2026-11-30 10:00:00' (UTC),
        /// 2026-11-30 (midnight UTC) or epoch milliseconds. Default
        /// history.expire.max-snapshot-age-ms.
        #[arg(long, value_name = "AGE|TIMESTAMP")]
        older_than: Option<String>,
        /// Keep at least N snapshots per branch (default history.expire.min-snapshots-to-keep).
        #[arg(long)]
        retain_last: Option<u64>,
        /// Keep at most N snapshots per branch, however young (Paimon's
        /// snapshot.num-retained.max; floe.maintain.expire.max-snapshots for the maintainer):
        /// bounded history for a table committing every few seconds. Ref heads and writer
        /// recovery points always stay; never fewer than --retain-last.
        #[arg(long, value_name = "N")]
        max_snapshots: Option<u64>,
        /// Expire exactly these snapshots (with --older-than: these plus the age-based ones).
        #[arg(long = "snapshot-id", value_name = "ID")]
        snapshot_ids: Vec<i64>,
        /// Keep the unreferenced files (remove-orphan-files deletes them later).
        #[arg(long)]
        no_clean_files: bool,
        /// Also delete unreferenced files outside the table location (added with add_files,
        /// say); by default they are kept and listed. Never another table's or the catalog's.
        #[arg(long)]
        delete_external_files: bool,
        /// Report what would be removed; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Deletes files under the table location that no snapshot, ref or metadata references.
    RemoveOrphanFiles {
        table: String,
        /// Only files older than this (default 3d; under 1h needs --force).
        #[arg(long)]
        older_than: Option<String>,
        /// Report what would be deleted; delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// List this directory (inside the table location) instead of the whole location.
        #[arg(long)]
        location: Option<String>,
        /// Files matching a referenced path except for scheme/authority: error, ignore or delete.
        #[arg(long, default_value = "error")]
        prefix_mismatch_mode: String,
        /// Equivalent schemes: 's3a,s3n=s3' (the default), several separated by ';'.
        #[arg(long)]
        equal_schemes: Option<String>,
        /// Allow --older-than under one hour.
        #[arg(long)]
        force: bool,
    },
    /// Deletes metadata.json files that fell out of the metadata log.
    CleanMetadata {
        table: String,
        #[arg(long)]
        dry_run: bool,
    },
    /// Merges small manifests into ~commit.manifest.target-size-bytes, clustered by partition.
    RewriteManifests {
        table: String,
        #[arg(long)]
        dry_run: bool,
    },
    /// Compacts small position delete files per partition, dropping rows that point at data
    /// files no longer live (Iceberg's rewrite_position_delete_files).
    RewritePositionDeleteFiles {
        table: String,
        /// Iceberg option K=V (repeatable): rewrite-all, min-input-files,
        /// target-file-size-bytes, min-file-size-bytes, max-file-size-bytes.
        #[arg(long = "option", value_name = "K=V")]
        options: Vec<String>,
        /// Report the groups that would be rewritten; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Converts equality delete files into position delete files without rewriting data
    /// (readers such as PyIceberg cannot read equality deletes).
    ConvertEqualityDeletes {
        table: String,
        /// Find and count the rows; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub async fn run(catalog: &Catalog, cmd: HealthCmd, out: &Out) -> Result<()> {
    match cmd {
        HealthCmd::Diagnose {
            table,
            html,
            probe,
            save,
            compare,
            force,
        } => {
            // Read the saved report first: a bad file fails before the table is read.
            let saved = match &compare {
                Some(path) => Some(floe::operations::diagnose::SavedReport::read(path)?),
                None => None,
            };
            let spinner = out.spinner(format!("diagnosing {table}"));
            let report = floe::operations::diagnose::DiagnoseBuilder::new(
                catalog,
                parse_table_ident(&table)?,
            )
            .with_probe(probe || save.is_some() || compare.is_some())
            .query()
            .await;
            spinner.finish_and_clear();
            let report = report?;
            let comparison = match &saved {
                Some(saved) => Some(floe::operations::diagnose::compare(saved, &report, force)?),
                None => None,
            };
            if let Some(c) = &comparison {
                for w in &c.warnings {
                    out.warn(w);
                }
            }
            if let Some(path) = &html {
                std::fs::write(path, render::html_with(&report, comparison.as_ref()))
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            if let Some(path) = &save {
                let saved = floe::operations::diagnose::SavedReport::new(&report)?;
                std::fs::write(path, serde_json::to_string_pretty(&saved)?)
                    .with_context(|| format!("cannot write --save {}", path.display()))?;
            }
            let value = match &comparison {
                Some(c) => {
                    let mut v = serde_json::to_value(c)?;
                    v["report"] = serde_json::to_value(&report)?;
                    v
                }
                None => serde_json::to_value(&report)?,
            };
            out.result(&value, || {
                let mut s = render::text(&report);
                if let Some(c) = &comparison {
                    s.push('\n');
                    s.push_str(&render::compare_text(c));
                }
                if let Some(p) = &html {
                    s.push_str(&format!("\nHTML report written to {}\n", p.display()));
                }
                if let Some(p) = &save {
                    s.push_str(&format!(
                        "\nreport saved to {} (compare later with --compare {})\n",
                        p.display(),
                        p.display()
                    ));
                }
                s
            });
        }
        HealthCmd::ExpireSnapshots {
            table,
            older_than,
            retain_last,
            max_snapshots,
            snapshot_ids,
            no_clean_files,
            delete_external_files,
            dry_run,
        } => {
            let mut b =
                floe::operations::expire::ExpireBuilder::new(catalog, parse_table_ident(&table)?)
                    .with_snapshot_ids(snapshot_ids)
                    .with_clean_files(!no_clean_files)
                    .with_delete_external_files(delete_external_files);
            if let Some(limit) = older_than {
                let limit = OlderThan::parse("--older-than", &limit)?;
                if let OlderThan::TimestampMs(ms) = limit {
                    if ms > chrono::Utc::now().timestamp_millis() {
                        out.warn(format!(
                            "--older-than {} is in the future: every snapshot that --retain-last, a ref or a writer's recovery point does not keep expires (as with 0s)",
                            limit_text(ms)
                        ));
                    }
                }
                b = b.with_older_than(limit);
            }
            if let Some(n) = max_snapshots {
                b = b.with_max_snapshots(crate::positive("--max-snapshots", n)?);
            }
            if let Some(n) = retain_last {
                b = b.with_retain_last(crate::positive("--retain-last", n)?);
            }
            let (bar, progress) = out.progress("files");
            let r = b.with_progress(progress).run(dry_run).await;
            bar.finish_and_clear();
            let r = r?;
            out.result(&serde_json::to_value(&r)?, || {
                let verb = if r.dry_run { "would expire" } else { "expired" };
                let mut s = format!(
                    "{verb} {} snapshot(s) of {} ({} kept){}",
                    r.plan.expired_snapshots.len(),
                    r.table,
                    r.plan.retained_snapshots,
                    if r.plan.expired_refs.is_empty() {
                        String::new()
                    } else {
                        format!("; removed refs: {}", r.plan.expired_refs.join(", "))
                    }
                );
                for p in &r.plan.protected {
                    s.push_str(&format!(
                        "\n  kept snapshot {}: it holds the recovery point of writer {}",
                        p.snapshot_id, p.writer
                    ));
                }
                for c in &r.plan.chains {
                    match &c.reason {
                        None if c.snapshots > 1 => s.push_str(&format!(
                            "\n  kept {} snapshot(s) from {}'s head down to writer {}'s recovery point (its restart walks them)",
                            c.snapshots, c.branch, c.writer
                        )),
                        None => {}
                        Some(why) => s.push_str(&format!(
                            "\n  NOT protected: the chain of writer {} on {}: {why}",
                            c.writer, c.branch
                        )),
                    }
                }
                let verb = if r.dry_run { "would delete" } else { "deleted" };
                for k in &r.files {
                    s.push_str(&format!("\n  {verb} {} {} file(s)", k.files, k.kind));
                    if k.bytes > 0 {
                        s.push_str(&format!(", {}", human_bytes(k.bytes)));
                    }
                }
                s.push_str(&crate::output::kept_lines(&r.kept));
                if r.deleted.failed > 0 {
                    s.push_str(&format!(
                        "\n  {} delete(s) failed (remove-orphan-files will retry): {}",
                        r.deleted.failed,
                        r.deleted.failures.join("; ")
                    ));
                }
                s.push_str(&format!("\n  ({} ms)", r.duration_ms));
                s
            });
        }
        HealthCmd::RemoveOrphanFiles {
            table,
            older_than,
            dry_run,
            location,
            prefix_mismatch_mode,
            equal_schemes,
            force,
        } => {
            let mut b = floe::operations::clean::orphans::OrphanBuilder::new(
                catalog,
                parse_table_ident(&table)?,
            )
            .with_location(location)
            .with_prefix_mismatch_mode(prefix_mismatch_mode.parse()?)
            .with_equal_schemes(equal_schemes)
            .with_force(force);
            if let Some(age) = older_than {
                b = b.with_older_than(parse_duration("--older-than", &age)?);
            }
            let (bar, progress) = out.progress("files");
            let r = b.with_progress(progress).run(dry_run).await;
            bar.finish_and_clear();
            let r = r?;
            out.result(&serde_json::to_value(&r)?, || {
                let verb = if r.dry_run { "would delete" } else { "deleted" };
                let mut s = format!(
                    "{}: listed {} files ({}); {} referenced, {} younger than {}s; {verb} {} orphan(s), {}",
                    r.table,
                    r.listed_files,
                    human_bytes(r.listed_bytes),
                    r.referenced,
                    r.too_recent,
                    r.older_than_ms / 1000,
                    r.orphan_files,
                    human_bytes(r.orphan_bytes)
                );
                for p in r.sample.iter().take(if r.dry_run { 20 } else { 5 }) {
                    s.push_str(&format!("\n  {p}"));
                }
                if r.became_referenced > 0 {
                    s.push_str(&format!(
                        "\n  kept {} file(s) a concurrent commit started referencing",
                        r.became_referenced
                    ));
                }
                s.push_str(&crate::output::kept_lines(&r.kept));
                if r.prefix_mismatches > 0 {
                    s.push_str(&format!(
                        "\n  {} file(s) differ from referenced paths only by scheme/authority",
                        r.prefix_mismatches
                    ));
                }
                if r.deleted.failed > 0 {
                    s.push_str(&format!("\n  {} delete(s) failed", r.deleted.failed));
                }
                s
            });
        }
        HealthCmd::CleanMetadata { table, dry_run } => {
            let r = floe::operations::clean::metadata_files::CleanMetadataBuilder::new(
                catalog,
                parse_table_ident(&table)?,
            )
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || {
                format!(
                    "{}: {} metadata.json files, {} kept (log + current), {} newer kept; {} {} ({})",
                    r.table,
                    r.metadata_files,
                    r.kept,
                    r.kept_newer,
                    if r.dry_run { "would delete" } else { "deleted" },
                    if r.dry_run { r.removable } else { r.deleted.deleted },
                    human_bytes(r.removable_bytes)
                )
            });
        }
        HealthCmd::RewriteManifests { table, dry_run } => {
            let r = floe::operations::clean::rewrite_manifests::RewriteManifestsBuilder::new(
                catalog,
                parse_table_ident(&table)?,
            )
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || match r.snapshot_id {
                Some(id) => format!(
                    "{}: {} manifests ({}) -> {} ({}), snapshot {id} ({} ms)",
                    r.table,
                    r.manifests_before,
                    human_bytes(r.bytes_before),
                    r.manifests_after,
                    human_bytes(r.bytes_after),
                    r.duration_ms
                ),
                None if r.dry_run => format!(
                    "{}: {} manifests ({}); dry run, nothing committed",
                    r.table,
                    r.manifests_before,
                    human_bytes(r.bytes_before)
                ),
                None => format!(
                    "{}: {} manifest(s), nothing to merge",
                    r.table, r.manifests_before
                ),
            });
        }
        HealthCmd::ConvertEqualityDeletes { table, dry_run } => {
            let r = floe::operations::change::convert::ConvertBuilder::new(
                catalog,
                parse_table_ident(&table)?,
            )
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || {
                let mut s = match r.snapshot_id {
                    Some(id) => format!(
                        "{}: converted {} equality delete file(s) ({} rows) into {} position \
                         delete file(s) ({} positions) reading {} data file(s); snapshot {id} ({} ms)",
                        r.table,
                        r.equality_delete_files,
                        r.equality_delete_rows,
                        r.position_delete_files,
                        r.positions,
                        r.data_files_read,
                        r.duration_ms
                    ),
                    None if r.dry_run => format!(
                        "{}: {} equality delete file(s) would become position deletes ({} \
                         positions, {} data file(s) read); dry run, nothing committed",
                        r.table, r.equality_delete_files, r.positions, r.data_files_read
                    ),
                    None => format!("{}: no equality delete file to convert", r.table),
                };
                for (path, reason) in &r.skipped {
                    s.push_str(&format!("\n  left as is: {path}: {reason}"));
                }
                s
            });
        }
        HealthCmd::RewritePositionDeleteFiles {
            table,
            options,
            dry_run,
        } => {
            let mut opts =
                floe::operations::compact::position_deletes::RewriteDeletesOptions::default();
            for kv in &options {
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--option {kv}: expected K=V"))?;
                opts.set(k.trim(), v.trim())?;
            }
            let (bar, progress) = out.progress("groups");
            let r = floe::operations::compact::position_deletes::RewriteDeletesBuilder::new(
                catalog,
                parse_table_ident(&table)?,
            )
            .with_options(opts)
            .with_progress(progress)
            .run(dry_run)
            .await;
            bar.finish_and_clear();
            let r = r?;
            out.result(&serde_json::to_value(&r)?, || {
                let mut s = match r.snapshot_id {
                    Some(id) => format!(
                        "{}: rewrote {} position delete files ({}) into {} ({}); {} of {} deleted \
                         positions kept ({} pointed at files no longer live{}), {} file(s) left \
                         empty; snapshot {id} ({} ms)",
                        r.table,
                        r.rewritten_delete_files_count,
                        human_bytes(r.rewritten_bytes_count),
                        r.added_delete_files_count,
                        human_bytes(r.added_bytes_count),
                        r.added_deletes,
                        r.rewritten_deletes,
                        r.dangling_deletes_removed,
                        if r.superseded_by_vectors > 0 {
                            format!(
                                ", {} held by the data files' deletion vectors already",
                                r.superseded_by_vectors
                            )
                        } else {
                            String::new()
                        },
                        r.emptied_delete_files,
                        r.duration_ms
                    ),
                    None if r.groups.is_empty() => format!(
                        "{}: {} live position delete file(s), nothing to rewrite",
                        r.table, r.live_position_delete_files
                    ),
                    None => format!(
                        "{}: {} live position delete file(s), {} group(s) to rewrite; dry run, \
                         nothing committed",
                        r.table,
                        r.live_position_delete_files,
                        r.groups.len()
                    ),
                };
                if r.snapshot_id.is_none() {
                    for g in &r.groups {
                        s.push_str(&format!(
                            "\n  {} (spec {}): {} files, {}, {} deleted positions",
                            g.partition,
                            g.spec_id,
                            g.input_files,
                            human_bytes(g.input_bytes),
                            g.input_deletes
                        ));
                    }
                }
                s
            });
        }
    }
    Ok(())
}

/// An epoch-milliseconds time as RFC 3339 UTC.
fn limit_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| ms.to_string())
}
