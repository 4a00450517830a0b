//! How a compaction orders the rows of a job before writing them (Iceberg's `sort` strategy of
//! `rewrite_data_files`): a sorted job is up to `sort-job-size-bytes` of a file group's input,
//! its rows are sorted as a whole and written in that order, so its output files hold
//! consecutive, disjoint ranges.
//!
//! - `--sort-by col [asc|desc] [nulls first|last], ...`: a linear sort. Without `--sort-by`,
//!   the table's default sort order is used when it has one (identity fields only).
//! - `--sort-by 'zorder(c1, c2, ...)'` (Spark's `sort_order => 'zorder(...)'`): a Z-order, so
//!   that a range filter on *any one* of the columns selects few files, where a linear sort
//!   helps its first column only. Each row's key interleaves the bits of its columns' values,
//!   most significant first (a Morton code).
//!
//!   Iceberg's Java Z-order interleaves the raw bytes of each value (strings by an 8-byte
//!   prefix), so a column whose values use few of their 64 bits (ids up to a million beside
//!   timestamps in microseconds), or strings sharing a prefix (`user_0001...`), contributes
//!   almost nothing to the order. Here each column's value is first replaced by its rank
//!   among the group's distinct values (compared whole, strings included), scaled to the same
//!   number of bits for every column: every column weighs the same, whatever its type, range
//!   or skew. Ranks are computed per job, which is the unit that is sorted.
//!   Types: integers, dates, timestamps, strings and decimals; others are refused by name.
//!
//! Memory: a job is sorted in memory (its rows, plus about 24 bytes per row for a Z-order), so
//! peak memory is about `max-concurrent-file-group-rewrites` x 3-5 x `sort-job-size-bytes`.

use arrow::array::{Array, ArrayRef, UInt32Array};
use arrow::compute::{
    concat_batches, lexsort_to_indices, take_record_batch, SortColumn, SortOptions,
};
use arrow::record_batch::RecordBatch;
use arrow_schema::{DataType, SchemaRef};
use iceberg::spec::{NullOrder, SortDirection, Transform};
use iceberg::table::Table;

use crate::base::error::{Error, Result};

/// One sort key: a column index in the table's Arrow schema and its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    pub column: usize,
    pub descending: bool,
    pub nulls_first: bool,
}

/// How a compaction orders the rows it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortSpec {
    /// By the first key, then the second, ...
    Linear(Vec<SortKey>),
    /// By the Z-order of these columns (indices in the table's Arrow schema).
    ZOrder(Vec<usize>),
}

/// Parses `--sort-by` against the table schema: `col [asc|desc] [nulls first|last], ...` or
/// `zorder(col, ...)`.
pub fn parse_sort_by(spec: &str, schema: &SchemaRef) -> Result<SortSpec> {
    let trimmed = spec.trim();
    let lower = trimmed.to_ascii_lowercase();
    if lower.starts_with("zorder") && trimmed.contains('(') {
        return parse_zorder(trimmed, schema).map(SortSpec::ZOrder);
    }
    if lower.contains("zorder(") {
        return Err(Error::invalid_option(
            "--sort-by",
            spec,
            "zorder(...) is the whole sort order: it cannot be combined with other columns",
        ));
    }
    parse_linear(spec, schema).map(SortSpec::Linear)
}

/// `zorder(c1, c2, ...)`: the column indices, each checked for a type Z-order can rank.
fn parse_zorder(spec: &str, schema: &SchemaRef) -> Result<Vec<usize>> {
    let bad = |why: &str| Error::invalid_option("--sort-by", spec, why.to_string());
    let open = spec
        .find('(')
        .ok_or_else(|| bad("expected zorder(col, ...)"))?;
    if !spec[..open].trim().eq_ignore_ascii_case("zorder") {
        return Err(bad("expected zorder(col, ...)"));
    }
    let inner = spec[open + 1..]
        .trim_end()
        .strip_suffix(')')
        .ok_or_else(|| bad("expected zorder(col, ...) with a closing parenthesis"))?;
    let mut columns = Vec::new();
    for name in inner.split(',').map(str::trim) {
        let name = name.trim_matches('`').trim_matches('"');
        if name.is_empty() {
            return Err(bad("expected zorder(col, ...): an empty column name"));
        }
        let column = schema
            .index_of(name)
            .map_err(|_| Error::invalid_option("--sort-by", name, "no such column in the table"))?;
        let ty = schema.field(column).data_type();
        if !zorderable(ty) {
            return Err(Error::invalid_option(
                "--sort-by",
                spec,
                format!(
                    "column '{name}' is {}: zorder takes integer, date, timestamp, string and \
                     decimal columns",
                    type_name(ty)
                ),
            ));
        }
        if columns.contains(&column) {
            return Err(bad(&format!("column '{name}' is given twice")));
        }
        columns.push(column);
    }
    Ok(columns)
}

