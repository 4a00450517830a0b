//! The fast way in for many NDJSON records at once (a stream's micro-batch, a file's chunk of
//! lines): each record is read member by member ([`ObjectReader`]), each key matched to its
//! column as it comes, and each value converted by the same [`json_value`] rule straight into
//! that column's cells. No member list, no per-record row, no hash of a key seen in the record
//! before: a record's keys usually come in the order of the record before it, so the column
//! each key position selected last time is checked first.
//!
//! It accepts exactly what [`super::json::decode_record`] accepts and stores the same values:
//! it uses the same grammar, token parsers and conversions, and on anything else (malformed
//! JSON, a duplicate key, a value that does not fit, a missing required column) it takes no
//! part of the record and asks [`super::json::decode_record`] for the reason, so every message
//! comes from one place.

use super::json::{decode_record, json_value};
use super::{BadValue, Cell, Columns};
use crate::records::ndjson::{Json, ObjectReader};

/// Records decoded into columns: one cell per kept record in each column, the index (into the
/// input) of every kept record, and the index and reason of every bad one.
pub(crate) struct ColumnCells<'a> {
    pub(crate) columns: Vec<Vec<Cell<'a>>>,
    pub(crate) kept: Vec<usize>,
    pub(crate) bad: Vec<(usize, BadValue)>,
}

impl<'a> ColumnCells<'a> {
    /// The kept records as rows (for the slow path that builds them one by one).
    pub(crate) fn rows(&self) -> Vec<Vec<Cell<'a>>> {
        (0..self.kept.len())
            .map(|r| self.columns.iter().map(|c| c[r].clone()).collect())
            .collect()
    }
}

/// What the key at one position of the previous record selected.
struct Hint {
    key: String,
    column: Option<usize>,
}

/// Decodes `payloads` (one NDJSON record each) into the cells of `cols`.
pub(crate) fn decode_columns<'a>(cols: &Columns, payloads: &[&'a [u8]]) -> ColumnCells<'a> {
    let n = cols.nodes.len();
    let mut out = ColumnCells {
        columns: (0..n).map(|_| Vec::with_capacity(payloads.len())).collect(),
        kept: Vec::with_capacity(payloads.len()),
        bad: Vec::new(),
    };
    let mut reader = Reader {
        cols,
        hints: Vec::new(),
        row: (0..n).map(|_| None).collect(),
    };
    for (i, p) in payloads.iter().enumerate() {
        if reader.read(p).is_ok() {
            for (column, cell) in out.columns.iter_mut().zip(reader.row.iter_mut()) {
                column.push(cell.take().unwrap_or(Cell::Null));
            }
            out.kept.push(i);
            continue;
        }
        reader.row.iter_mut().for_each(|c| *c = None);
        // The reason comes from the one decoder that words them; should it find the record
        // good after all, its cells are kept (the same values by construction).
        match decode_record(cols, p) {
            Err(b) => out.bad.push((i, b)),
            Ok(cells) => {
                for (column, cell) in out.columns.iter_mut().zip(cells) {
                    column.push(cell);
                }
                out.kept.push(i);
            }
        }
    }
    out
}

struct Reader<'c, 'a> {
    cols: &'c Columns,
    hints: Vec<Hint>,
    /// The record being read: a cell per column, `None` while its key has not been seen.
    row: Vec<Option<Cell<'a>>>,
}

impl<'a> Reader<'_, 'a> {
    /// The column `key`, the `k`-th key of its record, selects.
    fn resolve(&mut self, k: usize, key: &str) -> Option<usize> {
        if let Some(h) = self.hints.get(k) {
            if h.key == key {
                return h.column;
            }
        }
        let column = self.cols.matcher.resolve(key);
        let hint = Hint {
            key: key.to_string(),
            column,
        };
        match self.hints.get_mut(k) {
            Some(h) => *h = hint,
            None => self.hints.push(hint),
        }
        column
    }

    /// Reads one record into `row`; `Err` when it is not a good record (`row` then holds
    /// whatever was read, for the caller to clear).
    fn read(&mut self, payload: &'a [u8]) -> Result<(), ()> {
        let mut obj = ObjectReader::open(payload).ok_or(())?;
        let mut k = 0;
        while let Some(key) = obj.key()? {
            let column = self.resolve(k, &key);
            k += 1;
            let value = obj.value()?;
            let Some(c) = column else {
                continue;
            };
            if self.row[c].is_some() {
                return Err(()); // a duplicate key
            }
            self.row[c] = Some(convert(&self.cols.nodes[c], value)?);
        }
        if !obj.at_end() {
            return Err(());
        }
        // Missing keys are nulls, which a required column refuses.
        for (cell, node) in self.row.iter().zip(&self.cols.nodes) {
            if cell.is_none() && !node.field.is_nullable() {
                return Err(());
            }
        }
        Ok(())
    }
}

fn convert<'a>(node: &super::Node, value: Json<'a>) -> Result<Cell<'a>, ()> {
    json_value(node, value).map_err(drop)
}
