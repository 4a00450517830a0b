//! Partition evolution (`floe table evolve-partition`): a new partition spec becomes the
//! table's default, as Iceberg's `UpdatePartitionSpec` commits it (spec, "Partition
//! Evolution"): data files keep the spec they were written with, readers plan each file by its
//! own spec, new writes use the new default, and `floe compact` rewrites files of older specs
//! into it.
//!
//! Field ids follow the spec's rule for v2: a field equal to one of an earlier spec (same
//! source column and transform) takes that field's id and name back; a new field takes the next
//! id after `last-partition-id`. Removed fields simply leave the new spec (v2; v1 tables would
//! need `void` placeholders, which floe does not write: it refuses them). Two time transforms
//! of one column (`hour(ts)` and `day(ts)`) are redundant and refused, as Iceberg does.
//!
//! [`AlterPartitionBuilder`] runs it on the operation contract: `plan()` builds the new spec
//! and reports it ([`EvolvedSpec`], what `--dry-run` prints); `apply(plan)` commits it,
//! requiring the default spec and last partition id it was built on (see [`crate::operations::alter`]).

use std::collections::HashMap;

use iceberg::spec::{
    FormatVersion, ManifestContentType, PartitionSpec, Schema, TableMetadata, TableMetadataBuilder,
    Transform, UnboundPartitionField, UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::{TableIdent, TableRequirement};
use serde::Serialize;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::commit::producer::PreparedCommit;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::table::ident_string;
use crate::table::schema::parse_partition;

/// What to change: a whole new spec (`spec`), or fields to `add` to and `remove` from the
/// current default spec. Fields are written as in `table create --partition`: `day(ts)`,
/// `bucket(16, id)`, `truncate(4, name)`, `identity(col)` or `col`, each optionally `AS name`;
/// a field to remove may also be named by its partition field name (`ts_hour`).
#[derive(Debug, Clone, Default)]
pub struct PartitionEvolution {
    pub spec: Option<String>,
    pub add: Vec<String>,
    pub remove: Vec<String>,
}

/// One field of a partition spec, for reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SpecField {
    pub field_id: i32,
    pub name: String,
    pub source: String,
    pub transform: String,
}

/// The outcome of an evolution (or of its dry run).
#[derive(Debug, Clone, Serialize)]
pub struct EvolvedSpec {
    pub table: String,
    /// False when the requested spec is the current one (nothing was committed).
    pub changed: bool,
    pub dry_run: bool,
    pub spec_id_before: i32,
    pub spec_id: i32,
    /// The specs as `table create --partition` writes them ("" = unpartitioned).
    pub before: String,
    pub after: String,
    pub fields: Vec<SpecField>,
    /// Live data files of the current snapshot written under another spec: `floe compact`
    /// rewrites them into this one.
    pub files_in_other_specs: u64,
}

