//! Schema evolution (`floe table evolve-schema`): the safe changes a growing stream needs,
//! committed as a new current schema (Iceberg spec, "Schema Evolution"). Columns are tracked by
//! id, so data files written before keep reading correctly:
//!
//! - **add column**: optional only, with a fresh id after `last-column-id` (a required column
//!   needs an `initial-default`, a format-version-3 feature); old files read it as null;
//! - **rename column**: the id stays, so old files read under the new name;
//! - **widen type**: the promotions the spec allows: `int -> long`, `float -> double`,
//!   `decimal(P, S) -> decimal(P', S)` with `P' > P`;
//! - **make optional**: a required column becomes optional (never the reverse);
//! - **drop column**: refused for a column any partition spec, the sort order or the
//!   identifier fields use (readers would then fail to bind older specs).
//!
//! A nested column is named by its path (`payload.device`; a list's element and a map's
//! value as `element` / `value`, or implied when the next name is the struct's field).
//!
//! [`AlterSchemaBuilder`] runs it on the operation contract: `plan()` applies the changes to
//! the current schema in memory and reports the result ([`EvolvedSchema`], what `--dry-run`
//! prints); `apply(plan)` commits it, requiring the schema id and last column id it was built
//! on (see [`crate::operations::alter`]).

use iceberg::spec::{
    ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType,
    TableMetadata, Type,
};
use iceberg::table::Table;
use iceberg::{TableIdent, TableRequirement};
use serde::Serialize;
use std::sync::Arc;

use crate::base::cost::{Cost, Costed};
use crate::base::error::{Error, Result};
use crate::catalog::Catalog;
use crate::commit::producer::PreparedCommit;
use crate::operations::{snapshot_of, Ctx, Operation, Planned};
use crate::table::ident_string;
use crate::table::schema::{parse_primitive, parse_schema};

/// One schema change, by column path.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaChange {
    AddColumn {
        path: String,
        ty: PrimitiveType,
        doc: Option<String>,
    },
    RenameColumn {
        path: String,
        to: String,
    },
    SetType {
        path: String,
        ty: PrimitiveType,
    },
    MakeOptional {
        path: String,
    },
    DropColumn {
        path: String,
    },
}

fn err(fragment: &str, reason: impl Into<String>) -> Error {
    Error::InvalidDefinition {
        what: "schema change",
        fragment: fragment.to_string(),
        reason: reason.into(),
    }
}

impl SchemaChange {
    /// `path type [comment '...']`, as `table create --schema` writes a column; `not null` is
    /// refused (see the module doc).
    pub fn add(def: &str) -> Result<Self> {
        let parsed = parse_schema(def)?;
        let [field] = parsed.as_struct().fields() else {
            return Err(err(def, "one column per --add-column"));
        };
        if field.required {
            return Err(err(
                def,
                "a required column cannot be added: rows already written have no value for it \
                 (initial-default needs format version 3); add it optional",
            ));
        }
        let Type::Primitive(ty) = field.field_type.as_ref() else {
            return Err(err(def, "expected a primitive type"));
        };
        Ok(Self::AddColumn {
            path: field.name.clone(),
            ty: ty.clone(),
            doc: field.doc.clone(),
        })
    }

    /// `old=new`: `new` is the column's new name (not a path).
    pub fn rename(def: &str) -> Result<Self> {
        let Some((from, to)) = def.split_once('=') else {
            return Err(err(def, "expected OLD=NEW"));
        };
        let (from, to) = (from.trim(), to.trim());
        if from.is_empty() || to.is_empty() || to.contains('.') {
            return Err(err(def, "expected OLD=NEW, NEW a column name without dots"));
        }
        Ok(Self::RenameColumn {
            path: from.to_string(),
            to: to.to_string(),
        })
    }

    /// `path type`: the new (wider) type.
    pub fn set_type(def: &str) -> Result<Self> {
        let def = def.trim();
        let Some((path, ty)) = def.split_once(char::is_whitespace) else {
            return Err(err(def, "expected 'column type', e.g. 'n bigint'"));
        };
        Ok(Self::SetType {
            path: path.to_string(),
            ty: parse_primitive(ty.trim())?,
        })
    }

    pub fn path(&self) -> &str {
        match self {
            Self::AddColumn { path, .. }
            | Self::RenameColumn { path, .. }
            | Self::SetType { path, .. }
            | Self::MakeOptional { path }
            | Self::DropColumn { path } => path,
        }
    }
}