fn zorderable(ty: &DataType) -> bool {
    matches!(
        ty,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Decimal128(_, _)
            | DataType::Decimal256(_, _)
    )
}

/// A type as Iceberg users know it (the Arrow type of the column otherwise).
fn type_name(ty: &DataType) -> String {
    match ty {
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Boolean => "boolean".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".into(),
        DataType::FixedSizeBinary(16) => "uuid or fixed[16]".into(),
        DataType::FixedSizeBinary(n) => format!("fixed[{n}]"),
        DataType::Time32(_) | DataType::Time64(_) => "time".into(),
        DataType::Struct(_) => "a struct".into(),
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(_, _) => {
            "a list".into()
        }
        DataType::Map(_, _) => "a map".into(),
        other => other.to_string(),
    }
}

fn parse_linear(spec: &str, schema: &SchemaRef) -> Result<Vec<SortKey>> {
    let mut keys = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let words: Vec<String> = part
            .split_whitespace()
            .map(|w| w.to_ascii_lowercase())
            .collect();
        let name = part.split_whitespace().next().unwrap_or_default();
        let column = schema
            .index_of(name)
            .map_err(|_| Error::invalid_option("--sort-by", part, "no such column in the table"))?;
        let descending = words.iter().any(|w| w == "desc");
        // Iceberg's default: nulls first when ascending, last when descending.
        let nulls_first = match words.iter().position(|w| w == "nulls") {
            Some(i) => match words.get(i + 1).map(String::as_str) {
                Some("first") => true,
                Some("last") => false,
                _ => {
                    return Err(Error::invalid_option(
                        "--sort-by",
                        part,
                        "expected NULLS FIRST or NULLS LAST",
                    ))
                }
            },
            None => !descending,
        };
        if words
            .iter()
            .skip(1)
            .any(|w| !matches!(w.as_str(), "asc" | "desc" | "nulls" | "first" | "last"))
        {
            return Err(Error::invalid_option(
                "--sort-by",
                part,
                "expected 'column [asc|desc] [nulls first|last]'",
            ));
        }
        keys.push(SortKey {
            column,
            descending,
            nulls_first,
        });
    }
    if keys.is_empty() {
        return Err(Error::invalid_option("--sort-by", spec, "no columns"));
    }
    Ok(keys)
}

/// The table's default sort order as keys, or `None` when unsorted.
pub fn table_sort_order(table: &Table, schema: &SchemaRef) -> Result<Option<SortSpec>> {
    let md = table.metadata();
    let order = md.default_sort_order();
    if order.fields.is_empty() {
        return Ok(None);
    }
    let iceberg_schema = md.current_schema();
    let mut keys = Vec::new();
    for f in &order.fields {
        let name = iceberg_schema.name_by_field_id(f.source_id).unwrap_or("?");
        if f.transform != Transform::Identity {
            return Err(Error::invalid_option(
                "table sort order",
                format!("{}({name})", f.transform),
                "only identity sort fields are supported; pass --sort-by",
            ));
        }
        let column = schema
            .index_of(name)
            .map_err(|_| Error::invalid_option("table sort order", name, "column not found"))?;
        keys.push(SortKey {
            column,
            descending: f.direction == SortDirection::Descending,
            nulls_first: f.null_order == NullOrder::First,
        });
    }
    Ok(Some(SortSpec::Linear(keys)))
}

