//! Which file is which among the files of a source glob, so rotation neither loses nor repeats a
//! line. A file is known by its device and inode and a fingerprint of its first line (its first
//! 1 KiB when longer), and its stream name records that identity with the path it had when floe
//! first read it: `file:<path>#<device>.<inode>.<fingerprint>` -> byte offset. On each poll:
//!
//! - the inode floe reads, with the same first line and at least as long as the position: the
//!   same file, read on (also under a new name the glob matches: `log.ndjson` -> `log.ndjson.1`);
//! - that inode with another first line, or shorter than the position (copytruncate, `: > f`):
//!   new content, read from 0;
//! - a new inode starting with the first line of a file that was truncated in place (the copy
//!   copytruncate made, under a name the glob matches): read on from the truncated file's
//!   position. While the original still holds that first line (the copy is being made, the
//!   truncation comes next), the new file waits, for [`COPY_GRACE`] at most;
//! - any other new inode (rename-and-create's new file): read from 0;
//! - a file floe reads that left the glob (renamed away, deleted) is read on through its open
//!   handle, as long as it grows, and dropped after [`GONE_GRACE`] without a new line.
//!
//! A restart matches files to the committed positions the same way. A position without an
//! identity (the format before it) resumes the file at its path when the file is at least that
//! long and a line ends there, until a position with an identity exists for the path.
//!
//! What cannot be seen: a file truncated and rewritten between two polls (200 ms), past its old
//! position and starting with the same first line, looks like the same file grown; it is read
//! on from the old position.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lines::{input_error, matching, read_lines, Chunks, Unit};
use super::Positions;

/// Bytes of a first line the fingerprint covers at most.
pub const FINGERPRINT_BYTES: usize = 1024;
/// How long a new file that starts like a file floe still reads waits for that file to be
/// truncated (copytruncate) before it is read from its start as a file of its own.
pub const COPY_GRACE: Duration = Duration::from_secs(10);
/// How long a file that left the glob (renamed away, deleted) is read on without a new line.
pub const GONE_GRACE: Duration = Duration::from_secs(30);

/// A file's identity: device, inode and the fingerprint of its first line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub fingerprint: u64,
}

impl FileId {
    /// The stream name of the file first read at `path`.
    pub fn stream(&self, path: &Path) -> String {
        format!(
            "file:{}#{}.{}.{:016x}",
            path.display(),
            self.dev,
            self.ino,
            self.fingerprint
        )
    }