/// The outcome of an evolution (or of its dry run).
#[derive(Debug, Clone, Serialize)]
pub struct EvolvedSchema {
    pub table: String,
    pub changed: bool,
    pub dry_run: bool,
    pub schema_id_before: i32,
    pub schema_id: i32,
    /// What each change did, in order.
    pub applied: Vec<String>,
    /// The new schema (Iceberg JSON).
    pub schema: Schema,
}

/// Whether the spec allows promoting `from` to `to` (formats 1 and 2).
fn promotable(from: &PrimitiveType, to: &PrimitiveType) -> bool {
    match (from, to) {
        (PrimitiveType::Int, PrimitiveType::Long) => true,
        (PrimitiveType::Float, PrimitiveType::Double) => true,
        (
            PrimitiveType::Decimal {
                precision: p1,
                scale: s1,
            },
            PrimitiveType::Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s1 == s2 && p2 > p1,
        _ => false,
    }
}

/// Ids of `field` and every field nested in it.
fn ids_in(field: &NestedField, out: &mut Vec<i32>) {
    out.push(field.id);
    match field.field_type.as_ref() {
        Type::Struct(s) => s.fields().iter().for_each(|f| ids_in(f, out)),
        Type::List(l) => ids_in(&l.element_field, out),
        Type::Map(m) => {
            ids_in(&m.key_field, out);
            ids_in(&m.value_field, out);
        }
        Type::Primitive(_) => {}
    }
}

type Op<'a> = &'a mut dyn FnMut(&mut Vec<NestedFieldRef>) -> Result<()>;

/// Runs `op` on the field list that holds the column at `parents` + leaf.
fn edit_container(
    mut fields: Vec<NestedFieldRef>,
    parents: &[&str],
    full: &str,
    op: Op,
) -> Result<Vec<NestedFieldRef>> {
    let Some((first, rest)) = parents.split_first() else {
        op(&mut fields)?;
        return Ok(fields);
    };
    let i = fields
        .iter()
        .position(|f| f.name == *first)
        .ok_or_else(|| err(full, format!("no column '{first}'")))?;
    let mut field = (*fields[i]).clone();
    field.field_type = Box::new(edit_in_type(*field.field_type, rest, full, op)?);
    fields[i] = Arc::new(field);
    Ok(fields)
}

fn edit_in_type(ty: Type, rest: &[&str], full: &str, op: Op) -> Result<Type> {
    match ty {
        Type::Struct(s) => Ok(Type::Struct(StructType::new(edit_container(
            s.fields().to_vec(),
            rest,
            full,
            op,
        )?))),
        Type::List(l) => {
            let rest = rest.strip_prefix(&["element"]).unwrap_or(rest);
            let mut element = (*l.element_field).clone();
            element.field_type = Box::new(edit_in_type(*element.field_type, rest, full, op)?);
            Ok(Type::List(ListType::new(Arc::new(element))))
        }
        Type::Map(m) => {
            let rest = rest.strip_prefix(&["value"]).unwrap_or(rest);
            let mut value = (*m.value_field).clone();
            value.field_type = Box::new(edit_in_type(*value.field_type, rest, full, op)?);
            Ok(Type::Map(MapType::new(
                m.key_field.clone(),
                Arc::new(value),
            )))
        }
        Type::Primitive(_) => Err(err(full, "a primitive column has no nested columns")),
    }
}

/// Columns a drop must not remove: partition sources (every spec), sort order sources and
/// identifier fields.
fn protected(md: &TableMetadata) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for spec in md.partition_specs_iter() {
        for f in spec.fields() {
            out.push((
                f.source_id,
                format!("partition field '{}' (spec {})", f.name, spec.spec_id()),
            ));
        }
    }
    for order in md.sort_orders_iter() {
        for f in &order.fields {
            out.push((f.source_id, format!("sort order {}", order.order_id)));
        }
    }
    for id in md.current_schema().identifier_field_ids() {
        out.push((id, "the identifier fields".to_string()));
    }
    out
}

