//! `floe delete --where`: a SQL boolean expression over the table's columns (anything
//! DataFusion evaluates row by row: comparisons, `AND`/`OR`/`NOT`, `IN`, `LIKE`, `IS NULL`,
//! arithmetic, scalar functions), as in `DELETE FROM t WHERE ...`. A row is deleted when the
//! expression is TRUE; FALSE and NULL keep it (SQL's rule).
//!
//! The conjuncts that are in compaction's `--where` grammar (`col OP literal`, `IS [NOT]
//! NULL`, `IN (...)`) prune data files by partition values and column metrics before any is
//! read (none when an `OR` joins the top level); otherwise every live data file is read.
//! Pruning never decides a row.
//!
//! Time functions (`now()`, `current_timestamp`, `current_date`, `date_trunc('day', now())`)
//! are folded to constants once per statement, with one clock reading ([`RowFilter::now`]):
//! pruning, the row filter and every commit attempt see the same instant, and the snapshot
//! records it (`floe.delete.now`) so the delete can be reproduced.

use std::sync::Arc;

use arrow::array::{AsArray, BooleanArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow_schema::SchemaRef;
use chrono::{DateTime, Utc};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::DFSchema;
use datafusion::logical_expr::{Expr, Volatility};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::SessionContext;
use iceberg::expr::Predicate;
use iceberg::table::Table;

use crate::base::error::{Error, Result};
use crate::operations::change::locate::Matcher;

/// A parsed `--where`, ready to evaluate on batches of the columns it reads.
pub struct RowFilter {
    /// The text as given.
    pub sql: String,
    /// Field ids of the columns the expression reads, in table schema order.
    pub field_ids: Vec<i32>,
    /// Their indices in the table's Arrow schema.
    indices: Vec<usize>,
    /// The Arrow schema of those columns (what [`RowFilter::eval`] takes).
    schema: SchemaRef,
    expr: Arc<dyn PhysicalExpr>,
    /// File pruning, when the text is in compaction's `--where` grammar.
    pub prune: Option<Predicate>,
    /// The instant the statement's time functions mean.
    pub now: DateTime<Utc>,
    /// The text calls a time function (`now()`, `current_date`...): [`RowFilter::now`]
    /// decides which rows match.
    pub uses_now: bool,
}

fn bad(sql: &str, reason: impl Into<String>) -> Error {
    Error::invalid_option("--where", sql, reason)
}

impl RowFilter {
    /// Parses `sql` against the table's current schema, its time functions meaning now.
    pub fn parse(table: &Table, sql: &str) -> Result<Self> {
        Self::parse_at(
            table,
            sql,
            crate::operations::compact::filter::statement_now(),
        )
    }

    /// Parses `sql` against the table's current schema, its time functions meaning `now`.
    pub fn parse_at(table: &Table, sql: &str, now: DateTime<Utc>) -> Result<Self> {
        if sql.trim().is_empty() {
            return Err(bad(
                sql,
                "empty filter (to delete every row, say --where true)",
            ));
        }
        let schema = table.metadata().current_schema();
        let arrow = Arc::new(iceberg::arrow::schema_to_arrow_schema(schema)?);
        let full = DFSchema::try_from(arrow.as_ref().clone())?;
        let ctx = SessionContext::new();
        let expr = ctx
            .parse_sql_expr(sql, &full)
            .map_err(|e| bad(sql, e.strip_backtrace()))?;
        let mut indices = Vec::new();
        for c in expr.column_refs() {
            let i = full
                .index_of_column(c)
                .map_err(|_| bad(sql, format!("no column {} in the table", c.name)))?;
            indices.push(i);
        }
        if indices.is_empty() {
            // A constant (`true`): still read one column, to count rows.
            indices.push(0);
        }
        indices.sort_unstable();
        indices.dedup();
        let projected = Arc::new(arrow.project(&indices)?);
        let field_ids = indices
            .iter()
            .map(|&i| schema.as_struct().fields()[i].id)
            .collect();
        let uses_now = expr.exists(|e| {
            Ok(matches!(e, Expr::ScalarFunction(f)
                if f.func.signature().volatility == Volatility::Stable))
        })?;
        let df = DFSchema::try_from(projected.as_ref().clone())?;
        let expr =
            crate::operations::compact::filter::fold_expr_in(expr, Arc::new(df.clone()), now)
                .map_err(|e| bad(sql, e.to_string()))?;
        let phys = ctx
            .create_physical_expr(expr, &df)
            .map_err(|e| bad(sql, e.strip_backtrace()))?;
        match phys.data_type(&projected)? {
            DataType::Boolean | DataType::Null => {}
            other => {
                return Err(bad(
                    sql,
                    format!("is not a condition: it evaluates to {other}, not a boolean"),
                ))
            }
        }
        let prune = crate::operations::compact::filter::prune_conjuncts(sql, schema, now);
        Ok(Self {
            sql: sql.to_string(),
            field_ids,
            indices,
            schema: projected,
            expr: phys,
            prune,
            now,
            uses_now,
        })
    }

    /// TRUE rows of `batch`, a batch of the columns [`RowFilter::field_ids`] in that order.
    pub fn eval(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        let batch = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())?;
        let value = self.expr.evaluate(&batch)?.into_array(batch.num_rows())?;
        match value.as_boolean_opt() {
            Some(b) => Ok(b.clone()),
            // A NULL constant: no row is TRUE.
            None => Ok(BooleanArray::from(vec![false; batch.num_rows()])),
        }
    }

    /// TRUE rows of `batch`, a batch of every column of the table's current schema.
    pub fn eval_full(&self, batch: &RecordBatch) -> Result<BooleanArray> {
        self.eval(&batch.project(&self.indices)?)
    }

    /// The filter as a [`Matcher`] for [`crate::operations::change::locate::locate`].
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        let me = self.clone();
        Arc::new(move |b| me.eval(b))
    }
}