    fn inode(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// The path and identity of a file stream name (`None` for the format without identity);
/// `None` for a stream that is not a file.
pub fn parse_stream(stream: &str) -> Option<(PathBuf, Option<FileId>)> {
    let rest = stream.strip_prefix("file:")?;
    if let Some((path, id)) = rest.rsplit_once('#') {
        let parts: Vec<&str> = id.split('.').collect();
        if let [dev, ino, fp] = parts[..] {
            if let (Ok(dev), Ok(ino), Ok(fingerprint), 16) = (
                dev.parse(),
                ino.parse(),
                u64::from_str_radix(fp, 16),
                fp.len(),
            ) {
                let id = FileId {
                    dev,
                    ino,
                    fingerprint,
                };
                return Some((PathBuf::from(path), Some(id)));
            }
        }
    }
    Some((PathBuf::from(rest), None))
}

/// FNV-1a, 64 bits: stable across builds and platforms (positions outlive the binary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The fingerprint of a file's first line (up to [`FINGERPRINT_BYTES`]); `None` while the first
/// line is incomplete (unless `final_read`: the file is complete) or the file is empty.
fn fingerprint(mut f: &File, final_read: bool) -> std::io::Result<Option<u64>> {
    f.seek(SeekFrom::Start(0))?;
    let mut buf = Vec::with_capacity(FINGERPRINT_BYTES);
    f.take(FINGERPRINT_BYTES as u64).read_to_end(&mut buf)?;
    Ok(match buf.iter().position(|b| *b == b'\n') {
        Some(end) => Some(fnv1a(&buf[..=end])),
        None if buf.len() == FINGERPRINT_BYTES || (final_read && !buf.is_empty()) => {
            Some(fnv1a(&buf))
        }
        None => None,
    })
}

#[cfg(unix)]
fn inode(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// Whether a line ends right before `offset` (or `offset` is the start).
fn line_ends_at(mut f: &File, offset: i64) -> bool {
    if offset <= 0 {
        return true;
    }
    let mut b = [0u8];
    f.seek(SeekFrom::Start(offset as u64 - 1)).is_ok()
        && f.read_exact(&mut b).is_ok()
        && b[0] == b'\n'
}

/// A file of the glob as one poll found it, opened.
struct Found {
    path: PathBuf,
    file: File,
    inode: (u64, u64),
    size: i64,
    fingerprint: Option<u64>,
}

fn look(path: &Path, final_read: bool) -> std::io::Result<Found> {
    let file = File::open(path)?;
    let m = file.metadata()?;
    let fingerprint = fingerprint(&file, final_read)?;
    Ok(Found {
        path: path.to_path_buf(),
        inode: inode(&m),
        size: m.len() as i64,
        fingerprint,
        file,
    })
}

/// A file being read, through its open handle.
struct Reading {
    stream: Arc<str>,
    path: PathBuf,
    id: FileId,
    offset: i64,
    file: File,
    /// Since when the file is no longer under a name the glob matches, and when it last grew.
    gone: Option<Instant>,
}

/// A position floe knows but reads no file at: from the table (a restart), or of a file
/// truncated in place or gone.
struct Known {
    stream: String,
    path: PathBuf,
    id: Option<FileId>,
    offset: i64,
    /// Its inode was truncated or rewritten in place (its content lives on only in a copy).
    replaced: bool,
}

/// The files of a glob, followed by identity.
pub struct Follower {
    dir: PathBuf,
    pattern: String,
    follow: bool,
    reading: Vec<Reading>,
    known: Vec<Known>,
    /// New files that start like a file still read (a copy under way), since when.
    waiting: HashMap<(u64, u64), Instant>,
}

impl Follower {
    /// Follows the files of `dir` matching `pattern`, from the file positions in `resume`.
    pub fn new(dir: PathBuf, pattern: String, follow: bool, resume: &Positions) -> Self {
        let mut known: Vec<Known> = resume
            .iter()
            .filter_map(|(stream, offset)| {
                let (path, id) = parse_stream(stream)?;
                Some(Known {
                    stream: stream.clone(),
                    path,
                    id,
                    offset: *offset,
                    replaced: false,
                })
            })
            .collect();
        // A position without identity stands only until one with identity exists for its path.
        let identified: Vec<PathBuf> = known
            .iter()
            .filter(|k| k.id.is_some())
            .map(|k| k.path.clone())
            .collect();
        known.retain(|k| k.id.is_some() || !identified.contains(&k.path));
        Self {
            dir,
            pattern,
            follow,
            reading: Vec::new(),
            known,
            waiting: HashMap::new(),
        }
    }

    /// Reads what the files hold now; `Err` once the receiver is gone or reading failed (the
    /// error sent first).
    pub(crate) fn poll(&mut self, tx: &Chunks) -> std::result::Result<(), ()> {
        let final_read = !self.follow;
        let mut found = Vec::new();
        for path in matching(&self.dir, &self.pattern) {
            match look(&path, final_read) {
                Ok(f) => found.push(f),
                // Renamed or deleted since the listing: the next poll sees where it went.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(input_error(&path, e)));
                    return Err(());
                }
            }
        }
        let now = Instant::now();
        // What each inode of the glob holds now: its first line and size.
        let held: HashMap<(u64, u64), (Option<u64>, i64)> = found
            .iter()
            .map(|f| (f.inode, (f.fingerprint, f.size)))
            .collect();
        let mut seen: Vec<(u64, u64)> = Vec::new();
        let mut fresh = Vec::new();
        // Files read already, by inode (under any name the glob matches).
        for f in found {
            if let Some(i) = self.reading.iter().position(|r| r.id.inode() == f.inode) {
                let r = &mut self.reading[i];
                if f.fingerprint == Some(r.id.fingerprint) && f.size >= r.offset {
                    r.path = f.path;
                    r.gone = None;
                    seen.push(f.inode);
                    continue;
                }
                // Truncated or rewritten in place: what it held before is gone (or in a copy).
                let r = self.reading.remove(i);
                self.known.push(Known {
                    stream: r.stream.to_string(),
                    path: r.path,
                    id: Some(r.id),
                    offset: r.offset,
                    replaced: true,
                });
            }
            fresh.push(f);
        }
        for f in fresh {
            // Nothing complete to read yet.
            let Some(fingerprint) = f.fingerprint else {
                continue;
            };
            let id = FileId {
                dev: f.inode.0,
                ino: f.inode.1,
                fingerprint,
            };
            // A committed position of this very file (a restart, or a file back in the glob).
            if let Some(k) = self.known.iter().position(|k| k.id == Some(id)) {
                let k = self.known.remove(k);
                let offset = if f.size >= k.offset { k.offset } else { 0 };
                self.start(f, id, k.stream, offset);
                continue;
            }
            // A position without identity, at this path.
            if let Some(k) = self
                .known
                .iter()
                .position(|k| k.id.is_none() && k.path == f.path)
            {
                let k = self.known.remove(k);
                let offset = if f.size >= k.offset && line_ends_at(&f.file, k.offset) {
                    k.offset
                } else {
                    0
                };
                let stream = id.stream(&f.path);
                self.start(f, id, stream, offset);
                continue;
            }
            // The copy of a file truncated in place: read on from that file's position.
            let replaced = |k: &Known| {
                k.replaced
                    || k.id.is_some_and(|i| {
                        held.get(&i.inode()).is_some_and(|(fp, size)| {
                            *fp != Some(i.fingerprint) || *size < k.offset
                        })
                    })
            };
            let original = self
                .known
                .iter()
                .enumerate()
                .filter(|(_, k)| {
                    k.offset > 0
                        && k.id.is_some_and(|i| i.fingerprint == fingerprint)
                        && replaced(k)
                        && f.size >= k.offset
                        && line_ends_at(&f.file, k.offset)
                })
                .max_by_key(|(_, k)| k.offset)
                .map(|(i, _)| i);
            if let Some(k) = original {
                let k = self.known.remove(k);
                let stream = id.stream(&f.path);
                self.start(f, id, stream, k.offset);
                continue;
            }
            // Starts like a file still read: a copy under way, whose original is truncated
            // next; it waits.
            if self.follow
                && self
                    .reading
                    .iter()
                    .any(|r| r.id.fingerprint == fingerprint && r.offset > 0)
            {
                let since = *self.waiting.entry(f.inode).or_insert(now);
                if since.elapsed() < COPY_GRACE {
                    continue;
                }
            }
            let stream = id.stream(&f.path);
            self.start(f, id, stream, 0);
        }
        for r in &mut self.reading {
            if !seen.contains(&r.id.inode()) && r.gone.is_none() {
                r.gone = Some(now);
            }
        }
        self.reading.sort_by(|a, b| a.path.cmp(&b.path));
        let mut i = 0;
        while i < self.reading.len() {
            let r = &mut self.reading[i];
            let before = r.offset;
            r.offset = read_from(r, final_read, tx)?;
            let done = match r.gone {
                Some(_) if r.offset != before => {
                    r.gone = Some(Instant::now());
                    false
                }
                Some(since) => since.elapsed() >= GONE_GRACE,
                None => false,
            };
            if done {
                let r = self.reading.remove(i);
                self.known.push(Known {
                    stream: r.stream.to_string(),
                    path: r.path,
                    id: Some(r.id),
                    offset: r.offset,
                    replaced: false,
                });
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Reads `f` as `stream` from `offset` on.
    fn start(&mut self, f: Found, id: FileId, stream: String, offset: i64) {
        self.waiting.remove(&f.inode);
        // This path has an identity now: a position without one no longer stands for it.
        self.known.retain(|k| k.id.is_some() || k.path != f.path);
        self.reading.push(Reading {
            stream: stream.into(),
            path: f.path,
            id,
            offset,
            file: f.file,
            gone: None,
        });
    }
}

/// Reads complete lines of `r` from its offset through its open handle; returns the new offset.
fn read_from(r: &Reading, final_read: bool, tx: &Chunks) -> std::result::Result<i64, ()> {
    let mut f = &r.file;
    if let Err(e) = f.seek(SeekFrom::Start(r.offset.max(0) as u64)) {
        let _ = tx.blocking_send(Err(input_error(&r.path, e)));
        return Err(());
    }
    let reader = BufReader::with_capacity(1 << 20, f);
    read_lines(
        reader,
        r.stream.clone(),
        &r.path,
        r.offset.max(0),
        final_read,
        Unit::Bytes,
        tx,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::Result;
    use crate::ingest::source::SourceRecord;
    use std::collections::BTreeMap;
    use std::io::Write;
    use tokio::sync::mpsc;

    /// A follower of `dir/pattern` and what it sent: payloads in order, positions per stream.
    struct Probe {
        files: Follower,
        tx: Chunks,
        rx: mpsc::Receiver<Result<Vec<SourceRecord>>>,
        lines: Vec<String>,
        positions: Positions,
    }

    impl Probe {
        fn new(dir: &Path, pattern: &str, resume: &Positions) -> Self {
            let (tx, rx) = mpsc::channel(100_000);
            Self {
                files: Follower::new(dir.to_path_buf(), pattern.into(), true, resume),
                tx,
                rx,
                lines: Vec::new(),
                positions: resume.clone(),
            }
        }

        fn poll(&mut self) {
            self.files.poll(&self.tx).unwrap();
            while let Ok(chunk) = self.rx.try_recv() {
                for r in chunk.unwrap() {
                    self.lines
                        .push(String::from_utf8(r.payload.to_vec()).unwrap());
                    self.positions.insert(r.stream.to_string(), r.next_position);
                }
            }
        }

        /// Each id once, in any order.
        fn ids(&self) -> Vec<u64> {
            let mut ids: Vec<u64> = self
                .lines
                .iter()
                .map(|l| {
                    l.trim_start_matches("{\"id\":")
                        .trim_end_matches('}')
                        .parse()
                        .unwrap()
                })
                .collect();
            ids.sort();
            ids
        }
    }

    fn append(path: &Path, ids: std::ops::Range<u64>) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        for i in ids {
            writeln!(f, "{{\"id\":{i}}}").unwrap();
        }
    }

    fn range(from: u64, to: u64) -> Vec<u64> {
        (from..to).collect()
    }

    #[test]
    fn copytruncate_reads_the_new_content_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.ndjson");
        let mut p = Probe::new(dir.path(), "*.ndjson", &Positions::new());
        append(&log, 0..20);
        p.poll();
        // Truncated, then more lines than it held: longer than the position again.
        std::fs::File::create(&log).unwrap();
        append(&log, 20..80);
        p.poll();
        // Truncated, then fewer lines: shorter than the position.
        std::fs::File::create(&log).unwrap();
        append(&log, 80..83);
        p.poll();
        append(&log, 83..90);
        p.poll();
        assert_eq!(p.ids(), range(0, 90));
    }

    #[test]
    fn rename_and_create_reads_the_renamed_file_to_its_end_and_the_new_one_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.ndjson");
        let mut p = Probe::new(dir.path(), "*.ndjson", &Positions::new());
        append(&log, 0..20);
        p.poll();
        // Lines written before the rename, and by the writer after it (still holding the old
        // file open), are read through the open handle.
        append(&log, 20..25);
        let old = dir.path().join("old.bak");
        std::fs::rename(&log, &old).unwrap();
        append(&old, 25..30);
        append(&log, 30..40);
        p.poll();
        p.poll();
        assert_eq!(p.ids(), range(0, 40));
    }

    #[test]
    fn a_rename_to_a_name_the_glob_matches_reads_on_and_its_copy_is_not_read_twice() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.ndjson");
        let mut p = Probe::new(dir.path(), "log.ndjson*", &Positions::new());
        append(&log, 0..20);
        p.poll();
        // Rename and create, the rotated name matches the glob.
        append(&log, 20..25);
        std::fs::rename(&log, dir.path().join("log.ndjson.1")).unwrap();
        append(&log, 25..30);
        p.poll();
        assert_eq!(p.ids(), range(0, 30));
        // Copytruncate, the copy matches the glob: made, then the original truncated; lines
        // not read yet before the copy are read from the copy.
        append(&log, 30..35);
        p.poll();
        append(&log, 35..40);
        std::fs::copy(&log, dir.path().join("log.ndjson.2")).unwrap();
        p.poll();
        std::fs::File::create(&log).unwrap();
        append(&log, 40..50);
        p.poll();
        p.poll();
        assert_eq!(p.ids(), range(0, 50));
    }

    #[test]
    fn a_restart_finds_each_file_by_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.ndjson");
        let mut p = Probe::new(dir.path(), "*.ndjson", &Positions::new());
        append(&log, 0..20);
        p.poll();
        let committed = p.positions.clone();
        // Stopped; meanwhile: rename and create, then a restart.
        std::fs::rename(&log, dir.path().join("old.bak")).unwrap();
        append(&log, 20..30);
        let mut p = Probe::new(dir.path(), "*.ndjson", &committed);
        p.poll();
        assert_eq!(p.ids(), range(20, 30));
        let committed = p.positions.clone();
        // Stopped; meanwhile: copytruncate (the copy outside the glob), then a restart.
        std::fs::File::create(&log).unwrap();
        append(&log, 30..35);
        let mut p = Probe::new(dir.path(), "*.ndjson", &committed);
        p.poll();
        assert_eq!(p.ids(), range(30, 35));
        // Stopped; lines appended; a restart reads exactly those.
        let committed = p.positions.clone();
        append(&log, 35..40);
        let mut p = Probe::new(dir.path(), "*.ndjson", &committed);
        p.poll();
        assert_eq!(p.ids(), range(35, 40));
    }

    #[test]
    fn a_position_without_identity_still_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log.ndjson");
        append(&log, 0..20);
        let size = std::fs::metadata(&log).unwrap().len() as i64;
        append(&log, 20..25);
        let old: Positions = BTreeMap::from([(format!("file:{}", log.display()), size)]);
        let mut p = Probe::new(dir.path(), "*.ndjson", &old);
        p.poll();
        assert_eq!(p.ids(), range(20, 25));
        // Once a position with identity exists for the path, the old one no longer counts:
        // the file replaced meanwhile is read from its start.
        let mut committed = p.positions.clone();
        committed.extend(old);
        std::fs::remove_file(&log).unwrap();
        append(&log, 100..130);
        let mut p = Probe::new(dir.path(), "*.ndjson", &committed);
        p.poll();
        assert_eq!(p.ids(), range(100, 130));
    }

    #[test]
    fn stream_names_carry_the_identity_and_parse_back() {
        let id = FileId {
            dev: 66,
            ino: 12345,
            fingerprint: 0xdead_beef,
        };
        let s = id.stream(Path::new("/in/a#b.ndjson"));
        assert_eq!(s, "file:/in/a#b.ndjson#66.12345.00000000deadbeef");
        assert_eq!(
            parse_stream(&s),
            Some((PathBuf::from("/in/a#b.ndjson"), Some(id)))
        );
        assert_eq!(
            parse_stream("file:/in/a#b.ndjson"),
            Some((PathBuf::from("/in/a#b.ndjson"), None))
        );
        assert_eq!(parse_stream("kafka:t:0"), None);
    }
}
