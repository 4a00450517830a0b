//! Reading lines from files, shared by the file source ([`super::file`]) and the follower
//! ([`super::follow`]): the glob of input files, the position unit, and the line reader that
//! turns every non-blank line into a record.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::SourceRecord;
use crate::base::error::{Error, Result};
use crate::storage::listing::glob_match;

pub(super) fn matching(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| glob_match(pattern, &n.to_string_lossy()))
        })
        .collect();
    out.sort();
    out
}

/// How a line stream counts positions.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    /// Byte offsets (files: a restart seeks there).
    Bytes,
    /// Line numbers (stdin: for reports only).
    Lines,
}

pub(super) fn input_error(origin: &Path, e: impl ToString) -> Error {
    Error::InputFile {
        path: origin.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Records per message to the engine: one message per record cost the reader thread more than
/// reading the line.
pub(super) const CHUNK: usize = 1024;

/// What a line reader sends: records in order, a chunk at a time, or the error that ended it.
pub(super) type Chunks = mpsc::Sender<Result<Vec<SourceRecord>>>;

/// Sends every non-blank line of `reader` (see [`crate::records::ndjson::is_blank`]) as a
/// record, counting positions from `start` in `unit`; returns the position after the last
/// consumed line (`Err` once the receiver is gone or reading failed, the error sent first).
///
/// Records go in chunks of up to [`CHUNK`]. A chunk also leaves whenever the reader's buffer is
/// empty, before the next read that might wait (standard input, a followed file): a record is
/// never held back waiting for the next one. A chunk's lines are read into one block, and each
/// record's payload is a slice of it: one allocation per chunk, not one per record.
pub(super) fn read_lines<R: std::io::Read>(
    mut reader: BufReader<R>,
    stream: Arc<str>,
    origin: &Path,
    start: i64,
    final_read: bool,
    unit: Unit,
    tx: &Chunks,
) -> std::result::Result<i64, ()> {
    let mut chunk = Chunk::default();
    let mut pos = start;
    loop {
        let at = chunk.block.len();
        let n = match reader.read_until(b'\n', &mut chunk.block) {
            Ok(n) => n,
            Err(e) => {
                chunk.block.truncate(at);
                chunk.send(tx)?;
                let _ = tx.blocking_send(Err(input_error(origin, e)));
                return Err(());
            }
        };
        if n == 0 {
            chunk.send(tx)?;
            return Ok(pos);
        }
        let line = &chunk.block[at..];
        let complete = line.last() == Some(&b'\n');
        if !complete && !final_read {
            // Read again from its start once it is whole.
            chunk.block.truncate(at);
            chunk.send(tx)?;
            return Ok(pos);
        }
        let (position, next) = match unit {
            Unit::Bytes => (pos, pos + n as i64),
            Unit::Lines => (pos + 1, pos + 1),
        };
        pos = next;
        let body = trim_newline(line);
        // The record rule `floe append` uses too: only JSON whitespace makes a line blank; any
        // other content is a record (and a bad one if it is not exactly one JSON object).
        if crate::records::ndjson::is_blank(body) {
            chunk.block.truncate(at);
        } else {
            chunk.spans.push((at, at + body.len()));
            chunk.records.push(SourceRecord {
                stream: stream.clone(),
                next_position: next,
                position,
                payload: Bytes::new(),
                key: None,
                marker: false,
            });
        }
        if chunk.records.len() >= CHUNK || reader.buffer().is_empty() {
            chunk.send(tx)?;
        }
    }
}

/// The records read since the last send: their lines in one block, and each payload's span.
#[derive(Default)]
struct Chunk {
    block: Vec<u8>,
    spans: Vec<(usize, usize)>,
    records: Vec<SourceRecord>,
}

impl Chunk {
    /// Sends the records (each payload a slice of the block), if any; `Err` once the
    /// receiver is gone.
    fn send(&mut self, tx: &Chunks) -> std::result::Result<(), ()> {
        if self.records.is_empty() {
            self.block.clear();
            return Ok(());
        }
        let block = Bytes::from(std::mem::take(&mut self.block));
        let mut records = std::mem::replace(&mut self.records, Vec::with_capacity(CHUNK));
        for (r, (from, to)) in records.iter_mut().zip(self.spans.drain(..)) {
            r.payload = block.slice(from..to);
        }
        tx.blocking_send(Ok(records)).map_err(drop)
    }
}

/// The line without its `\n` or `\r\n` terminator (a `\r` is JSON whitespace anyway).
fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}
