//! NDJSON from files (a path or a glob on the file name, in name order; `--follow` keeps
//! reading appended lines and picks up new files) or from standard input.
//!
//! A file's position is the byte offset after its last consumed line, recorded with the file's
//! identity (inode and first line, see [`super::follow`]), so a restart seeks right past what was
//! committed, in the same file, and rotation neither loses nor repeats lines. In follow mode a
//! line is consumed only once its newline is written.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use super::follow::Follower;
use super::lines::{matching, read_lines, Unit};
use super::{recv_chunks, Positions, Source, SourceRecord};
use crate::base::error::{Error, Result};

/// Chunks of lines ([`super::lines::CHUNK`] each) buffered between the reader thread and the
/// engine.
const CHANNEL: usize = 16;
/// How often a followed source looks for more data.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

enum Input {
    Stdin,
    Files {
        dir: PathBuf,
        pattern: String,
        follow: bool,
    },
}

/// NDJSON files or stdin.
pub struct FileSource {
    input: Input,
    uri: String,
    rx: Option<mpsc::Receiver<Result<Vec<SourceRecord>>>>,
    /// Records of the last chunk beyond what the engine asked for.
    rest: std::collections::VecDeque<SourceRecord>,
}

pub use crate::storage::listing::glob_match;

impl FileSource {
    /// Standard input.
    pub fn stdin() -> Self {
        Self {
            input: Input::Stdin,
            uri: "stdin".into(),
            rx: None,
            rest: Default::default(),
        }
    }

    /// A file, or a glob on the file name (`/data/events-*.ndjson`).
    pub fn files(path: &str, follow: bool) -> Result<Self> {
        let p = crate::catalog::absolute(Path::new(path))?;
        let dir = p
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let pattern = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| Error::invalid_option("--source", path, "not a file path"))?;
        if dir.to_string_lossy().contains(['*', '?']) {
            return Err(Error::invalid_option(
                "--source",
                path,
                "wildcards are allowed in the file name only",
            ));
        }
        if !follow && !pattern.contains(['*', '?']) && !p.exists() {
            return Err(Error::InputFile {
                path: p,
                reason: "no such file".into(),
            });
        }
        // Without --follow nothing would ever be read: that is a wrong pattern, not an empty
        // stream.
        if !follow && pattern.contains(['*', '?']) && matching(&dir, &pattern).is_empty() {
            return Err(Error::InputFile {
                path: p,
                reason: "no file matches this pattern (with --follow, ingest waits for files)"
                    .into(),
            });
        }
        Ok(Self {
            uri: format!("file://{}", p.display()),
            input: Input::Files {
                dir,
                pattern,
                follow,
            },
            rx: None,
            rest: Default::default(),
        })
    }
}

#[async_trait::async_trait]
impl Source for FileSource {
    fn uri(&self) -> String {
        self.uri.clone()
    }

    async fn start(&mut self, resume: &Positions) -> Result<()> {
        let (tx, rx) = mpsc::channel(CHANNEL);
        self.rx = Some(rx);
        match &self.input {
            Input::Stdin => {
                std::thread::spawn(move || {
                    let stdin = std::io::stdin();
                    let reader = BufReader::with_capacity(1 << 20, stdin.lock());
                    let _ = read_lines(
                        reader,
                        "stdin".into(),
                        Path::new("stdin"),
                        0,
                        true,
                        Unit::Lines,
                        &tx,
                    );
                });
            }
            Input::Files {
                dir,
                pattern,
                follow,
            } => {
                let mut files = Follower::new(dir.clone(), pattern.clone(), *follow, resume);
                let follow = *follow;
                std::thread::spawn(move || loop {
                    if files.poll(&tx).is_err() || !follow || tx.is_closed() {
                        return;
                    }
                    std::thread::sleep(FOLLOW_POLL);
                });
            }
        }
        Ok(())
    }

    async fn next(&mut self, max: usize, wait: Duration) -> Result<Option<Vec<SourceRecord>>> {
        match &mut self.rx {
            None => Err(Error::invalid_option("source", &self.uri, "not started")),
            Some(rx) => recv_chunks(rx, &mut self.rest, max, wait, Some).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_file_names() {
        assert!(glob_match("events-*.ndjson", "events-2026-01.ndjson"));
        assert!(glob_match("e?.ndjson", "e1.ndjson"));
        assert!(!glob_match("events-*.ndjson", "events.json"));
        assert!(glob_match("x", "x"));
    }

    async fn drain(s: &mut FileSource) -> Vec<SourceRecord> {
        let mut out = Vec::new();
        while let Some(batch) = s.next(100, Duration::from_secs(5)).await.unwrap() {
            out.extend(batch);
        }
        out
    }

    #[tokio::test]
    async fn files_resume_after_the_committed_offset() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.ndjson");
        std::fs::write(&a, "{\"id\":1}\n\n{\"id\":2}\n{\"id\":3}").unwrap();
        let glob = dir.path().join("*.ndjson").display().to_string();
        let mut s = FileSource::files(&glob, false).unwrap();
        s.start(&Positions::new()).await.unwrap();
        let got = drain(&mut s).await;
        assert_eq!(got.len(), 3);
        assert_eq!(&got[2].payload[..], b"{\"id\":3}");
        let after_first = got[0].next_position;
        let mut s = FileSource::files(&a.display().to_string(), false).unwrap();
        let resume = Positions::from([(got[0].stream.to_string(), after_first)]);
        s.start(&resume).await.unwrap();
        let got = drain(&mut s).await;
        assert_eq!(got.len(), 2);
        assert_eq!(&got[0].payload[..], b"{\"id\":2}");
    }
}
