//! Catalog, namespace and table commands: list and show catalogs, create and list namespaces,
//! create, list, describe, drop tables, set their properties and evolve their partition spec
//! and schema.

use super::*;
use floe::operations::refs::{CreateRefBuilder, DropRefBuilder, NewRef, RefKind};
use floe::operations::Operation;

#[derive(Subcommand, Debug)]
pub(crate) enum CatalogCmd {
    /// Lists the catalogs of the config file and the environment.
    List,
    /// Shows the catalog a command would use, connects to it and counts its namespaces.
    Show,
}

#[derive(Subcommand, Debug)]
pub(crate) enum NamespaceCmd {
    /// Creates a namespace.
    Create { namespace: String },
    /// Lists namespaces.
    List,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TableCmd {
    /// Creates an Iceberg table (format v2 unless --format-version says 1 or 3).
    Create {
        table: String,
        /// Iceberg table format version: 1, 2 (the default) or 3. Also accepted as
        /// `--property format-version=N`, as Spark and PyIceberg take it.
        #[arg(long, value_name = "N")]
        format_version: Option<String>,
        /// Columns: 'id bigint not null, ts timestamp, name string, ...'.
        #[arg(long, conflicts_with = "schema_file")]
        schema: Option<String>,
        /// Iceberg schema JSON file.
        #[arg(long)]
        schema_file: Option<PathBuf>,
        /// Partition spec: 'day(ts), bucket(16, id), truncate(4, name), identity(col)'.
        #[arg(long)]
        partition: Option<String>,
        /// Primary key: 'id' or 'id, region' (Iceberg's identifier fields; made not null).
        #[arg(long, value_name = "COLUMNS")]
        primary_key: Option<String>,
        /// Table property k=v (repeatable).
        #[arg(long = "property", value_name = "K=V")]
        properties: Vec<String>,
    },
    /// Lists tables (of one namespace, or all).
    List { namespace: Option<String> },
    /// Shows schema, partition spec, properties and current snapshot.
    Describe { table: String },
    /// Drops a table; --purge also deletes its files.
    Drop {
        table: String,
        /// Also delete the files the table references (inside its location).
        #[arg(long)]
        purge: bool,
        /// With --purge, also delete referenced files outside the table location (added with
        /// add_files, say); by default they are kept and listed. Never another table's files.
        #[arg(long, requires = "purge")]
        delete_external_files: bool,
    },
    /// Commits a new partition spec: new writes use it, `floe compact` rewrites older files
    /// into it (Iceberg's partition evolution; field ids kept or brought back).
    EvolvePartition {
        table: String,
        /// The whole new spec, as in `table create --partition` ('' = unpartitioned).
        #[arg(long, conflicts_with_all = ["add", "remove"])]
        spec: Option<String>,
        /// A field to add: 'day(ts)', 'bucket(8, id)', 'col', optionally 'expr AS name'.
        #[arg(long, value_name = "FIELD")]
        add: Vec<String>,
        /// A field to remove, by expression ('hour(ts)') or partition field name ('ts_hour').
        #[arg(long, value_name = "FIELD")]
        remove: Vec<String>,
        /// Show the new spec; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Commits safe schema changes as one new schema: add (optional) columns, rename, widen
    /// types, make optional, drop unused columns. Columns keep their ids.
    EvolveSchema {
        table: String,
        /// 'name type [comment ...]' (nested: 'payload.name type'); always optional.
        #[arg(long, value_name = "COLUMN TYPE")]
        add_column: Vec<String>,
        /// 'old=new' (a nested column by path: 'payload.a=b').
        #[arg(long, value_name = "OLD=NEW")]
        rename_column: Vec<String>,
        /// 'column type': int -> bigint, float -> double, decimal(P,S) -> decimal(P',S), P' > P.
        #[arg(long, value_name = "COLUMN TYPE")]
        set_type: Vec<String>,
        /// A required column becomes optional.
        #[arg(long, value_name = "COLUMN")]
        make_optional: Vec<String>,
        /// Drops a column no partition spec, sort order or identifier field uses.
        #[arg(long, value_name = "COLUMN")]
        drop_column: Vec<String>,
        /// Show the new schema; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Sets (k=v) and removes (--unset k) table properties.
    SetProperty {
        table: String,
        #[arg(value_name = "K=V")]
        set: Vec<String>,
        #[arg(long, value_name = "K")]
        unset: Vec<String>,
        /// Check the update and show the properties it leaves; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Upgrades the table's Iceberg format version (metadata only, as Spark's
    /// `SET TBLPROPERTIES ('format-version'=...)`); a downgrade is refused.
    Upgrade {
        table: String,
        /// The format version to upgrade to: 2 or 3.
        #[arg(long, value_name = "N")]
        format_version: u8,
        /// Show what changes; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    // --- snapshot references (tags and branches) ---
    /// Tags: named snapshots kept by expire-snapshots (create, drop, list).
    #[command(subcommand)]
    Tag(TagCmd),
    /// Branches: named lines of snapshots with their own retention (create, drop, list).
    #[command(subcommand)]
    Branch(BranchCmd),
}

/// `floe table tag ...` (Spark: `ALTER TABLE t CREATE [OR REPLACE] TAG name [AS OF VERSION id]
/// [RETAIN n DAYS]`, `DROP TAG name`).
#[derive(Subcommand, Debug)]
pub(crate) enum TagCmd {
    /// Tags a snapshot (default: the current one).
    Create {
        table: String,
        name: String,
        /// The snapshot to tag (default: the current snapshot).
        #[arg(long)]
        snapshot_id: Option<i64>,
        /// max-ref-age-ms: expire-snapshots removes the tag once its snapshot is older than
        /// this (7d, 12h; default history.expire.max-ref-age-ms, else kept forever).
        #[arg(long, value_name = "DURATION")]
        retain: Option<String>,
        /// Replace a tag of this name instead of refusing.
        #[arg(long)]
        replace: bool,
        /// Check and show the tag; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Drops a tag (its snapshot is left to expire-snapshots).
    Drop {
        table: String,
        name: String,
        /// Check and show the tag to drop; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Lists the tags.
    List { table: String },
}

/// `floe table branch ...` (Spark: `ALTER TABLE t CREATE [OR REPLACE] BRANCH name [AS OF
/// VERSION id] [RETAIN n DAYS] [WITH SNAPSHOT RETENTION n SNAPSHOTS m DAYS]`, `DROP BRANCH`).
#[derive(Subcommand, Debug)]
pub(crate) enum BranchCmd {
    /// Creates a branch at a snapshot (default: the current one).
    Create {
        table: String,
        name: String,
        /// The snapshot the branch starts at (default: the current snapshot).
        #[arg(long)]
        snapshot_id: Option<i64>,
        /// max-ref-age-ms: expire-snapshots removes the branch once its head is older than
        /// this (7d; default history.expire.max-ref-age-ms, else kept forever).
        #[arg(long, value_name = "DURATION")]
        retain: Option<String>,
        /// max-snapshot-age-ms: keep the branch's snapshots younger than this (2d; default:
        /// expire-snapshots' --older-than).
        #[arg(long, value_name = "DURATION")]
        max_snapshot_age: Option<String>,
        /// min-snapshots-to-keep: keep at least N of the branch's snapshots (default:
        /// expire-snapshots' --retain-last).
        #[arg(long, value_name = "N")]
        min_snapshots_to_keep: Option<i32>,
        /// Replace a branch of this name instead of refusing.
        #[arg(long)]
        replace: bool,
        /// Check and show the branch; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Drops a branch (not main; its snapshots are left to expire-snapshots).
    Drop {
        table: String,
        name: String,
        /// Check and show the branch to drop; commit nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Lists the branches (main included).
    List { table: String },
}

pub(crate) async fn catalog_cmd(g: &Global, cmd: CatalogCmd, out: &Out) -> Result<()> {
    match cmd {
        CatalogCmd::List => {
            let file = config::ConfigFile::discover(g.config.as_deref())?;
            let env = config::env_catalogs(std::env::vars());
            let mut names: Vec<String> = file.catalogs.keys().chain(env.keys()).cloned().collect();
            names.sort();
            names.dedup();
            let mut rows = Vec::new();
            for name in &names {
                let sel = config::CatalogSelection {
                    name: Some(name.clone()),
                    ..Default::default()
                };
                let row = match config::resolve(&sel, &file, &env) {
                    Ok(c) => {
                        json!({"name": name, "type": c.kind.as_str(), "properties": c.redacted()})
                    }
                    Err(e) => json!({"name": name, "error": config::mask(&e.to_string())}),
                };
                rows.push(row);
            }
            let source = file.path.as_ref().map(|p| p.display().to_string());
            out.result(
                &json!({"config_file": source, "default": file.default_catalog, "catalogs": rows}),
                || {
                    let mut text = format!(
                        "config file: {}\n",
                        source.clone().unwrap_or_else(|| "(none)".into())
                    );
                    for r in &rows {
                        let default = file.default_catalog.as_deref() == r["name"].as_str();
                        text.push_str(&format!(
                            "{}{} {} {}\n",
                            r["name"].as_str().unwrap_or(""),
                            if default { " (default)" } else { "" },
                            r["type"].as_str().unwrap_or("?"),
                            r["properties"]["uri"]
                                .as_str()
                                .or(r["error"].as_str())
                                .unwrap_or("")
                        ));
                    }
                    text.push_str("embedded: sqlite catalog in <warehouse>/catalog.db (when no catalog is named)");
                    text
                },
            );
            Ok(())
        }
        CatalogCmd::Show => {
            let config = catalog_config(g)?;
            let catalog = open(&config).await?;
            let namespaces = catalog.list_namespaces().await?;
            let props = config.redacted();
            out.result(
                &json!({"name": config.name, "type": config.kind.as_str(), "properties": props, "namespaces": namespaces.len()}),
                || {
                    let mut text = format!("{} ({})\n", config.name, config.kind.as_str());
                    for (k, v) in &props {
                        text.push_str(&format!("  {k} = {v}\n"));
                    }
                    text.push_str(&format!("connected: {} namespace(s)", namespaces.len()));
                    text
                },
            );
            Ok(())
        }
    }
}

pub(crate) async fn namespace_cmd(g: &Global, cmd: NamespaceCmd, out: &Out) -> Result<()> {
    let catalog = connect(g).await?;
    match cmd {
        NamespaceCmd::Create { namespace } => {
            catalog
                .create_namespace(&parse_namespace(&namespace)?)
                .await?;
            out.result(&json!({"created": namespace}), || {
                format!("created namespace {namespace}")
            });
        }
        NamespaceCmd::List => {
            let names = catalog.list_namespaces().await?;
            out.result(&json!(names), || names.join("\n"));
        }
    }
    Ok(())
}

pub(crate) async fn table_cmd(g: &Global, cmd: TableCmd, out: &Out) -> Result<()> {
    let catalog = connect(g).await?;
    match cmd {
        TableCmd::Create {
            table,
            schema,
            schema_file,
            partition,
            primary_key,
            properties,
            format_version,
        } => {
            let ident = parse_table_ident(&table)?;
            let mut kv = parse_kv(&properties)?;
            if let Some(v) = format_version {
                floe::catalog::tables::parse_format_version(&v)?;
                kv.insert("format-version".to_string(), v);
            }
            let schema = match (schema, schema_file) {
                (Some(s), _) => floe::table::schema::parse_schema(&s)?,
                (None, Some(f)) => {
                    let text = std::fs::read_to_string(&f)
                        .with_context(|| format!("cannot read schema file {}", f.display()))?;
                    floe::table::schema::parse_schema_json(&text)?
                }
                (None, None) => {
                    anyhow::bail!("give the columns with --schema '...' or --schema-file FILE")
                }
            };
            let schema = match primary_key.as_deref() {
                Some(k) => floe::table::schema::with_primary_key(schema, k)?,
                None => schema,
            };
            let spec = match partition.as_deref() {
                Some(p) if !p.trim().is_empty() => {
                    floe::table::schema::parse_partition(p, &schema)?
                }
                _ => floe::table::schema::unpartitioned(),
            };
            let t = catalog
                .create_table(NewTable {
                    ident,
                    schema,
                    partition_spec: spec,
                    sort_order: None,
                    // As `table set-property` checks an update (each value, and the
                    // compaction settings together).
                    properties: floe::operations::alter::validate_property_update(
                        &Default::default(),
                        &kv,
                        &[],
                    )?,
                })
                .await?;
            out.result(&output::describe_json(&t), || {
                format!("created table {table} at {}", t.metadata().location())
            });
        }
        TableCmd::List { namespace } => {
            let ns = namespace.as_deref().map(parse_namespace).transpose()?;
            let tables: Vec<String> = catalog
                .list_tables(ns.as_ref())
                .await?
                .iter()
                .map(floe::catalog::ident_string)
                .collect();
            // One name per line, whatever another tool put in a name.
            out.result(&json!(tables), || {
                tables
                    .iter()
                    .map(|t| crate::output::printable(t))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        TableCmd::Describe { table } => {
            let t = catalog.load_table(&parse_table_ident(&table)?).await?;
            out.result(&output::describe_json(&t), || output::describe_text(&t));
        }
        TableCmd::Drop {
            table,
            purge,
            delete_external_files,
        } => {
            let (bar, progress) = out.progress("files");
            let r = floe::operations::clean::purge::DropBuilder::new(
                &catalog,
                parse_table_ident(&table)?,
            )
            .with_purge(purge)
            .with_delete_external_files(delete_external_files)
            .with_progress(progress)
            .execute()
            .await;
            bar.finish_and_clear();
            let r = r?;
            let mut v = serde_json::to_value(&r)?;
            v["dropped"] = json!(table);
            out.result(&v, || {
                let mut s = format!("dropped {table}");
                if r.purged_by_server {
                    s.push_str(" (the catalog server purges its files)");
                } else if r.purged {
                    s.push_str(&format!(
                        " and deleted {} of its {} referenced file(s)",
                        r.deleted.deleted, r.referenced_files
                    ));
                    s.push_str(&output::kept_lines(&r.kept));
                    if r.deleted.failed > 0 {
                        s.push_str(&format!(
                            "\n  {} delete(s) failed: {}",
                            r.deleted.failed,
                            r.deleted.failures.join("; ")
                        ));
                    }
                }
                s
            });
        }
        TableCmd::EvolvePartition {
            table,
            spec,
            add,
            remove,
            dry_run,
        } => {
            let change =
                floe::operations::alter::partition::PartitionEvolution { spec, add, remove };
            let r = floe::operations::alter::partition::AlterPartitionBuilder::new(
                &catalog,
                parse_table_ident(&table)?,
            )
            .with_evolution(change)
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || {
                let show = |s: &str| {
                    if s.is_empty() {
                        "(unpartitioned)".to_string()
                    } else {
                        s.to_string()
                    }
                };
                let mut text = if !r.changed {
                    format!(
                        "{table} is already partitioned by {} (spec {}): nothing to commit",
                        show(&r.after),
                        r.spec_id
                    )
                } else {
                    format!(
                        "{}partition spec of {table}: {} (spec {}) -> {} (spec {})",
                        if r.dry_run { "would change " } else { "" },
                        show(&r.before),
                        r.spec_id_before,
                        show(&r.after),
                        r.spec_id
                    )
                };
                if r.changed && !r.dry_run {
                    text.push_str("\nnew writes use the new spec");
                }
                if r.files_in_other_specs > 0 {
                    text.push_str(&format!(
                        "\n{} live data file(s) are in older specs: `floe compact {table}` \
                         rewrites them into this one",
                        r.files_in_other_specs
                    ));
                }
                text
            });
        }
        TableCmd::EvolveSchema {
            table,
            add_column,
            rename_column,
            set_type,
            make_optional,
            drop_column,
            dry_run,
        } => {
            use floe::operations::alter::schema::SchemaChange;
            let mut changes = Vec::new();
            for c in &add_column {
                changes.push(SchemaChange::add(c)?);
            }
            for c in &rename_column {
                changes.push(SchemaChange::rename(c)?);
            }
            for c in &set_type {
                changes.push(SchemaChange::set_type(c)?);
            }
            for c in make_optional {
                changes.push(SchemaChange::MakeOptional { path: c });
            }
            for c in drop_column {
                changes.push(SchemaChange::DropColumn { path: c });
            }
            let r = floe::operations::alter::schema::AlterSchemaBuilder::new(
                &catalog,
                parse_table_ident(&table)?,
            )
            .with_changes(changes)
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || {
                let mut text = format!(
                    "{}schema of {table}: {} -> {}",
                    if r.dry_run { "would change " } else { "" },
                    r.schema_id_before,
                    r.schema_id
                );
                for line in &r.applied {
                    text.push_str(&format!("\n  {line}"));
                }
                text
            });
        }
        TableCmd::Upgrade {
            table,
            format_version,
            dry_run,
        } => {
            let r = floe::operations::alter::format::UpgradeFormatBuilder::new(
                &catalog,
                parse_table_ident(&table)?,
            )
            .with_format_version(format_version)
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || {
                let head = match (r.changed, r.dry_run) {
                    (false, _) => format!("{table} is format v{} already", r.to),
                    (true, true) => format!(
                        "would upgrade {table} from format v{} to v{}:",
                        r.from, r.to
                    ),
                    (true, false) => {
                        format!("upgraded {table} from format v{} to v{}:", r.from, r.to)
                    }
                };
                std::iter::once(head)
                    .chain(r.changes.iter().map(|c| format!("  - {c}")))
                    .collect::<Vec<_>>()
                    .join("\n")
            });
        }
        TableCmd::SetProperty {
            table,
            set,
            unset,
            dry_run,
        } => {
            if set.is_empty() && unset.is_empty() {
                anyhow::bail!("nothing to change: give NAME=VALUE pairs and/or --unset NAME");
            }
            let set = parse_kv(&set)?;
            let mut keys: Vec<&String> = set.keys().collect();
            keys.sort();
            let r = floe::operations::alter::AlterPropertiesBuilder::new(
                &catalog,
                parse_table_ident(&table)?,
            )
            .with_properties(set.clone())
            .with_unsets(unset.clone())
            .run(dry_run)
            .await?;
            out.result(&serde_json::to_value(&r)?, || {
                if !r.dry_run {
                    return format!("updated properties of {table}");
                }
                // The values as they would be stored (canonical form).
                let mut text = format!("would update properties of {table}:");
                for k in keys {
                    let v = r.properties.get(k).map(String::as_str).unwrap_or_default();
                    text.push_str(&format!("\n  set {k}={v}"));
                }
                for k in &unset {
                    text.push_str(&format!("\n  unset {k}"));
                }
                text
            });
        }
        TableCmd::Tag(cmd) => ref_cmd(&catalog, RefCmd::from(cmd), out).await?,
        TableCmd::Branch(cmd) => ref_cmd(&catalog, RefCmd::from(cmd), out).await?,
    }
    Ok(())
}

// --- snapshot references (tags and branches) ---

/// A tag or branch command, one shape for both.
enum RefCmd {
    Create {
        kind: RefKind,
        table: String,
        name: String,
        new: NewRef,
        retain: Option<String>,
        max_snapshot_age: Option<String>,
        dry_run: bool,
    },
    Drop {
        kind: RefKind,
        table: String,
        name: String,
        dry_run: bool,
    },
    List {
        kind: RefKind,
        table: String,
    },
}

impl From<TagCmd> for RefCmd {
    fn from(c: TagCmd) -> Self {
        let kind = RefKind::Tag;
        match c {
            TagCmd::Create {
                table,
                name,
                snapshot_id,
                retain,
                replace,
                dry_run,
            } => RefCmd::Create {
                kind,
                table,
                name,
                new: NewRef {
                    snapshot_id,
                    replace,
                    ..Default::default()
                },
                retain,
                max_snapshot_age: None,
                dry_run,
            },
            TagCmd::Drop {
                table,
                name,
                dry_run,
            } => RefCmd::Drop {
                kind,
                table,
                name,
                dry_run,
            },
            TagCmd::List { table } => RefCmd::List { kind, table },
        }
    }
}

impl From<BranchCmd> for RefCmd {
    fn from(c: BranchCmd) -> Self {
        let kind = RefKind::Branch;
        match c {
            BranchCmd::Create {
                table,
                name,
                snapshot_id,
                retain,
                max_snapshot_age,
                min_snapshots_to_keep,
                replace,
                dry_run,
            } => RefCmd::Create {
                kind,
                table,
                name,
                new: NewRef {
                    snapshot_id,
                    min_snapshots_to_keep,
                    replace,
                    ..Default::default()
                },
                retain,
                max_snapshot_age,
                dry_run,
            },
            BranchCmd::Drop {
                table,
                name,
                dry_run,
            } => RefCmd::Drop {
                kind,
                table,
                name,
                dry_run,
            },
            BranchCmd::List { table } => RefCmd::List { kind, table },
        }
    }
}

/// A duration flag in milliseconds, greater than zero.
fn duration_ms(option: &str, v: Option<String>) -> Result<Option<i64>> {
    let Some(v) = v else { return Ok(None) };
    let d = floe::base::properties::parse_duration(option, &v)?;
    if d.is_zero() {
        return Err(floe::Error::invalid_option(option, v, "must be greater than 0").into());
    }
    Ok(Some(d.as_millis().min(i64::MAX as u128) as i64))
}

async fn ref_cmd(catalog: &Catalog, cmd: RefCmd, out: &Out) -> Result<()> {
    match cmd {
        RefCmd::Create {
            kind,
            table,
            name,
            mut new,
            retain,
            max_snapshot_age,
            dry_run,
        } => {
            new.max_ref_age_ms = duration_ms("--retain", retain)?;
            new.max_snapshot_age_ms = duration_ms("--max-snapshot-age", max_snapshot_age)?;
            let c = CreateRefBuilder::new(catalog, parse_table_ident(&table)?)
                .with_ref(kind, name)
                .with_new_ref(new)
                .run(dry_run)
                .await?;
            out.result(&serde_json::to_value(&c)?, || {
                let verb = match (c.dry_run, c.action) {
                    (true, "created") => "would create",
                    (true, "replaced") => "would replace",
                    (_, action) => action,
                };
                format!(
                    "{verb} {} '{}' of {} at snapshot {}",
                    kind.as_str(),
                    c.reference.name,
                    c.table,
                    c.reference.snapshot_id
                )
            });
        }
        RefCmd::Drop {
            kind,
            table,
            name,
            dry_run,
        } => {
            let c = DropRefBuilder::new(catalog, parse_table_ident(&table)?)
                .with_ref(kind, name)
                .run(dry_run)
                .await?;
            out.result(&serde_json::to_value(&c)?, || {
                let (verb, names) = if c.dry_run {
                    ("would drop", "names")
                } else {
                    ("dropped", "named")
                };
                format!(
                    "{verb} {} '{}' of {} (it {names} snapshot {})",
                    kind.as_str(),
                    c.reference.name,
                    c.table,
                    c.reference.snapshot_id
                )
            });
        }
        RefCmd::List { kind, table } => {
            let t = catalog.load_table(&parse_table_ident(&table)?).await?;
            let refs: Vec<_> = floe::operations::refs::list_refs(&t)?
                .into_iter()
                .filter(|r| r.kind == kind)
                .collect();
            out.result(&serde_json::to_value(&refs)?, || {
                if refs.is_empty() {
                    format!("{table}: no {}s", kind.as_str())
                } else {
                    output::refs_text(&refs)
                }
            });
        }
    }
    Ok(())
}
