//! Reading lines from files, shared by the file source ([`super::file`]) and the follower
//! ([`super::follow`]): the glob of input files, the position unit, and the line reader that
//! turns every non-blank line into a record.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Sends every non-blank line of `reader` (see [`crate::records::ndjson::is_blank`]) as a record, counting positions from `start` in
/// `unit`; returns the position after the last consumed line (`Err` once the receiver is gone
/// or reading failed, the error sent first).
///
/// Records go in chunks of up to [`CHUNK`]. A chunk also leaves whenever the reader's buffer is
/// empty, before the next read that might wait (standard input, a followed file): a record is
/// never held back waiting for the next one.
pub(super) fn read_lines<R: std::io::Read>(
    mut reader: BufReader<R>,
    stream: Arc<str>,
    origin: &Path,
    start: i64,
    final_read: bool,
    unit: Unit,
    tx: &Chunks,
) -> std::result::Result<i64, ()> {
    let send = |chunk: &mut Vec<SourceRecord>| -> std::result::Result<(), ()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(chunk, Vec::with_capacity(CHUNK));
        tx.blocking_send(Ok(full)).map_err(drop)
    };
    let mut chunk = Vec::with_capacity(CHUNK);
    let mut pos = start;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match reader.read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) => {
                send(&mut chunk)?;
                let _ = tx.blocking_send(Err(input_error(origin, e)));
                return Err(());
            }
        };
        if n == 0 {
            send(&mut chunk)?;
            return Ok(pos);
        }
        let complete = line.last() == Some(&b'\n');
        if !complete && !final_read {
            send(&mut chunk)?;
            return Ok(pos);
        }
        let (position, next) = match unit {
            Unit::Bytes => (pos, pos + n as i64),
            Unit::Lines => (pos + 1, pos + 1),
        };
        pos = next;
        let body = trim_newline(&line);
        // The record rule `floe append` uses too: only JSON whitespace makes a line blank; any
        // other content is a record (and a bad one if it is not exactly one JSON object).
        if !crate::records::ndjson::is_blank(body) {
            chunk.push(SourceRecord {
                stream: stream.clone(),
                next_position: next,
                position,
                payload: body.to_vec(),
                key: None,
                marker: false,
            });
        }
        if chunk.len() >= CHUNK || reader.buffer().is_empty() {
            send(&mut chunk)?;
        }
    }
}

/// The line without its `\n` or `\r\n` terminator (a `\r` is JSON whitespace anyway).
fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}
