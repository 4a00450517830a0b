//! The fast way in for many NDJSON records at once (a stream's micro-batch, a file's chunk of
//! lines): each record is read member by member ([`ObjectReader`]), each key matched to its
//! column as it comes, and each value converted by the same [`json_value`] rule. No member
//! list, no hash of a key seen in the record before: a record's keys usually come in the order
//! of the record before it, so the column each key position selected last time is checked
//! first (on the key's raw bytes).
//!
//! A good record's values go straight into typed column buffers ([`Sink`]): a top-level
//! column of numbers, booleans, dates, times, timestamps or strings becomes its Arrow buffers
//! as the records are read, with no cell per value kept in between and no second pass. Other
//! columns (lists, structs, maps, binary) keep their cells and are built by [`super::build()`].
//!
//! It accepts exactly what [`super::json::decode_record`] accepts and stores the same values:
//! it uses the same grammar, token parsers and conversions, and on anything else (malformed
//! JSON, a duplicate key, a value that does not fit, a missing required column) it takes no
//! part of the record and asks [`super::json::decode_record`] for the reason, so every message
//! comes from one place.

use arrow::array::ArrayRef;

use super::build::Sink;
use super::json::{decode_record, json_value};
use super::number::{number_to, Number};
use super::text::text_to;
use super::{BadValue, Cell, Columns, Kind, Leaf, Node};
use crate::base::error::Result;
use crate::records::ndjson::{Json, ObjectReader};

/// Records decoded into columns: one value per kept record in each column, the index (into
/// the input) of every kept record, and the index and reason of every bad one.
pub(crate) struct ColumnCells<'a> {
    pub(crate) columns: Vec<Sink<'a>>,
    pub(crate) kept: Vec<usize>,
    pub(crate) bad: Vec<(usize, BadValue)>,
}

/// Appends one record (a cell per column, `None` for null) to the sinks and clears `row`: all
/// of it, or, when a cell does not fit its column (see [`Sink::fits`]), none of it and the
/// reason.
fn push_row<'a>(
    sinks: &mut [Sink<'a>],
    nodes: &[Node],
    row: &mut [Option<Cell<'a>>],
) -> std::result::Result<(), BadValue> {
    for ((sink, node), cell) in sinks.iter().zip(nodes).zip(row.iter()) {
        let cell = cell.as_ref().unwrap_or(&Cell::Null);
        if !sink.fits(cell) {
            let bad = BadValue {
                column: node.field.name().clone(),
                value: format!("{cell:?}"),
                reason: format!("cannot be stored in a {} column", node.type_name()),
            };
            row.iter_mut().for_each(|c| *c = None);
            return Err(bad);
        }
    }
    for (sink, cell) in sinks.iter_mut().zip(row) {
        sink.push(cell.take().unwrap_or(Cell::Null));
    }
    Ok(())
}

impl ColumnCells<'_> {
    /// The kept records' columns as arrays, in the order of `cols`.
    pub(crate) fn finish(self, cols: &Columns) -> Result<Vec<ArrayRef>> {
        self.columns
            .into_iter()
            .zip(&cols.nodes)
            .map(|(sink, node)| sink.finish(node))
            .collect()
    }
}

/// Records of a run decoded before its string columns are sized for the whole run
/// ([`Sink::presize`]).
const PRESIZE_AFTER: usize = 64;

/// What the key at one position of the previous record selected.
struct Hint {
    key: String,
    column: Option<usize>,
}

