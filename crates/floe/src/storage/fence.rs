//! The fence around one table's files: the one rule every delete in floe obeys.
//!
//! A path may be deleted only when, after canonicalization, it lies strictly inside the table's
//! own location, not inside another table's location (one nested in this table, or one sharing
//! it), and is not one of the catalog's own files (the SQLite database and its journals).
//! Files outside the location (for example added to the table with PyIceberg's `add_files`)
//! are kept unless the caller explicitly allows them ([`Fence::allow_external`]), and even then
//! never inside another table or the catalog.
//!
//! Canonicalization, so that no spelling of a path slips through:
//! - scheme and authority are split off; equivalent schemes are unified (`s3a`, `s3n` = `s3`;
//!   no scheme, `file:`, `file://` = local disk); a different bucket is a different place;
//! - `//` and `.` segments collapse, `..` is resolved lexically; a path that climbs above its
//!   root is outside everything;
//! - a path with percent-escapes (`%2e%2e`) must be inside in both its raw and decoded form,
//!   since some FileIO implementations decode URIs and some do not;
//! - on local disk the deepest existing directory of the path is resolved through symlinks
//!   (realpath), and so is the table location: a symlink inside the table that points elsewhere
//!   makes what lies behind it outside.
//!
//! Other tables' locations come from the catalog (`Fence::for_table`, in [`crate::catalog`]);
//! a fence built without them ([`Fence::own`]) guards the files an operation wrote itself.
//!
//! A table may itself lie inside another table's location (PyIceberg, Java and REST catalogs
//! accept `create_table(..., location=<other table>/data)`): then the other table's files may
//! sit in this table's location. Such a *container*'s referenced files are learned with its
//! location, before any listing ([`Fence::set_container_files`]); a path inside this table and
//! inside a container may be deleted only when the container does not reference it, and every
//! such path is kept while the container's files are unknown.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use iceberg::table::Table;
use iceberg::TableIdent;

/// A canonical location: scheme (`file` for local disk), authority (bucket) and path segments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Canon {
    scheme: String,
    authority: String,
    segments: Vec<String>,
}

impl Canon {
    /// Canonicalizes `location` lexically. `None` when the path climbs above its root (`/a/../..`).
    pub fn parse(location: &str, equal_schemes: &HashMap<String, String>) -> Option<Canon> {
        let (scheme, rest) = match location.find("://") {
            Some(i)
                if i > 0
                    && location[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
            {
                (location[..i].to_ascii_lowercase(), &location[i + 3..])
            }
            _ => match location.strip_prefix("file:") {
                Some(rest) => ("file".to_string(), rest),
                None => ("file".to_string(), location),
            },
        };
        let scheme = equal_schemes.get(&scheme).cloned().unwrap_or(scheme);
        let (authority, path) = if scheme == "file" {
            // `file://host/p` is not something floe writes; treat the rest as a path.
            (String::new(), rest)
        } else {
            match rest.find('/') {
                Some(i) => (rest[..i].to_string(), &rest[i..]),
                None => (rest.to_string(), ""),
            }
        };
        let mut segments: Vec<String> = Vec::new();
        for seg in path.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    segments.pop()?;
                }
                s => segments.push(s.to_string()),
            }
        }
        Some(Canon {
            scheme,
            authority,
            segments,
        })
    }

    /// True when `other` lies strictly below `self`.
    pub fn strictly_contains(&self, other: &Canon) -> bool {
        self.scheme == other.scheme
            && self.authority == other.authority
            && other.segments.len() > self.segments.len()
            && other.segments[..self.segments.len()] == self.segments[..]
    }

    /// True when `other` is `self` or lies below it.
    pub fn contains_or_equals(&self, other: &Canon) -> bool {
        self == other || self.strictly_contains(other)
    }

    fn is_local(&self) -> bool {
        self.scheme == "file"
    }

    fn local_path(&self) -> PathBuf {
        let mut p = PathBuf::from("/");
        for s in &self.segments {
            p.push(s);
        }
        p
    }

    fn from_local(p: &Path) -> Option<Canon> {
        Canon::parse(&p.to_string_lossy(), &HashMap::new())
    }

    /// Where this local path really is: the deepest existing ancestor resolved through symlinks,
    /// then the rest. `self` unchanged for object stores.
    fn real(&self) -> Option<Canon> {
        if !self.is_local() {
            return Some(self.clone());
        }
        let full = self.local_path();
        let mut existing = full.as_path();
        let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
        loop {
            if let Ok(real) = std::fs::canonicalize(existing) {
                let mut out = real;
                for r in rest.iter().rev() {
                    out.push(r);
                }
                return Canon::from_local(&out);
            }
            rest.push(existing.file_name()?);
            existing = existing.parent()?;
        }
    }
}

