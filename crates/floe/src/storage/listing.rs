//! Storage listing and path comparison for cleanup.
//!
//! The iceberg crate's FileIO cannot list, so listing is floe's: local disk (paths and `file:`
//! URIs) walks directories; S3 pages through ListObjectsV2 with the table FileIO's own
//! configuration ([`crate::storage::S3Lister`]), GCS and Azure through their list APIs
//! ([`crate::storage::cloud`]). Paths are compared after normalisation, the way
//! Iceberg's `DeleteOrphanFiles` does: scheme and authority are split off, equivalent schemes
//! (`s3a`, `s3n` = `s3`) are unified, and a path whose scheme or authority differs from the
//! referenced one is a *prefix mismatch*, never silently an orphan.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use iceberg::io::FileIO;

use crate::base::error::{Error, Result};

/// A file found on storage.
#[derive(Debug, Clone)]
pub struct ListedFile {
    /// The path as the table would write it (same scheme as the listed location).
    pub path: String,
    pub size: u64,
    /// Last modification time.
    pub modified: SystemTime,
}

/// A location split into scheme, authority and path (`s3://bucket/a/b` -> `s3`, `bucket`,
/// `/a/b`; `/a/b` -> none, none, `/a/b`; `file:///a/b` -> `file`, ``, `/a/b`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitPath {
    pub scheme: Option<String>,
    pub authority: Option<String>,
    pub path: String,
}

impl SplitPath {
    /// Splits `location`, mapping schemes through `equal_schemes`.
    pub fn parse(location: &str, equal_schemes: &HashMap<String, String>) -> Self {
        let (scheme, rest) = match location.find("://") {
            Some(i)
                if location[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.') =>
            {
                (Some(location[..i].to_ascii_lowercase()), &location[i + 3..])
            }
            _ => match location.strip_prefix("file:") {
                Some(rest) => (Some("file".to_string()), rest),
                None => (None, location),
            },
        };
        let scheme = scheme.map(|s| equal_schemes.get(&s).cloned().unwrap_or(s));
        let (authority, path) = if location.contains("://") {
            match rest.find('/') {
                Some(i) => (Some(rest[..i].to_string()), rest[i..].to_string()),
                None => (Some(rest.to_string()), "/".to_string()),
            }
        } else {
            (None, rest.to_string())
        };
        let authority = match (scheme.as_deref(), authority) {
            (Some("file"), _) => None,
            (_, a) => a.filter(|a| !a.is_empty()),
        };
        Self {
            scheme,
            authority,
            path: collapse_slashes(&path),
        }
    }

    /// True when both sides name a scheme (or authority) and they differ.
    pub fn mismatches(&self, other: &SplitPath) -> bool {
        let differ =
            |a: &Option<String>, b: &Option<String>| matches!((a, b), (Some(x), Some(y)) if x != y);
        differ(&self.scheme, &other.scheme) || differ(&self.authority, &other.authority)
    }
}

fn collapse_slashes(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut prev = false;
    for c in p.chars() {
        if c == '/' && prev {
            continue;
        }
        prev = c == '/';
        out.push(c);
    }
    out
}

/// Parses `--equal-schemes s3a,s3n=s3` (Iceberg's default when unset).
pub fn parse_equal_schemes(spec: Option<&str>) -> Result<HashMap<String, String>> {
    let spec = spec.unwrap_or("s3a,s3n=s3");
    let mut out = HashMap::new();
    for part in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (from, to) = part.split_once('=').ok_or_else(|| {
            Error::invalid_option(
                "equal-schemes",
                spec,
                "expected FROM[,FROM...]=TO, e.g. s3a,s3n=s3",
            )
        })?;
        for f in from.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            out.insert(f.to_ascii_lowercase(), to.trim().to_ascii_lowercase());
        }
    }
    Ok(out)
}

/// The local directory a `file:` location or plain path names, or `None` for object stores.
pub fn local_dir(location: &str) -> Option<PathBuf> {
    let split = SplitPath::parse(location, &HashMap::new());
    match split.scheme.as_deref() {
        None | Some("file") => Some(PathBuf::from(split.path)),
        _ => None,
    }
}

/// Lists every file under `location` recursively, on the storage `file_io` talks to. Paths
/// come back in the location's own form (`file://` prefix kept when the location has one).
pub async fn list_files(file_io: &FileIO, location: &str) -> Result<Vec<ListedFile>> {
    crate::base::fault::probe("list", location);
    let listed = if crate::storage::cloud::is_cloud(location) {
        let storage = crate::storage::cloud::CloudStorage::new(file_io.config().props().clone());
        Some(storage.list(location).await.map_err(|e| Error::Storage {
            location: location.to_string(),
            reason: crate::base::error::describe_iceberg(&e),
            source: Some(Box::new(e)),
        })?)
    } else if crate::storage::is_s3(location) {
        Some(
            crate::storage::S3Lister::new(file_io)
                .list(location)
                .await?,
        )
    } else {
        None
    };
    if let Some(listed) = listed {
        return Ok(listed
            .into_iter()
            .map(|o| ListedFile {
                path: o.key,
                size: o.size,
                modified: o.modified,
            })
            .collect());
    }
    let dir = local_dir(location).ok_or_else(|| {
        Error::invalid_option(
            "location",
            location,
            "listing supports local paths, file://, s3://, gs://, abfss:// and wasbs:// locations",
        )
    })?;
    let prefix = if location.starts_with("file:") {
        "file://"
    } else {
        ""
    }
    .to_string();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        if dir.exists() {
            walk(&dir, &prefix, &mut out)?;
        }
        Ok(out)
    })
    .await
    .map_err(Error::task("directory listing"))?
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<ListedFile>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let path = entry.path();
        if meta.is_dir() {
            walk(&path, prefix, out)?;
        } else if meta.is_file() {
            out.push(ListedFile {
                path: format!("{prefix}{}", path.display()),
                size: meta.len(),
                modified: meta.modified()?,
            });
        }
    }
    Ok(())
}

/// Matches `name` against a pattern with `*` (any run) and `?` (one character).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_locations() {
        let eq = parse_equal_schemes(None).unwrap();
        let a = SplitPath::parse("s3a://bucket/a//b.parquet", &eq);
        assert_eq!(a.scheme.as_deref(), Some("s3"));
        assert_eq!(a.authority.as_deref(), Some("bucket"));
        assert_eq!(a.path, "/a/b.parquet");
        let f = SplitPath::parse("file:///w/t/x", &eq);
        let p = SplitPath::parse("/w/t/x", &eq);
        assert_eq!(f.path, p.path);
        assert!(!f.mismatches(&p), "a missing scheme matches any");
        let other = SplitPath::parse("s3://other/a/b.parquet", &eq);
        assert!(a.mismatches(&other));
        assert!(!a.mismatches(&SplitPath::parse("s3n://bucket/x", &eq)));
    }

    #[test]
    fn bad_equal_schemes_is_an_error() {
        assert!(parse_equal_schemes(Some("s3a")).is_err());
        let m = parse_equal_schemes(Some("s3a,s3n=s3;wasb=abfs")).unwrap();
        assert_eq!(m["wasb"], "abfs");
    }

    #[test]
    fn local_dirs() {
        assert_eq!(local_dir("file:///a/b"), Some(PathBuf::from("/a/b")));
        assert_eq!(local_dir("/a/b"), Some(PathBuf::from("/a/b")));
        assert_eq!(local_dir("s3://b/a"), None);
    }
}