/// Sorts batches (all in one schema) into one sorted batch.
pub fn sort_batches(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    order: &SortSpec,
) -> Result<RecordBatch> {
    let all = concat_batches(schema, batches)?;
    let keys = match order {
        SortSpec::Linear(keys) => keys,
        SortSpec::ZOrder(columns) => {
            let cols: Vec<ArrayRef> = columns.iter().map(|c| all.column(*c).clone()).collect();
            return Ok(take_record_batch(&all, &zorder_indices(&cols)?)?);
        }
    };
    let columns: Vec<SortColumn> = keys
        .iter()
        .map(|k| SortColumn {
            values: all.column(k.column).clone(),
            options: Some(SortOptions {
                descending: k.descending,
                nulls_first: k.nulls_first,
            }),
        })
        .collect();
    let indices = lexsort_to_indices(&columns, None)?;
    Ok(take_record_batch(&all, &indices)?)
}

/// The row order of a Z-order over `columns` (all of one length): each column's values become
/// their rank (nulls lowest) scaled to `bits` bits, and a row's key interleaves those bits,
/// most significant first, column by column. `bits` is what tells `n` rows apart, at most
/// 128 / columns (so a key is one `u128`). Equal keys keep their input order.
pub fn zorder_indices(columns: &[ArrayRef]) -> Result<UInt32Array> {
    let n = columns.first().map_or(0, |c| c.len());
    if columns.is_empty() || n == 0 {
        return Ok(UInt32Array::from(Vec::<u32>::new()));
    }
    let resolution = usize::BITS - n.leading_zeros();
    let bits = (128 / columns.len() as u32).min(64).min(resolution).max(1);
    let scaled: Vec<Vec<u64>> = columns
        .iter()
        .map(|c| scaled_ranks(c, bits))
        .collect::<Result<_>>()?;
    let mut keyed: Vec<(u128, u32)> = (0..n)
        .map(|row| {
            let mut z = 0u128;
            for b in (0..bits).rev() {
                for col in &scaled {
                    z = (z << 1) | u128::from((col[row] >> b) & 1);
                }
            }
            (z, row as u32)
        })
        .collect();
    keyed.sort_unstable();
    Ok(UInt32Array::from_iter_values(
        keyed.into_iter().map(|(_, i)| i),
    ))
}