/// Every reading of `path` that a FileIO might act on: as written and percent-decoded.
fn readings(path: &str, equal: &HashMap<String, String>) -> Option<Vec<Canon>> {
    let mut out = vec![Canon::parse(path, equal)?];
    if path.contains('%') {
        out.push(Canon::parse(&percent_decode(path), equal)?);
    }
    Some(out)
}

/// Decodes `%XX` escapes once (other bytes unchanged).
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a path may or may not be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Inside the table's own location: may be deleted.
    Inside,
    /// Outside the table location, and external files are allowed: may be deleted.
    External,
    /// Outside the table location (kept).
    Outside,
    /// Inside another table's location (kept whatever the options).
    OtherTable(String),
    /// One of the catalog's own files (kept whatever the options).
    CatalogFile,
}

impl Verdict {
    /// True when the path may be deleted.
    pub fn deletable(&self) -> bool {
        matches!(self, Verdict::Inside | Verdict::External)
    }
}

/// Paths a fence kept back from a delete, by reason.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct KeptFiles {
    /// Referenced or listed files outside the table location (kept without the explicit flag).
    pub outside_location: u64,
    /// Files inside another table's location.
    pub other_tables: u64,
    /// The catalog's own files.
    pub catalog_files: u64,
    /// Up to 20 kept paths with their reason, for the report.
    pub sample: Vec<String>,
}

impl KeptFiles {
    /// Number of paths kept.
    pub fn total(&self) -> u64 {
        self.outside_location + self.other_tables + self.catalog_files
    }

    fn record(&mut self, path: &str, verdict: &Verdict) {
        let why = match verdict {
            Verdict::Outside => {
                self.outside_location += 1;
                "outside the table location".to_string()
            }
            Verdict::OtherTable(t) => {
                self.other_tables += 1;
                format!("inside the location of table {t}")
            }
            Verdict::CatalogFile => {
                self.catalog_files += 1;
                "a catalog file".to_string()
            }
            Verdict::Inside | Verdict::External => return,
        };
        if self.sample.len() < 20 {
            self.sample.push(format!("{path} ({why})"));
        }
    }
}

/// Another table's location.
#[derive(Debug, Clone)]
struct OtherRoot {
    table: String,
    root: Canon,
    real: Option<Canon>,
    /// For a container (a table whose location holds this one): the files it references, in
    /// their lexical and real forms, once known. `None`: unknown, so every path inside it is
    /// its.
    referenced: Option<HashSet<Canon>>,
}

/// The fence around one table: see the module documentation.
#[derive(Debug)]
pub struct Fence {
    table: String,
    location: String,
    root: Canon,
    real_root: Option<Canon>,
    others: Vec<OtherRoot>,
    protected: Vec<Canon>,
    allow_external: bool,
    equal: HashMap<String, String>,
    /// Local directory -> its real path (symlinks resolved), per fence.
    real_dirs: Mutex<HashMap<Canon, Option<Canon>>>,
}