/// Decodes `payloads` (one NDJSON record each) into the columns of `cols`.
pub(crate) fn decode_columns<'a>(cols: &Columns, payloads: &[&'a [u8]]) -> ColumnCells<'a> {
    let n = cols.nodes.len();
    let mut out = ColumnCells {
        columns: cols
            .nodes
            .iter()
            .map(|node| Sink::new(node, payloads.len()))
            .collect(),
        kept: Vec::with_capacity(payloads.len()),
        bad: Vec::new(),
    };
    let mut reader = Reader {
        cols,
        hints: Vec::new(),
        row: (0..n).map(|_| None).collect(),
    };
    for (i, p) in payloads.iter().enumerate() {
        if i == PRESIZE_AFTER && payloads.len() >= 4 * PRESIZE_AFTER {
            let rows = payloads.len();
            out.columns.iter_mut().for_each(|s| s.presize(rows));
        }
        if reader.read(p).is_ok() {
            match push_row(&mut out.columns, &cols.nodes, &mut reader.row) {
                Ok(()) => out.kept.push(i),
                Err(b) => out.bad.push((i, b)),
            }
            continue;
        }
        reader.row.iter_mut().for_each(|c| *c = None);
        // The reason comes from the one decoder that words them; should it find the record
        // good after all, its cells are kept (the same values by construction).
        match decode_record(cols, p) {
            Err(b) => out.bad.push((i, b)),
            Ok(cells) => {
                let mut row: Vec<Option<Cell<'a>>> = cells.into_iter().map(Some).collect();
                match push_row(&mut out.columns, &cols.nodes, &mut row) {
                    Ok(()) => out.kept.push(i),
                    Err(b) => out.bad.push((i, b)),
                }
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
            if same_key(h.key.as_bytes(), key.as_bytes()) {
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
    fn read(&mut self, payload: &'a [u8]) -> std::result::Result<(), ()> {
        let mut obj = ObjectReader::open(payload).ok_or(())?;
        let mut k = 0;
        while let Some(key) = obj.key()? {
            let column = self.resolve(k, &key);
            k += 1;
            let Some(c) = column else {
                obj.value()?;
                continue;
            };
            if self.row[c].is_some() {
                return Err(()); // a duplicate key
            }
            let node = &self.cols.nodes[c];
            if !fast(node, &mut obj, &mut self.row[c])? {
                self.row[c] = Some(convert(node, obj.value()?)?);
            }
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

fn convert<'a>(node: &Node, value: Json<'a>) -> std::result::Result<Cell<'a>, ()> {
    json_value(node, value).map_err(drop)
}

/// The usual values of a one-value column read straight into `slot`: a string without
/// escapes, or a number, with the conversions [`json_value`] applies to them (a string into a
/// string column as it is, into another column by [`text_to`]; a number into a numeric column
/// by [`number_to`]). `Ok(false)`, nothing read, for any other value, which [`json_value`]
/// takes; `Err` when the value does not fit. Writing the cell in place, and the two small
/// readers, spare the moves of the generic value and cell through memory (a store-forwarding
/// stall each, a third of this reader's time).
#[inline]
fn fast<'a>(
    node: &Node,
    obj: &mut ObjectReader<'a>,
    slot: &mut Option<Cell<'a>>,
) -> std::result::Result<bool, ()> {
    let Kind::Leaf(leaf) = node.kind else {
        return Ok(false);
    };
    if let Some(s) = obj.plain_string() {
        *slot = Some(match leaf {
            Leaf::Str => Cell::Str(std::borrow::Cow::Borrowed(s)),
            _ => text_to(leaf, s, node.type_name()).map_err(drop)?,
        });
        return Ok(true);
    }
    if leaf.is_numeric() {
        if let Some(t) = obj.number_text() {
            *slot = Some(number_to(leaf, Number::Text(t), node.type_name()).map_err(drop)?);
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether two keys are the same bytes. Keys are short and compared once per member, so they
/// are compared eight bytes at a time in place, not through a call to `memcmp` (which was 5% of
/// an ingest's time).
#[inline]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("8 bytes"));
    let (mut x, mut y) = (a.chunks_exact(8), b.chunks_exact(8));
    for (p, q) in (&mut x).zip(&mut y) {
        if word(p) != word(q) {
            return false;
        }
    }
    let (p, q) = (x.remainder(), y.remainder());
    let mut diff = 0u8;
    for k in 0..p.len() {
        diff |= p[k] ^ q[k];
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::same_key;

    #[test]
    fn keys_are_the_same_only_byte_for_byte() {
        let keys = [
            "",
            "a",
            "b",
            "id",
            "ts",
            "payload",
            "payloaD",
            "abcdefgh",
            "abcdefgi",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
            "bbcdefghijklmnopq",
            "ab\\u00e9",
            "abé",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(same_key(a.as_bytes(), b.as_bytes()), a == b, "{a:?} {b:?}");
            }
        }
    }
}
