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
/// The lines are taken a buffer at a time: the complete lines of what one read brought are
/// copied into one block in one go, and each record's payload is a slice of it (one
/// allocation and one copy per read, not one per line). The line the buffer ends inside is
/// carried into the next block. Every record of a read is sent before the next read, which
/// may wait (standard input, a followed file): a record is never held back waiting for the
/// next one. Records go in messages of up to [`CHUNK`].
pub(super) fn read_lines<R: std::io::Read>(
    mut reader: BufReader<R>,
    stream: Arc<str>,
    origin: &Path,
    start: i64,
    final_read: bool,
    unit: Unit,
    tx: &Chunks,
) -> std::result::Result<i64, ()> {
    let mut lines = Lines {
        stream,
        unit,
        pos: start,
    };
    // The start of a line that no read has ended yet.
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(Err(input_error(origin, e)));
                return Err(());
            }
        };
        if buf.is_empty() {
            // The end: a last line without its newline is a record only on the final read;
            // otherwise it is read again from its start once it is whole.
            if final_read && !partial.is_empty() {
                lines.send(Bytes::from(partial), tx)?;
            }
            return Ok(lines.pos);
        }
        let taken = buf.len();
        match memchr::memrchr(b'\n', buf) {
            None => partial.extend_from_slice(buf),
            Some(last) => {
                let mut block = Vec::with_capacity(partial.len() + last + 1);
                block.extend_from_slice(&partial);
                block.extend_from_slice(&buf[..=last]);
                partial.clear();
                partial.extend_from_slice(&buf[last + 1..]);
                reader.consume(taken);
                lines.send(Bytes::from(block), tx)?;
                continue;
            }
        }
        reader.consume(taken);
    }
}

/// One stream's line numbering.
struct Lines {
    stream: Arc<str>,
    unit: Unit,
    /// The position after the last line counted.
    pos: i64,
}

impl Lines {
    /// Counts the lines of `block` (each ended by a newline, the last one perhaps not) and
    /// sends their records, each payload a slice of the block; `Err` once the receiver is gone.
    fn send(&mut self, block: Bytes, tx: &Chunks) -> std::result::Result<(), ()> {
        let mut records = Vec::with_capacity(CHUNK);
        // A stream name of the block's own: its count of references is touched by this thread
        // while the engine's drops the records of earlier blocks, each on a cache line of its
        // own (one name shared by every record made the two threads contend on it).
        let stream: Arc<str> = Arc::from(&*self.stream);
        let mut from = 0;
        while from < block.len() {
            let end = memchr::memchr(b'\n', &block[from..]).map_or(block.len(), |k| from + k + 1);
            let (position, next) = match self.unit {
                Unit::Bytes => (self.pos, self.pos + (end - from) as i64),
                Unit::Lines => (self.pos + 1, self.pos + 1),
            };
            self.pos = next;
            let body = trim_newline(&block[from..end]);
            // The record rule `floe append` uses too: only JSON whitespace makes a line blank;
            // any other content is a record (and a bad one if it is not exactly one JSON
            // object).
            if !crate::records::ndjson::is_blank(body) {
                records.push(SourceRecord {
                    stream: stream.clone(),
                    next_position: next,
                    position,
                    payload: block.slice(from..from + body.len()),
                    key: None,
                    marker: false,
                });
                if records.len() >= CHUNK {
                    let full = std::mem::replace(&mut records, Vec::with_capacity(CHUNK));
                    tx.blocking_send(Ok(full)).map_err(drop)?;
                }
            }
            from = end;
        }
        if !records.is_empty() {
            tx.blocking_send(Ok(records)).map_err(drop)?;
        }
        Ok(())
    }
}

/// The line without its `\n` or `\r\n` terminator (a `\r` is JSON whitespace anyway).
fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives its bytes in pieces of 1 to 7 bytes, as a pipe might.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl std::io::Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.step = self.step % 7 + 1;
            let n = self.step.min(buf.len()).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// (payload, position, next position) of every record sent, and the position returned.
    fn read_all(
        data: &[u8],
        capacity: usize,
        start: i64,
        final_read: bool,
        unit: Unit,
    ) -> (Vec<(String, i64, i64)>, i64) {
        let (tx, mut rx) = mpsc::channel(1 << 16);
        let reader = BufReader::with_capacity(
            capacity,
            Trickle {
                data: data.to_vec(),
                at: 0,
                step: 0,
            },
        );
        let end = read_lines(
            reader,
            "s".into(),
            Path::new("s"),
            start,
            final_read,
            unit,
            &tx,
        )
        .expect("read");
        drop(tx);
        let mut out = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            let chunk = chunk.expect("no error");
            assert!(!chunk.is_empty() && chunk.len() <= CHUNK);
            for r in chunk {
                let text = String::from_utf8(r.payload.to_vec()).unwrap();
                out.push((text, r.position, r.next_position));
            }
        }
        (out, end)
    }

    #[test]
    fn lines_cut_anywhere_by_reads_come_whole_with_their_byte_positions() {
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for i in 0..3000 {
            let start = 100 + data.len() as i64;
            let line = match i % 5 {
                0 => format!("{{\"id\": {i}, \"pad\": \"{}\"}}\n", "x".repeat(i % 40)),
                1 => "  \t \n".to_string(), // blank: skipped, counted
                2 => format!("{{\"id\": {i}}}\r\n"),
                3 => format!("not json {i}\n"),
                _ => "\n".to_string(),
            };
            data.extend_from_slice(line.as_bytes());
            let body = line.trim_end_matches('\n').trim_end_matches('\r');
            if !body.trim().is_empty() {
                expected.push((body.to_string(), start, start + line.len() as i64));
            }
        }
        let total = 100 + data.len() as i64;
        for capacity in [3, 64, 1 << 20] {
            let (got, end) = read_all(&data, capacity, 100, false, Unit::Bytes);
            assert_eq!(got, expected, "capacity {capacity}");
            assert_eq!(end, total);
        }
    }

    #[test]
    fn an_unended_last_line_is_a_record_only_on_the_final_read() {
        let data = b"{\"a\": 1}\n{\"a\": 2}";
        let (got, end) = read_all(data, 4, 0, false, Unit::Bytes);
        assert_eq!(got, vec![("{\"a\": 1}".to_string(), 0, 9)]);
        assert_eq!(end, 9, "read again from the unended line's start");
        let (got, end) = read_all(data, 4, 0, true, Unit::Bytes);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], ("{\"a\": 2}".to_string(), 9, 17));
        assert_eq!(end, 17);
    }

    #[test]
    fn standard_input_counts_lines_blank_ones_included() {
        let data = b"{\"a\": 1}\n\n{\"a\": 2}\n   \n{\"a\": 3}";
        let (got, end) = read_all(data, 5, 0, true, Unit::Lines);
        let lines: Vec<(i64, i64)> = got.iter().map(|(_, p, n)| (*p, *n)).collect();
        assert_eq!(lines, vec![(1, 1), (3, 3), (5, 5)]);
        assert_eq!(end, 5);
    }
}