/// Schemes floe treats as the same store (Iceberg's `DeleteOrphanFiles` default).
fn default_equal_schemes() -> HashMap<String, String> {
    [("s3a", "s3"), ("s3n", "s3")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

impl Fence {
    /// The fence of `table` alone: its own location, no knowledge of other tables. Guards the
    /// files an operation wrote itself (failed commits, compaction outputs, metadata files).
    pub fn own(table: &Table) -> Fence {
        Self::new(
            table_name(table.identifier()),
            table.metadata().location(),
            vec![],
            vec![],
        )
    }

    /// The fence of a table location alone (see [`Fence::own`]).
    pub fn at(location: &str) -> Fence {
        Self::new(location.to_string(), location, vec![], vec![])
    }

    pub(crate) fn new(
        table: String,
        location: &str,
        others: Vec<(String, String)>,
        protected: Vec<String>,
    ) -> Fence {
        let equal = default_equal_schemes();
        // A location that climbs above its root fences nothing in: an empty root of an
        // impossible scheme contains no path.
        let root = Canon::parse(location, &equal).unwrap_or(Canon {
            scheme: "invalid".into(),
            authority: String::new(),
            segments: vec![],
        });
        let real_root = root.real();
        let others = others
            .into_iter()
            .filter_map(|(t, loc)| {
                let root = Canon::parse(&loc, &equal)?;
                let real = root.real();
                Some(OtherRoot {
                    table: t,
                    root,
                    real,
                    referenced: None,
                })
            })
            .collect();
        let protected = protected
            .iter()
            .filter_map(|p| Canon::parse(p, &equal))
            .flat_map(|c| {
                let real = c.real();
                std::iter::once(c).chain(real)
            })
            .collect();
        Fence {
            table,
            location: location.to_string(),
            root,
            real_root,
            others,
            protected,
            allow_external: false,
            equal,
            real_dirs: Mutex::new(HashMap::new()),
        }
    }

    /// Also allow files outside the table location (never inside another table or the catalog).
    pub fn allow_external(mut self, yes: bool) -> Self {
        self.allow_external = yes;
        self
    }

    /// The table this fence guards, as `ns.table`.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The table location as its metadata writes it.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn real_of(&self, c: &Canon) -> Option<Canon> {
        if !c.is_local() {
            return Some(c.clone());
        }
        // Resolve the directory (cached); the file name itself is not followed: deleting a
        // symlink removes the link, not its target.
        let (name, dir) = match c.segments.split_last() {
            Some((name, dir)) => (name.clone(), dir.to_vec()),
            None => return c.real(),
        };
        let dir = Canon {
            segments: dir,
            ..c.clone()
        };
        let mut cache = self.real_dirs.lock().expect("not poisoned");
        let real_dir = cache
            .entry(dir.clone())
            .or_insert_with(|| dir.real())
            .clone();
        real_dir.map(|mut d| {
            d.segments.push(name);
            d
        })
    }

    /// True when `o`'s location strictly holds this table's location (lexically or really).
    fn is_container(&self, o: &OtherRoot) -> bool {
        o.root.strictly_contains(&self.root)
            || matches!((&o.real, &self.real_root), (Some(or), Some(r)) if or.strictly_contains(r))
    }

    /// The tables whose location holds this table's location, by name: their referenced files
    /// must be known ([`Fence::set_container_files`]) before a path inside them is deleted.
    pub fn containers(&self) -> Vec<String> {
        self.others
            .iter()
            .filter(|o| self.is_container(o))
            .map(|o| o.table.clone())
            .collect()
    }

    /// Records the files the container `table` references (every snapshot's data, delete,
    /// manifest and metadata files): those paths stay, the rest of this table's location
    /// inside the container may be deleted.
    pub fn set_container_files(&mut self, table: &str, files: impl IntoIterator<Item = String>) {
        let mut set = HashSet::new();
        for f in files {
            for c in readings(&f, &self.equal).unwrap_or_default() {
                if let Some(real) = self.real_of(&c) {
                    set.insert(real);
                }
                set.insert(c);
            }
        }
        for o in self.others.iter_mut().filter(|o| o.table == table) {
            o.referenced = Some(set.clone());
        }
    }

    /// Tables whose location holds this path (lexically or really), other than this one. A
    /// container owns a path inside this table when it references it, or when its files are
    /// not known.
    fn other_owner(&self, forms: &[(Canon, Option<Canon>)], inside: bool) -> Option<&str> {
        self.others
            .iter()
            .find(|o| {
                let holds = forms.iter().any(|(lex, real)| {
                    o.root.strictly_contains(lex)
                        || matches!((&o.real, real), (Some(or), Some(r)) if or.strictly_contains(r))
                });
                if !holds || !inside || !self.is_container(o) {
                    return holds;
                }
                match &o.referenced {
                    None => true,
                    Some(refs) => forms.iter().any(|(lex, real)| {
                        refs.contains(lex) || real.as_ref().is_some_and(|r| refs.contains(r))
                    }),
                }
            })
            .map(|o| o.table.as_str())
    }

    /// What may happen to `path`.
    pub fn verdict(&self, path: &str) -> Verdict {
        let Some(forms) = readings(path, &self.equal) else {
            return Verdict::Outside;
        };
        let forms: Vec<(Canon, Option<Canon>)> = forms
            .into_iter()
            .map(|c| {
                let real = self.real_of(&c);
                (c, real)
            })
            .collect();
        if forms.iter().any(|(lex, real)| {
            self.protected
                .iter()
                .any(|p| p == lex || real.as_ref() == Some(p))
        }) {
            return Verdict::CatalogFile;
        }
        let inside = forms.iter().all(|(lex, real)| {
            self.root.strictly_contains(lex)
                && match (&self.real_root, real) {
                    (Some(root), Some(r)) => root.strictly_contains(r),
                    _ => false,
                }
        });
        if let Some(t) = self.other_owner(&forms, inside) {
            return Verdict::OtherTable(t.to_string());
        }
        if inside {
            Verdict::Inside
        } else if self.allow_external {
            Verdict::External
        } else {
            Verdict::Outside
        }
    }

    /// Splits `paths` into those that may be deleted and a report of the rest.
    pub fn partition(&self, paths: impl IntoIterator<Item = String>) -> (Vec<String>, KeptFiles) {
        let mut ok = Vec::new();
        let mut kept = KeptFiles::default();
        for p in paths {
            let v = self.verdict(&p);
            if v.deletable() {
                ok.push(p);
            } else {
                kept.record(&p, &v);
            }
        }
        (ok, kept)
    }

    /// True when `dir` is the table location or inside it (lexically and through symlinks):
    /// the check for a directory to list, such as `remove-orphan-files --location`.
    pub fn holds_dir(&self, dir: &str) -> bool {
        let Some(forms) = readings(dir, &self.equal) else {
            return false;
        };
        forms.iter().all(|c| {
            self.root.contains_or_equals(c)
                && match (&self.real_root, c.real()) {
                    (Some(root), Some(r)) => root.contains_or_equals(&r),
                    _ => false,
                }
        })
    }

    /// Why a scan of the whole location (orphan removal) cannot tell this table's files from
    /// anything else's, if it cannot: another table has the same location, or the location
    /// holds the catalog's database or its whole warehouse.
    pub fn shared_location(&self, warehouse: Option<&str>) -> Option<String> {
        if let Some(o) = self
            .others
            .iter()
            .find(|o| o.root == self.root || (o.real.is_some() && o.real == self.real_root))
        {
            return Some(format!(
                "table {} has the same location {}",
                o.table, self.location
            ));
        }
        if let Some(p) = self.protected.iter().find(|p| {
            self.root.strictly_contains(p)
                || self
                    .real_root
                    .as_ref()
                    .is_some_and(|r| r.strictly_contains(p))
        }) {
            return Some(format!(
                "the location {} holds the catalog database {}",
                self.location,
                p.local_path().display()
            ));
        }
        if let Some(w) = warehouse.and_then(|w| Canon::parse(w, &self.equal)) {
            let real_w = w.real();
            let holds = self.root.contains_or_equals(&w)
                || matches!((&self.real_root, &real_w), (Some(r), Some(w)) if r.contains_or_equals(w));
            if holds {
                return Some(format!(
                    "the location {} holds the catalog's whole warehouse",
                    self.location
                ));
            }
        }
        None
    }
}

/// `ns.table`, as [`crate::table::ident_string`] writes it (storage sits below the table
/// layer, so it does not import it).
fn table_name(ident: &TableIdent) -> String {
    format!(
        "{}.{}",
        ident.namespace().clone().inner().join("."),
        ident.name()
    )
}

#[cfg(test)]
mod tests;