/// Each value's rank (nulls first, then ascending) scaled to `[0, 2^bits)`, so that every
/// column spans the same range whatever its type, range or number of distinct values. Arrow's
/// rank kernel gives equal values the highest of their ranks, so a value's scaled rank is the
/// share of rows at or below it. It ranks every type [`zorderable`] admits (string views
/// through a cast).
fn scaled_ranks(column: &ArrayRef, bits: u32) -> Result<Vec<u64>> {
    use arrow::compute::kernels::rank::rank;
    let n = column.len() as u128;
    let ranks = match column.data_type() {
        DataType::Utf8View => rank(&arrow::compute::cast(column, &DataType::Utf8)?, None)?,
        _ => rank(column.as_ref(), None)?,
    };
    Ok(ranks
        .into_iter()
        .map(|r| ((u128::from(r.saturating_sub(1)) << bits) / n) as u64)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn sort_spec_parses_with_iceberg_null_defaults() {
        let SortSpec::Linear(keys) = parse_sort_by("name desc, id", &schema()).unwrap() else {
            panic!("a linear sort")
        };
        assert_eq!(
            keys[0],
            SortKey {
                column: 1,
                descending: true,
                nulls_first: false
            }
        );
        assert_eq!(
            keys[1],
            SortKey {
                column: 0,
                descending: false,
                nulls_first: true
            }
        );
        assert!(parse_sort_by("nope", &schema())
            .unwrap_err()
            .to_string()
            .contains("nope"));
        assert!(parse_sort_by("id sideways", &schema()).is_err());
    }

    #[test]
    fn batches_sort_across_batch_boundaries() {
        let s = schema();
        let b1 = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int64Array::from(vec![3, 1])),
                Arc::new(StringArray::from(vec![Some("c"), None])),
            ],
        )
        .unwrap();
        let b2 = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int64Array::from(vec![2])),
                Arc::new(StringArray::from(vec![Some("b")])),
            ],
        )
        .unwrap();
        let out = sort_batches(&s, &[b1, b2], &parse_sort_by("id", &s).unwrap()).unwrap();
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(ids.values(), &[1, 2, 3]);
        let out = sort_batches(
            &s,
            &[out],
            &parse_sort_by("name desc nulls last", &s).unwrap(),
        )
        .unwrap();
        let names = out
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(names.value(0), "c");
        assert!(names.is_null(2));
    }

    fn typed() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("v", DataType::Float64, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new(
                "ts",
                DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("d", DataType::Date32, true),
            Field::new("amount", DataType::Decimal128(38, 2), true),
        ]))
    }

    #[test]
    fn zorder_parses_the_supported_types_and_refuses_others_by_name() {
        let s = typed();
        assert_eq!(
            parse_sort_by("zorder(id, name, ts, d, amount)", &s).unwrap(),
            SortSpec::ZOrder(vec![0, 1, 4, 5, 6])
        );
        assert_eq!(
            parse_sort_by(" ZORDER ( ts ,id ) ", &s).unwrap(),
            SortSpec::ZOrder(vec![4, 0])
        );
        for (spec, names) in [
            ("zorder(id, v)", ["'v'", "double"]),
            ("zorder(ok)", ["'ok'", "boolean"]),
            ("zorder(id, nope)", ["nope", "no such column"]),
            ("zorder(id, id)", ["'id'", "twice"]),
            ("zorder(id", ["zorder(id", "parenthesis"]),
            ("zorder()", ["zorder()", "empty"]),
            ("id, zorder(ts)", ["zorder(ts)", "combined"]),
        ] {
            let e = parse_sort_by(spec, &s).unwrap_err().to_string();
            for n in names {
                assert!(e.contains(n), "{spec}: {e}");
            }
        }
    }

    /// Z-order on a 64 x 64 grid: every 8 x 8 block of (x, y) is one run of 64 consecutive
    /// rows (a Morton code's property), so a range on either column alone touches few runs,
    /// where a linear sort by x puts every y value in every run.
    #[test]
    fn zorder_keeps_squares_together_on_both_columns() {
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        // Inputs in a scrambled order, x spread far wider than y: ranks make them weigh alike.
        for i in 0..4096u64 {
            let j = (i * 2_654_435_761) % 4096;
            xs.push((j % 64) as i64 * 1_000_000_007);
            ys.push(Some(format!("user_{:04}", j / 64)));
        }
        let x: ArrayRef = Arc::new(Int64Array::from(xs.clone()));
        let y: ArrayRef = Arc::new(StringArray::from(ys.clone()));
        let order = zorder_indices(&[x, y]).unwrap();
        assert_eq!(order.len(), 4096);
        let mut seen = vec![false; 4096];
        for chunk in order.values().chunks(64) {
            let bx: std::collections::HashSet<i64> = chunk
                .iter()
                .map(|&i| xs[i as usize] / 1_000_000_007 / 8)
                .collect();
            let by: std::collections::HashSet<u64> = chunk
                .iter()
                .map(|&i| {
                    ys[i as usize].as_deref().unwrap()[5..]
                        .parse::<u64>()
                        .unwrap()
                        / 8
                })
                .collect();
            assert_eq!((bx.len(), by.len()), (1, 1), "one 8 x 8 block per run");
            for &i in chunk {
                assert!(!seen[i as usize], "each row once");
                seen[i as usize] = true;
            }
        }
    }

    #[test]
    fn zorder_sorts_nulls_and_ties_and_keeps_every_row() {
        let s = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ]));
        let b = RecordBatch::try_new(
            s.clone(),
            vec![
                Arc::new(Int64Array::from(vec![Some(5), None, Some(5), Some(1)])),
                Arc::new(StringArray::from(vec![
                    Some("b"),
                    Some("a"),
                    Some("b"),
                    None,
                ])),
            ],
        )
        .unwrap();
        let out = sort_batches(&s, &[b], &parse_sort_by("zorder(id, name)", &s).unwrap()).unwrap();
        let ids = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        // (null, a) and (1, null) both hold a lowest rank; (5, b) twice is the highest.
        assert_eq!(ids.len(), 4);
        assert_eq!(ids.value(2), 5);
        assert_eq!(ids.value(3), 5);
        assert!(zorder_indices(&[]).unwrap().is_empty());
    }
}