/// `spec` as `table create --partition` writes it: `day(ts), bucket(16, id)`.
pub fn spec_text(spec: &PartitionSpec, schema: &Schema) -> String {
    spec.fields()
        .iter()
        .map(|f| {
            let source = schema
                .name_by_field_id(f.source_id)
                .map(str::to_string)
                .unwrap_or_else(|| format!("#{}", f.source_id));
            let expr = expr_text(&source, &f.transform);
            if f.name == default_name(&source, &f.transform) {
                expr
            } else {
                format!("{expr} AS {}", f.name)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `transform(column)` as floe parses it.
pub fn expr_text(source: &str, transform: &Transform) -> String {
    match transform {
        Transform::Identity => source.to_string(),
        Transform::Bucket(n) => format!("bucket({n}, {source})"),
        Transform::Truncate(w) => format!("truncate({w}, {source})"),
        Transform::Year => format!("year({source})"),
        Transform::Month => format!("month({source})"),
        Transform::Day => format!("day({source})"),
        Transform::Hour => format!("hour({source})"),
        Transform::Void => format!("void({source})"),
        Transform::Unknown => format!("unknown({source})"),
    }
}

/// The partition field name floe gives a field by default (Iceberg's conventions).
fn default_name(source: &str, transform: &Transform) -> String {
    match transform {
        Transform::Identity => source.to_string(),
        Transform::Bucket(_) => format!("{source}_bucket"),
        Transform::Truncate(_) => format!("{source}_trunc"),
        Transform::Year => format!("{source}_year"),
        Transform::Month => format!("{source}_month"),
        Transform::Day => format!("{source}_day"),
        Transform::Hour => format!("{source}_hour"),
        Transform::Void => format!("{source}_null"),
        Transform::Unknown => format!("{source}_unknown"),
    }
}

fn is_time(t: &Transform) -> bool {
    matches!(
        t,
        Transform::Year | Transform::Month | Transform::Day | Transform::Hour
    )
}

fn err(fragment: &str, reason: impl Into<String>) -> Error {
    Error::InvalidDefinition {
        what: "partition evolution",
        fragment: fragment.to_string(),
        reason: reason.into(),
    }
}

/// A parsed field, with whether its name was given (`AS name`) or defaulted.
struct Wanted {
    field: UnboundPartitionField,
    named: bool,
    text: String,
}

/// Parses one field expression (exactly one).
fn parse_one(expr: &str, schema: &Schema) -> Result<Wanted> {
    let spec = parse_partition(expr, schema)?;
    match spec.fields() {
        [f] => {
            let source = schema.name_by_field_id(f.source_id).unwrap_or_default();
            Ok(Wanted {
                named: f.name != default_name(source, &f.transform),
                field: f.clone(),
                text: expr.trim().to_string(),
            })
        }
        _ => Err(err(expr, "expected exactly one partition field")),
    }
}

/// The new spec's fields (unbound; ids of fields kept or brought back are set).
pub fn evolve_fields(
    md: &TableMetadata,
    change: &PartitionEvolution,
) -> Result<UnboundPartitionSpec> {
    if md.format_version() == FormatVersion::V1 {
        return Err(err(
            &ident_like(md),
            "the table is format version 1, where removed partition fields must stay as void \
             transforms; floe evolves v2 tables only",
        ));
    }
    let schema = md.current_schema();
    let current = md.default_partition_spec();
    let mut wanted: Vec<Wanted> = Vec::new();
    match &change.spec {
        Some(spec) => {
            if !change.add.is_empty() || !change.remove.is_empty() {
                return Err(err(
                    spec,
                    "give either a whole new spec or fields to add/remove, not both",
                ));
            }
            for f in parse_partition(spec, schema)?.fields() {
                let source = schema.name_by_field_id(f.source_id).unwrap_or_default();
                wanted.push(Wanted {
                    named: f.name != default_name(source, &f.transform),
                    text: expr_text(source, &f.transform),
                    field: f.clone(),
                });
            }
        }
        None => {
            if change.add.is_empty() && change.remove.is_empty() {
                return Err(err(
                    "",
                    "nothing to change: give --spec, or --add and/or --remove",
                ));
            }
            for f in current.fields() {
                wanted.push(Wanted {
                    field: f.clone().into_unbound(),
                    named: true,
                    text: f.name.clone(),
                });
            }
            for r in &change.remove {
                let by_name = wanted.iter().position(|w| w.field.name == r.trim());
                let by_expr = || -> Result<Option<usize>> {
                    let p = parse_one(r, schema)?;
                    Ok(wanted.iter().position(|w| {
                        w.field.source_id == p.field.source_id
                            && w.field.transform == p.field.transform
                    }))
                };
                let at = match by_name {
                    Some(i) => Some(i),
                    None => by_expr().ok().flatten(),
                };
                match at {
                    Some(i) => {
                        wanted.remove(i);
                    }
                    None => {
                        return Err(err(
                            r,
                            format!(
                                "not a field of the current spec ({})",
                                describe_current(current, schema)
                            ),
                        ))
                    }
                }
            }
            for a in &change.add {
                wanted.push(parse_one(a, schema)?);
            }
        }
    }
    check_fields(&wanted)?;
    // Fields of the current spec keep their id and name; fields of an earlier spec come back
    // with theirs (spec: a field id is reused for the same source and transform).
    let mut earlier: HashMap<(i32, Transform), (i32, String)> = HashMap::new();
    for spec in md.partition_specs_iter() {
        for f in spec.fields() {
            earlier
                .entry((f.source_id, f.transform))
                .or_insert((f.field_id, f.name.clone()));
        }
    }
    for f in current.fields() {
        earlier.insert((f.source_id, f.transform), (f.field_id, f.name.clone()));
    }
    // Every name any spec has used, with the field that used it.
    let mut used: HashMap<String, (i32, Transform)> = HashMap::new();
    for spec in md.partition_specs_iter() {
        for f in spec.fields() {
            used.insert(f.name.clone(), (f.source_id, f.transform));
        }
    }
    let mut fields = Vec::new();
    for w in wanted {
        let mut field = w.field;
        let key = (field.source_id, field.transform);
        if let Some((id, name)) = earlier.get(&key) {
            field.field_id = Some(*id);
            if !w.named {
                field.name = name.clone();
            }
        } else if used.get(&field.name).is_some_and(|k| *k != key) {
            // A new field must not take a name an earlier field used for other values (readers
            // that merge specs by name would mix them): Iceberg's own naming then adds the
            // width or count (`id_bucket_8`).
            let source = schema
                .name_by_field_id(field.source_id)
                .unwrap_or_default()
                .to_string();
            let alt = match field.transform {
                Transform::Bucket(n) => Some(format!("{source}_bucket_{n}")),
                Transform::Truncate(w) => Some(format!("{source}_trunc_{w}")),
                _ => None,
            };
            match alt {
                Some(alt) if !w.named && !used.contains_key(&alt) => field.name = alt,
                _ => {
                    return Err(err(
                        &w.text,
                        format!(
                            "partition field name '{}' was used by an earlier field with other \
                             values; name this one with '{} AS other_name'",
                            field.name, w.text
                        ),
                    ))
                }
            }
        }
        fields.push(field);
    }
    let spec = UnboundPartitionSpec::builder()
        .add_partition_fields(fields)
        .map_err(|e| err(&change.spec.clone().unwrap_or_default(), e.to_string()))?
        .build();
    Ok(spec)
}

/// Refuses duplicate and redundant fields (two time transforms of one column).
fn check_fields(wanted: &[Wanted]) -> Result<()> {
    for (i, a) in wanted.iter().enumerate() {
        for b in &wanted[..i] {
            if a.field.source_id != b.field.source_id {
                continue;
            }
            if a.field.transform == b.field.transform {
                return Err(err(&a.text, "the spec already has this field"));
            }
            if is_time(&a.field.transform) && is_time(&b.field.transform) {
                return Err(err(
                    &a.text,
                    format!(
                        "redundant with {}: one time transform per column (remove the other \
                         field, or give the whole new spec with --spec)",
                        b.text
                    ),
                ));
            }
        }
        if a.field.name.is_empty() {
            return Err(err(&a.text, "empty partition field name"));
        }
        if wanted[..i].iter().any(|b| b.field.name == a.field.name) {
            return Err(err(&a.text, format!("two fields named '{}'", a.field.name)));
        }
    }
    Ok(())
}

fn describe_current(spec: &PartitionSpec, schema: &Schema) -> String {
    if spec.is_unpartitioned() {
        return "the table is unpartitioned".into();
    }
    spec.fields()
        .iter()
        .map(|f| {
            let source = schema.name_by_field_id(f.source_id).unwrap_or("?");
            format!("{} = {}", f.name, expr_text(source, &f.transform))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ident_like(md: &TableMetadata) -> String {
    md.location().to_string()
}

fn spec_fields(spec: &PartitionSpec, schema: &Schema) -> Vec<SpecField> {
    spec.fields()
        .iter()
        .map(|f| SpecField {
            field_id: f.field_id,
            name: f.name.clone(),
            source: schema
                .name_by_field_id(f.source_id)
                .unwrap_or("?")
                .to_string(),
            transform: f.transform.to_string(),
        })
        .collect()
}

/// Live data files of the current snapshot whose spec is not `spec_id` (from the manifest
/// list: each manifest has one spec).
async fn files_in_other_specs(table: &Table, spec_id: i32) -> Result<u64> {
    let manifests = crate::table::manifests::current_manifests(table).await?;
    Ok(manifests
        .iter()
        .filter(|m| m.content == ManifestContentType::Data && m.partition_spec_id != spec_id)
        .map(|m| {
            m.added_files_count.unwrap_or(0) as u64 + m.existing_files_count.unwrap_or(0) as u64
        })
        .sum())
}

/// The change that makes the spec `change` asks for the default of `md`: the metadata it gives
/// and its commit (requirements: the default spec and last partition id it was planned on).
fn prepare(
    md: &TableMetadata,
    change: &PartitionEvolution,
) -> Result<(TableMetadata, PreparedCommit)> {
    let spec = evolve_fields(md, change)?;
    super::metadata_change(
        md,
        "partition evolution",
        vec![
            TableRequirement::DefaultSpecIdMatch {
                default_spec_id: md.default_partition_spec_id(),
            },
            TableRequirement::LastAssignedPartitionIdMatch {
                last_assigned_partition_id: md.last_partition_id(),
            },
        ],
        |b| {
            b.add_partition_spec(spec)?
                .set_default_partition_spec(TableMetadataBuilder::LAST_ADDED)
        },
    )
}

/// The default spec of `md`: its id and its text.
fn default_spec(md: &TableMetadata) -> (i32, String) {
    (
        md.default_partition_spec_id(),
        spec_text(md.default_partition_spec(), md.current_schema()),
    )
}

impl Costed for EvolvedSpec {
    /// A metadata-only change: no data or manifest file is written or deleted (the files in
    /// older specs are `floe compact`'s work).
    fn cost(&self) -> Cost {
        Cost::default()
    }
}

/// `table evolve-partition`: a new default partition spec for one table (see the module doc).
#[derive(Clone)]
pub struct AlterPartitionBuilder {
    ctx: Ctx,
    change: PartitionEvolution,
}

impl AlterPartitionBuilder {
    /// An evolution of `ident`'s partition spec; give the new spec, or fields to add and
    /// remove.
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            change: PartitionEvolution::default(),
        }
    }

    /// The whole new spec, as `table create --partition` writes it ('' = unpartitioned).
    pub fn with_spec(mut self, spec: impl Into<String>) -> Self {
        self.change.spec = Some(spec.into());
        self
    }

    /// A field to add to the current spec: `day(ts)`, `bucket(8, id)`, `col`, `expr AS name`.
    pub fn with_add_field(mut self, field: impl Into<String>) -> Self {
        self.change.add.push(field.into());
        self
    }

    /// A field to remove from the current spec, by expression (`hour(ts)`) or name
    /// (`ts_hour`).
    pub fn with_remove_field(mut self, field: impl Into<String>) -> Self {
        self.change.remove.push(field.into());
        self
    }

    /// The whole change at once, in place of what was given before.
    pub fn with_evolution(mut self, change: PartitionEvolution) -> Self {
        self.change = change;
        self
    }
}

/// The table a partition evolution was planned on.
pub struct AlterPartitionWork {
    table: Table,
}

impl std::fmt::Debug for AlterPartitionWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AlterPartitionWork")
    }
}

/// A partition evolution's plan: the spec it would commit.
pub type AlterPartitionPlan = Planned<EvolvedSpec, AlterPartitionWork>;

/// The report on `spec_md`'s default spec replacing spec `before`, with the live files of
/// `table` in other specs.
async fn report(
    name: String,
    (before_id, before): (i32, String),
    spec_md: &TableMetadata,
    table: &Table,
    dry_run: bool,
) -> Result<EvolvedSpec> {
    let spec = spec_md.default_partition_spec();
    let schema = spec_md.current_schema();
    Ok(EvolvedSpec {
        table: name,
        changed: spec.spec_id() != before_id,
        dry_run,
        spec_id_before: before_id,
        spec_id: spec.spec_id(),
        before,
        after: spec_text(spec, schema),
        fields: spec_fields(spec, schema),
        files_in_other_specs: files_in_other_specs(table, spec.spec_id()).await?,
    })
}

impl Operation for AlterPartitionBuilder {
    type Plan = AlterPartitionPlan;
    type Metrics = EvolvedSpec;

    /// Builds the new spec on the table's metadata (a refusal names the field) and counts the
    /// live files in other specs; commits nothing.
    async fn plan(&self) -> Result<AlterPartitionPlan> {
        let table = self.ctx.load().await?;
        let md = table.metadata();
        let (after, _) = prepare(md, &self.change)?;
        let name = ident_string(&self.ctx.ident);
        let report = report(name, default_spec(md), &after, &table, true).await?;
        Ok(Planned::new(
            report,
            snapshot_of(&table),
            AlterPartitionWork { table },
        ))
    }

    /// Commits the new default spec. An attempt that finds the spec changed since the plan
    /// builds the new spec again from the one it finds: refused, naming the field, when the
    /// change no longer applies; nothing to commit when it is in place already.
    async fn apply(self, plan: AlterPartitionPlan) -> Result<EvolvedSpec> {
        let planned = plan.report;
        if !planned.changed {
            return Ok(EvolvedSpec {
                dry_run: false,
                ..planned
            });
        }
        let change = &self.change;
        let done = super::commit_metadata(&self.ctx, plan.work.table, |md| {
            let (after, commit) = prepare(md, change)?;
            let changed = after.default_partition_spec_id() != md.default_partition_spec_id();
            Ok((changed.then_some(commit), default_spec(md)))
        })
        .await?;
        let md = done.table.metadata();
        report(planned.table, done.plan, md, &done.table, false).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(partition: &str) -> TableMetadata {
        super::super::test_metadata("id bigint not null, ts timestamp, name string", partition)
    }

    fn evolve(md: &TableMetadata, change: PartitionEvolution) -> Result<TableMetadata> {
        Ok(prepare(md, &change)?.0)
    }

    fn text(md: &TableMetadata) -> String {
        spec_text(md.default_partition_spec(), md.current_schema())
    }

    fn whole(spec: &str) -> PartitionEvolution {
        PartitionEvolution {
            spec: Some(spec.into()),
            ..Default::default()
        }
    }

    #[test]
    fn hour_to_day_gets_a_new_field_id_and_brings_old_ids_back() {
        let md = metadata("hour(ts), bucket(16, id)");
        let hour_id = md.default_partition_spec().fields()[0].field_id;
        let bucket_id = md.default_partition_spec().fields()[1].field_id;
        let md2 = evolve(&md, whole("day(ts), bucket(16, id)")).unwrap();
        assert_eq!(text(&md2), "day(ts), bucket(16, id)");
        let f = md2.default_partition_spec().fields();
        assert!(
            f[0].field_id > bucket_id.max(hour_id),
            "new id for day: {f:?}"
        );
        assert_eq!(f[1].field_id, bucket_id, "bucket keeps its id");
        assert_eq!(md2.partition_specs_iter().len(), 2);
        // Back to hour: the old field id and spec return.
        let md3 = evolve(&md2, whole("hour(ts), bucket(16, id)")).unwrap();
        assert_eq!(md3.default_partition_spec().fields()[0].field_id, hour_id);
        assert_eq!(
            md3.default_partition_spec_id(),
            md.default_partition_spec_id()
        );
    }

    #[test]
    fn add_and_remove_by_expression_or_name() {
        let md = metadata("hour(ts), bucket(16, id)");
        let md2 = evolve(
            &md,
            PartitionEvolution {
                remove: vec!["id_bucket".into(), "hour(ts)".into()],
                add: vec!["day(ts)".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(text(&md2), "day(ts)");
        let md3 = evolve(
            &md2,
            PartitionEvolution {
                remove: vec!["ts_day".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert!(md3.default_partition_spec().is_unpartitioned());
        let md4 = evolve(&metadata(""), whole("truncate(4, name) AS prefix")).unwrap();
        assert_eq!(text(&md4), "truncate(4, name) AS prefix");
    }

    #[test]
    fn refusals_name_the_field_and_the_reason() {
        let md = metadata("hour(ts)");
        let e = |c| evolve(&md, c).unwrap_err().to_string();
        let r = e(PartitionEvolution {
            add: vec!["day(ts)".into()],
            ..Default::default()
        });
        assert!(r.contains("redundant with ts_hour"), "{r}");
        let r = e(PartitionEvolution {
            add: vec!["hour(ts)".into()],
            ..Default::default()
        });
        assert!(r.contains("already has this field"), "{r}");
        let r = e(PartitionEvolution {
            remove: vec!["month(ts)".into()],
            ..Default::default()
        });
        assert!(
            r.contains("not a field of the current spec (ts_hour = hour(ts))"),
            "{r}"
        );
        let r = e(PartitionEvolution {
            add: vec!["day(nope)".into()],
            ..Default::default()
        });
        assert!(r.contains("no column 'nope'"), "{r}");
        let r = e(PartitionEvolution::default());
        assert!(r.contains("nothing to change"), "{r}");
        let r = e(PartitionEvolution {
            spec: Some("day(ts)".into()),
            add: vec!["id".into()],
            ..Default::default()
        });
        assert!(r.contains("not both"), "{r}");
    }

    #[test]
    fn a_new_bucket_count_does_not_take_the_old_fields_name() {
        let md = metadata("bucket(16, id)");
        let md2 = evolve(&md, whole("bucket(8, id)")).unwrap();
        let f = &md2.default_partition_spec().fields()[0];
        assert_eq!(f.name, "id_bucket_8");
        assert_ne!(f.field_id, md.default_partition_spec().fields()[0].field_id);
        assert_eq!(text(&md2), "bucket(8, id) AS id_bucket_8");
    }

    #[test]
    fn the_same_spec_changes_nothing() {
        let md = metadata("day(ts)");
        let md2 = evolve(&md, whole("day(ts)")).unwrap();
        assert_eq!(
            md2.default_partition_spec_id(),
            md.default_partition_spec_id()
        );
        assert_eq!(md2.partition_specs_iter().len(), 1);
    }
}