/// Applies `changes` to the current schema, in order; returns the new schema and a line per
/// change.
pub fn evolve(md: &TableMetadata, changes: &[SchemaChange]) -> Result<(Schema, Vec<String>)> {
    if changes.is_empty() {
        return Err(err(
            "",
            "nothing to change: give --add-column, --rename-column, --set-type, --make-optional \
             or --drop-column",
        ));
    }
    let current = md.current_schema();
    let identifiers: Vec<i32> = current.identifier_field_ids().collect();
    let guarded = protected(md);
    let mut next_id = md.last_column_id().max(current.highest_field_id()) + 1;
    let mut fields: Vec<NestedFieldRef> = current.as_struct().fields().to_vec();
    let mut applied = Vec::new();
    for change in changes {
        let path = change.path().trim();
        let segments: Vec<&str> = path.split('.').collect();
        let (leaf, parents) = segments.split_last().expect("split yields one item");
        if leaf.is_empty() {
            return Err(err(path, "empty column name"));
        }
        let find = |v: &Vec<NestedFieldRef>| {
            v.iter()
                .position(|f| f.name == *leaf)
                .ok_or_else(|| err(path, format!("no column '{leaf}'")))
        };
        let mut line = String::new();
        let mut op = |v: &mut Vec<NestedFieldRef>| -> Result<()> {
            match change {
                SchemaChange::AddColumn { ty, doc, .. } => {
                    if v.iter().any(|f| f.name == *leaf) {
                        return Err(err(path, "the column already exists"));
                    }
                    let mut f = NestedField::optional(next_id, *leaf, Type::Primitive(ty.clone()));
                    if let Some(d) = doc {
                        f = f.with_doc(d);
                    }
                    line = format!("added column {path} {ty} (id {next_id})");
                    next_id += 1;
                    v.push(Arc::new(f));
                }
                SchemaChange::RenameColumn { to, .. } => {
                    let i = find(v)?;
                    if v.iter().any(|f| f.name == *to) {
                        return Err(err(path, format!("a column '{to}' already exists")));
                    }
                    let mut f = (*v[i]).clone();
                    line = format!("renamed column {path} to {to} (id {})", f.id);
                    f.name = to.clone();
                    v[i] = Arc::new(f);
                }
                SchemaChange::SetType { ty, .. } => {
                    let i = find(v)?;
                    let mut f = (*v[i]).clone();
                    let Type::Primitive(from) = f.field_type.as_ref() else {
                        return Err(err(path, "only primitive columns change type"));
                    };
                    if from == ty {
                        return Err(err(path, format!("the column is already {ty}")));
                    }
                    if !promotable(from, ty) {
                        return Err(err(
                            path,
                            format!(
                                "{from} cannot be promoted to {ty}: the allowed promotions are \
                                 int -> long, float -> double, decimal(P, S) -> decimal(P', S) \
                                 with P' > P"
                            ),
                        ));
                    }
                    line = format!("widened column {path} from {from} to {ty}");
                    f.field_type = Box::new(Type::Primitive(ty.clone()));
                    v[i] = Arc::new(f);
                }
                SchemaChange::MakeOptional { .. } => {
                    let i = find(v)?;
                    let mut f = (*v[i]).clone();
                    if identifiers.contains(&f.id) {
                        return Err(err(
                            path,
                            "an identifier field (primary key) column stays required",
                        ));
                    }
                    if !f.required {
                        return Err(err(path, "the column is already optional"));
                    }
                    line = format!("made column {path} optional");
                    f.required = false;
                    v[i] = Arc::new(f);
                }
                SchemaChange::DropColumn { .. } => {
                    let i = find(v)?;
                    let mut ids = Vec::new();
                    ids_in(&v[i], &mut ids);
                    if let Some((_, by)) = guarded.iter().find(|(id, _)| ids.contains(id)) {
                        return Err(err(
                            path,
                            format!("the column is used by {by} and cannot be dropped"),
                        ));
                    }
                    line = format!("dropped column {path}");
                    v.remove(i);
                }
            }
            Ok(())
        };
        fields = edit_container(fields, parents, path, &mut op)?;
        applied.push(line);
    }
    if fields.is_empty() {
        return Err(err("", "a schema needs at least one column"));
    }
    let schema = Schema::builder()
        .with_schema_id(current.schema_id())
        .with_fields(fields)
        .with_identifier_field_ids(identifiers)
        .build()
        .map_err(|e| err("", e.message().to_string()))?;
    Ok((schema, applied))
}

/// The change that makes `changes` of `md`'s current schema the new current schema: the
/// metadata it gives, its commit (requirements: the schema and last column id it was planned
/// on) and a line per change.
fn prepare(
    md: &TableMetadata,
    changes: &[SchemaChange],
) -> Result<(TableMetadata, PreparedCommit, Vec<String>)> {
    let (schema, applied) = evolve(md, changes)?;
    let (after, commit) = super::metadata_change(
        md,
        "schema change",
        vec![
            TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: md.current_schema_id(),
            },
            TableRequirement::LastAssignedFieldIdMatch {
                last_assigned_field_id: md.last_column_id(),
            },
        ],
        |b| b.add_current_schema(schema),
    )?;
    Ok((after, commit, applied))
}

impl Costed for EvolvedSchema {
    /// A metadata-only change: no data or manifest file is read, written or deleted.
    fn cost(&self) -> Cost {
        Cost::default()
    }
}

/// `table evolve-schema`: the changes of one table's schema, committed as one new current
/// schema (see the module doc).
#[derive(Clone)]
pub struct AlterSchemaBuilder {
    ctx: Ctx,
    changes: Vec<SchemaChange>,
}

impl AlterSchemaBuilder {
    /// An evolution of `ident`'s schema; give its changes with [`Self::with_change`].
    pub fn new(catalog: &Catalog, ident: TableIdent) -> Self {
        Self {
            ctx: Ctx::new(catalog, ident),
            changes: Vec::new(),
        }
    }

    /// Adds `change`, applied after the ones given before.
    pub fn with_change(mut self, change: SchemaChange) -> Self {
        self.changes.push(change);
        self
    }

    /// Adds `changes`, in order.
    pub fn with_changes(mut self, changes: impl IntoIterator<Item = SchemaChange>) -> Self {
        self.changes.extend(changes);
        self
    }
}

/// The table a schema evolution was planned on.
pub struct AlterSchemaWork {
    table: Table,
}

impl std::fmt::Debug for AlterSchemaWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AlterSchemaWork")
    }
}

/// A schema evolution's plan: the schema it would commit.
pub type AlterSchemaPlan = Planned<EvolvedSchema, AlterSchemaWork>;

impl Operation for AlterSchemaBuilder {
    type Plan = AlterSchemaPlan;
    type Metrics = EvolvedSchema;

    /// Applies the changes to the current schema in memory (a refusal names the column);
    /// commits nothing.
    async fn plan(&self) -> Result<AlterSchemaPlan> {
        let table = self.ctx.load().await?;
        let md = table.metadata();
        let (after, _, applied) = prepare(md, &self.changes)?;
        let schema = after.current_schema().as_ref().clone();
        let report = EvolvedSchema {
            table: ident_string(&self.ctx.ident),
            changed: after.current_schema_id() != md.current_schema_id(),
            dry_run: true,
            schema_id_before: md.current_schema_id(),
            schema_id: schema.schema_id(),
            applied,
            schema,
        };
        Ok(Planned::new(
            report,
            snapshot_of(&table),
            AlterSchemaWork { table },
        ))
    }

    /// Commits the new schema. An attempt that finds the schema changed since the plan applies
    /// the changes again to the schema it finds: refused, naming the column, when they no
    /// longer apply; nothing to commit when they are in place already.
    async fn apply(self, plan: AlterSchemaPlan) -> Result<EvolvedSchema> {
        let mut report = plan.report;
        report.dry_run = false;
        if !report.changed {
            return Ok(report);
        }
        let changes = &self.changes;
        let done = super::commit_metadata(&self.ctx, plan.work.table, |md| {
            let (after, commit, applied) = prepare(md, changes)?;
            let changed = after.current_schema_id() != md.current_schema_id();
            Ok((changed.then_some(commit), (md.current_schema_id(), applied)))
        })
        .await?;
        let (before_id, applied) = done.plan;
        let schema = done.table.metadata().current_schema().as_ref().clone();
        report.changed = done.changed;
        report.schema_id_before = before_id;
        report.schema_id = schema.schema_id();
        report.applied = applied;
        report.schema = schema;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata() -> TableMetadata {
        super::super::test_metadata(
            "id bigint not null, ts timestamp, n int, price decimal(9, 2), name string not null",
            "day(ts)",
        )
    }

    fn apply(md: &TableMetadata, changes: &[SchemaChange]) -> Result<TableMetadata> {
        Ok(prepare(md, changes)?.0)
    }

    #[test]
    fn safe_changes_keep_ids_and_add_fresh_ones() {
        let md = metadata();
        let n_id = md.current_schema().field_by_name("n").unwrap().id;
        let md2 = apply(
            &md,
            &[
                SchemaChange::add("device string comment 'sender'").unwrap(),
                SchemaChange::rename("name=label").unwrap(),
                SchemaChange::set_type("n bigint").unwrap(),
                SchemaChange::set_type("price decimal(12, 2)").unwrap(),
                SchemaChange::MakeOptional {
                    path: "label".into(),
                },
            ],
        )
        .unwrap();
        let s = md2.current_schema();
        assert_ne!(md2.current_schema_id(), md.current_schema_id());
        let device = s.field_by_name("device").unwrap();
        assert_eq!(device.id, md.last_column_id() + 1);
        assert!(!device.required);
        assert_eq!(device.doc.as_deref(), Some("sender"));
        assert!(s.field_by_name("name").is_none());
        assert!(!s.field_by_name("label").unwrap().required);
        let n = s.field_by_name("n").unwrap();
        assert_eq!(n.id, n_id);
        assert_eq!(*n.field_type, Type::Primitive(PrimitiveType::Long));
        assert_eq!(md2.last_column_id(), md.last_column_id() + 1);
        // The partition spec still binds (ts kept its id).
        assert_eq!(md2.default_partition_spec().fields()[0].name, "ts_day");
    }

    #[test]
    fn unsafe_changes_are_refused_with_the_reason() {
        let md = metadata();
        let e = |c: SchemaChange| apply(&md, &[c]).unwrap_err().to_string();
        assert!(e(SchemaChange::set_type("n string").unwrap()).contains("cannot be promoted"));
        assert!(e(SchemaChange::set_type("id int").unwrap()).contains("cannot be promoted"));
        assert!(e(SchemaChange::set_type("price decimal(12, 3)").unwrap())
            .contains("cannot be promoted"));
        assert!(
            e(SchemaChange::DropColumn { path: "ts".into() }).contains("partition field 'ts_day'")
        );
        assert!(e(SchemaChange::add("id string").unwrap()).contains("already exists"));
        assert!(e(SchemaChange::rename("n=name").unwrap()).contains("already exists"));
        assert!(e(SchemaChange::rename("nope=x").unwrap()).contains("no column 'nope'"));
        assert!(SchemaChange::add("x int not null")
            .unwrap_err()
            .to_string()
            .contains("required column cannot be added"));
        assert!(e(SchemaChange::MakeOptional { path: "ts".into() }).contains("already optional"));
        assert!(evolve(&md, &[])
            .unwrap_err()
            .to_string()
            .contains("nothing to change"));
        // A drop of an unused column works.
        let md2 = apply(&md, &[SchemaChange::DropColumn { path: "n".into() }]).unwrap();
        assert!(md2.current_schema().field_by_name("n").is_none());
    }

    #[test]
    fn nested_columns_are_named_by_path() {
        let md = metadata();
        let mut fields = md.current_schema().as_struct().fields().to_vec();
        let next = md.last_column_id() + 1;
        fields.push(Arc::new(NestedField::optional(
            next,
            "payload",
            Type::Struct(StructType::new(vec![Arc::new(NestedField::optional(
                next + 1,
                "a",
                Type::Primitive(PrimitiveType::Int),
            ))])),
        )));
        let schema = Schema::builder().with_fields(fields).build().unwrap();
        let (md, _) =
            super::super::metadata_change(&md, "test", vec![], |b| b.add_current_schema(schema))
                .unwrap();
        let md2 = apply(
            &md,
            &[
                SchemaChange::add("payload.b string").unwrap(),
                SchemaChange::set_type("payload.a bigint").unwrap(),
            ],
        )
        .unwrap();
        let s = md2.current_schema();
        assert_eq!(s.field_by_name("payload.b").unwrap().id, next + 2);
        assert_eq!(
            *s.field_by_name("payload.a").unwrap().field_type,
            Type::Primitive(PrimitiveType::Long)
        );
        let e = apply(&md, &[SchemaChange::add("id.x int").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no nested columns"), "{e}");
    }
}
