//! What a store location names — a local path (a directory, a zip file or an icechunk
//! repository's directory; a `file://` URL is the same path), an object-store URL, or
//! `memory://` — parsed once from the user's string, and compared canonically: symlinks and
//! `..` resolved, path components rather than string prefixes, and existing local directories
//! also by identity (device and inode), which no second path to them (a bind mount) escapes.

use super::file_identity::{FileId, is_at_or_above};
use crate::errors::{Error, Result};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// Where a store lives, parsed once from the string a user gave: a local path (a plain path or
/// a `file://` URL, which name the same thing), an object-store URL (`s3://`, `gs://`,
/// `az://`, `http(s)://`, …), or `memory://`.
///
/// What a local path holds — a directory store, a zip file, an icechunk repository — is found
/// when the store is opened; the location only says where. [`canonical`](Self::canonical),
/// [`contains`](Self::contains) and [`overlaps`](Self::overlaps) compare locations after
/// resolving symlinks and `..` (local paths) or normalising the URL (scheme and host in lower
/// case, empty and `.` segments dropped, `..` applied), always by whole path components, so
/// `data.zarr` never contains `data.zarr2`; existing local directories are also compared by
/// device and inode, so a bind mount of a directory is that directory.
///
/// Every `memory://` location names a new, empty store of its own, so a memory location never
/// contains or overlaps another (stores in memory are compared by identity instead).
///
/// ```
/// use zarrbuf::store::Location;
/// let outer: Location = "/data/store.zarr".parse()?;
/// let inner: Location = "file:///data/store.zarr/group/../inner".parse()?;
/// assert!(inner.is_local() && outer.contains(&inner) && inner.overlaps(&outer));
/// assert!(!outer.contains(&"/data/store.zarr2".parse()?));
/// let s3: Location = "s3://bucket/a/b/".parse()?;
/// assert!(s3.contains(&"S3://bucket/a/b/c".parse()?) && !s3.contains(&"s3://other/a/b".parse()?));
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The string as the user gave it, for messages.
    text: String,
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// A local path (a plain path, or the path of a `file://` URL).
    Local(PathBuf),
    /// An object-store URL: its scheme (lower case), authority (bucket or host) and path
    /// segments.
    Url {
        scheme: String,
        authority: String,
        segments: Vec<String>,
    },
    /// `memory://`: a new store in memory.
    Memory,
}

impl Location {
    /// Parses a store location: `memory://`, `file://PATH` (the path after the prefix, as
    /// given), `SCHEME://...` (an object-store URL), or a plain path. An empty string or a URL
    /// without a scheme is an error.
    ///
    /// ```
    /// use zarrbuf::store::Location;
    /// assert_eq!(Location::parse("file:///tmp/a.zarr")?.local_path(), Some(std::path::Path::new("/tmp/a.zarr")));
    /// assert!(Location::parse("s3://bucket/a.zarr")?.is_url());
    /// assert!(Location::parse("memory://")?.is_memory());
    /// assert!(Location::parse("").is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn parse(text: &str) -> Result<Location> {
        let bad = |why: &str| Error::store(text, why, None);
        if text.is_empty() {
            return Err(bad(
                "no store location given; give a directory path, a .zip file or a URL",
            ));
        }
        let kind = match text.split_once("://") {
            None => Kind::Local(PathBuf::from(text)),
            Some(("", _)) => {
                return Err(bad(
                    "the URL has no scheme; write it like s3://bucket/path or file:///path",
                ));
            }
            Some((scheme, rest)) => match scheme.to_ascii_lowercase().as_str() {
                "file" => Kind::Local(PathBuf::from(rest)),
                "memory" => Kind::Memory,
                scheme => {
                    let rest = rest.split(['?', '#']).next().unwrap_or_default();
                    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
                    Kind::Url {
                        scheme: scheme.to_string(),
                        authority: authority.to_string(),
                        segments: path.split('/').map(str::to_string).collect(),
                    }
                }
            },
        };
        Ok(Location {
            text: text.to_string(),
            kind,
        })
    }

    /// The location as the user gave it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The local path (of a plain path or a `file://` URL); `None` for other URLs and memory.
    pub fn local_path(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Local(p) => Some(p),
            _ => None,
        }
    }

    /// Whether this is a local path (a plain path or a `file://` URL).
    pub fn is_local(&self) -> bool {
        matches!(self.kind, Kind::Local(_))
    }

    /// Whether this is a local path written as a plain path (not a `file://` URL).
    pub fn is_plain_path(&self) -> bool {
        self.is_local() && !self.text.contains("://")
    }

    /// Whether this is an object-store URL (neither a local path nor memory).
    pub fn is_url(&self) -> bool {
        matches!(self.kind, Kind::Url { .. })
    }

    /// For a URL, what follows `scheme://` as given (bucket or host, then the path).
    #[cfg_attr(not(feature = "icechunk"), allow(dead_code))]
    pub(crate) fn after_scheme(&self) -> Option<&str> {
        match self.kind {
            Kind::Url { .. } => self.text.split_once("://").map(|(_, rest)| rest),
            _ => None,
        }
    }

    /// The canonical location as text, the same for every spelling of one place (`None` for
    /// memory, where each store is its own): `file:` and the canonical path, or the URL's
    /// scheme, authority and segments after [`canonical`](Self::canonical). Asks the file
    /// system, like `canonical`.
    pub(crate) fn identity(&self) -> Option<String> {
        match self.canonical().kind {
            Kind::Memory => None,
            Kind::Local(p) => Some(format!("file:{}", p.display())),
            Kind::Url {
                scheme,
                authority,
                segments,
            } => Some(format!("{scheme}://{authority}/{}", segments.join("/"))),
        }
    }

    /// Whether this is `memory://`.
    pub fn is_memory(&self) -> bool {
        matches!(self.kind, Kind::Memory)
    }

    /// The URL scheme in lower case: `"s3"`, `"https"`, …; `"file"` for local paths and
    /// `"memory"` for memory.
    pub fn scheme(&self) -> &str {
        match &self.kind {
            Kind::Local(_) => "file",
            Kind::Url { scheme, .. } => scheme,
            Kind::Memory => "memory",
        }
    }

    /// The local directory this names, if it is a local path of an existing directory.
    pub fn local_dir(&self) -> Option<&Path> {
        self.local_path().filter(|p| p.is_dir())
    }

    /// The location with symlinks and `..` resolved: for a local path, the longest part of it
    /// that exists made absolute and canonical, and the rest (a destination not yet created)
    /// appended with `.` dropped and `..` applied; for a URL, scheme and authority in lower
    /// case (`s3a` read as `s3`, `gcs` as `gs`) and empty, `.` and `..` segments applied.
    /// The text stays as the user gave it.
    ///
    /// ```
    /// use zarrbuf::store::Location;
    /// let here = std::env::current_dir().unwrap().canonicalize().unwrap();
    /// let l = Location::parse("not/yet/../there")?.canonical();
    /// assert_eq!(l.local_path().unwrap(), here.join("not/there"));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn canonical(&self) -> Location {
        let kind = match &self.kind {
            Kind::Local(p) => Kind::Local(canonical_path(p)),
            Kind::Url {
                scheme,
                authority,
                segments,
            } => Kind::Url {
                scheme: match scheme.as_str() {
                    "s3a" => "s3".into(),
                    "gcs" => "gs".into(),
                    s => s.into(),
                },
                authority: authority.to_ascii_lowercase(),
                segments: normal_segments(segments.iter().map(String::as_str)),
            },
            Kind::Memory => Kind::Memory,
        };
        Location {
            text: self.text.clone(),
            kind,
        }
    }

    /// The location of the node at `path` inside this store (`path` as `--path` takes it:
    /// `a/b`, `/a/b` or empty for the root).
    ///
    /// ```
    /// use zarrbuf::store::Location;
    /// let l = Location::parse("s3://bucket/store.zarr")?.join("group/array");
    /// assert!(Location::parse("s3://bucket/store.zarr/group")?.contains(&l));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn join(&self, path: &str) -> Location {
        let parts = path.split('/').filter(|p| !p.is_empty());
        let kind = match &self.kind {
            Kind::Local(p) => Kind::Local(parts.fold(p.clone(), |acc, part| acc.join(part))),
            Kind::Url {
                scheme,
                authority,
                segments,
            } => Kind::Url {
                scheme: scheme.clone(),
                authority: authority.clone(),
                segments: segments
                    .iter()
                    .cloned()
                    .chain(parts.map(str::to_string))
                    .collect(),
            },
            Kind::Memory => Kind::Memory,
        };
        let trimmed = path.trim_matches('/');
        let text = if trimmed.is_empty() {
            self.text.clone()
        } else {
            format!("{}/{trimmed}", self.text.trim_end_matches('/'))
        };
        Location { text, kind }
    }

    /// Whether `other` is this location or lies inside it, compared canonically (see
    /// [`canonical`](Self::canonical)) by whole path components, and for local paths also by
    /// identity: when this location exists, it contains `other` if it is `other` or one of
    /// `other`'s existing ancestors by device and inode, however the two are named (a bind
    /// mount of a directory is that directory). A local path and a URL never contain each
    /// other; memory locations contain nothing.
    pub fn contains(&self, other: &Location) -> bool {
        match (&self.canonical().kind, &other.canonical().kind) {
            (Kind::Local(outer), Kind::Local(inner)) => {
                inner.starts_with(outer)
                    || FileId::of(outer).is_some_and(|id| is_at_or_above(id, inner))
            }
            (
                Kind::Url {
                    scheme: s1,
                    authority: a1,
                    segments: outer,
                },
                Kind::Url {
                    scheme: s2,
                    authority: a2,
                    segments: inner,
                },
            ) => s1 == s2 && a1 == a2 && inner.starts_with(outer),
            _ => false,
        }
    }

    /// Whether either location contains the other (see [`contains`](Self::contains)): writing
    /// to one can change what the other holds.
    ///
    /// ```
    /// use zarrbuf::store::Location;
    /// let a = Location::parse("/data/store.zarr/inner")?;
    /// assert!(a.overlaps(&Location::parse("/data/store.zarr/")?));
    /// assert!(!a.overlaps(&Location::parse("/data/store.zarr/other")?));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn overlaps(&self, other: &Location) -> bool {
        self.contains(other) || other.contains(self)
    }
}

impl FromStr for Location {
    type Err = Error;

    fn from_str(s: &str) -> Result<Location> {
        Location::parse(s)
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `path` made absolute with symlinks and `..` resolved: its longest existing ancestor
/// canonicalized by the file system, the rest applied lexically.
fn canonical_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    // The components not yet resolved, last first.
    let mut rest: Vec<Component> = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |mut acc, c| {
                match c {
                    Component::ParentDir => {
                        acc.pop();
                    }
                    Component::Normal(name) => acc.push(name),
                    _ => {}
                }
                acc
            });
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            // Nothing of it exists (not even the root): lexical only.
            _ => {
                return lexical(&absolute);
            }
        }
    }
}

/// `path` with `.` dropped and `..` applied, without asking the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// URL path segments with empty and `.` segments dropped and `..` applied.
fn normal_segments<'a>(segments: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in segments {
        match s {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s.to_string()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Location {
        Location::parse(s).unwrap()
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("zarrbuf-location-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn parsing_says_what_a_location_names() {
        assert_eq!(loc("a/b.zarr").local_path(), Some(Path::new("a/b.zarr")));
        assert_eq!(loc("file:///x/y").local_path(), Some(Path::new("/x/y")));
        assert_eq!(loc("FILE:///x/y").local_path(), Some(Path::new("/x/y")));
        assert!(loc("memory://").is_memory());
        let s3 = loc("s3://bucket/a/b");
        assert!(s3.is_url() && !s3.is_local() && s3.scheme() == "s3");
        assert_eq!(s3.to_string(), "s3://bucket/a/b");
        assert_eq!(loc("https://host:8080/x").scheme(), "https");
        assert!(Location::parse("").is_err());
        assert!(Location::parse("://x").is_err());
        assert_eq!(
            loc("x/y".parse::<Location>().unwrap().as_str()).as_str(),
            "x/y"
        );
    }

    #[test]
    fn file_urls_and_plain_paths_are_the_same_location() {
        let dir = temp_dir("file-url");
        let plain = loc(dir.to_str().unwrap());
        let url = loc(&format!("file://{}", dir.display()));
        assert_eq!(plain.canonical().kind, url.canonical().kind);
        assert!(plain.contains(&url) && url.contains(&plain));
        let inner = loc(&format!("file://{}/a/b", dir.display()));
        assert!(plain.contains(&inner) && !inner.contains(&plain));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dot_dot_and_trailing_slashes_are_resolved() {
        let dir = temp_dir("dotdot");
        std::fs::create_dir_all(dir.join("store.zarr/inner")).unwrap();
        let d = dir.display();
        let store = loc(&format!("{d}/store.zarr/"));
        let inner = loc(&format!("{d}/store.zarr/inner/"));
        let around = loc(&format!("{d}/store.zarr/inner/../inner/./"));
        assert!(store.contains(&inner) && store.contains(&around));
        assert_eq!(inner.canonical().kind, around.canonical().kind);
        assert!(loc(&format!("{d}/store.zarr/inner/..")).contains(&store));
        // By components, never by string prefix.
        assert!(!store.contains(&loc(&format!("{d}/store.zarr2"))));
        assert!(!inner.contains(&loc(&format!("{d}/store.zarr/inner2"))));
        assert!(!inner.overlaps(&loc(&format!("{d}/store.zarr/other"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn symlinks_are_resolved() {
        let dir = temp_dir("symlink");
        std::fs::create_dir_all(dir.join("real/store.zarr/inner")).unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink(dir.join("real/store.zarr/inner"), dir.join("inner-link"))
            .unwrap();
        let d = dir.display();
        let store = loc(&format!("{d}/real/store.zarr"));
        assert!(store.contains(&loc(&format!("{d}/link/store.zarr/inner"))));
        assert!(store.contains(&loc(&format!("{d}/inner-link"))));
        // `inner-link/..` is the parent of the link's target: store.zarr itself.
        assert!(loc(&format!("{d}/inner-link/..")).contains(&store));
        assert!(loc(&format!("{d}/link/store.zarr")).overlaps(&loc(&format!("{d}/inner-link"))));
        assert!(!store.contains(&loc(&format!("{d}/link"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn destinations_not_yet_created_are_compared_too() {
        let dir = temp_dir("missing");
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        let d = dir.display();
        let new = loc(&format!("{d}/link/new.zarr/a/../b")).canonical();
        assert_eq!(new.local_path().unwrap(), dir.join("real/new.zarr/b"));
        assert!(loc(&format!("{d}/real")).contains(&new));
        assert!(!loc(&format!("{d}/real/new.zarr/a")).contains(&new));
        // A relative path is taken from the current directory.
        let here = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert_eq!(
            loc("no-such-dir/x").canonical().local_path().unwrap(),
            here.join("no-such-dir/x")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn urls_compare_by_scheme_authority_and_segments() {
        let a = loc("s3://Bucket/data/store.zarr/");
        assert!(a.contains(&loc("s3://bucket/data//store.zarr/inner")));
        assert!(a.contains(&loc("s3a://bucket/data/store.zarr")));
        assert!(a.contains(&loc("s3://bucket/data/x/../store.zarr/./y")));
        assert!(!a.contains(&loc("s3://bucket/data/store.zarr2")));
        assert!(!a.contains(&loc("gs://bucket/data/store.zarr")));
        assert!(!a.contains(&loc("s3://other/data/store.zarr")));
        assert!(loc("s3://bucket").contains(&a) && a.overlaps(&loc("s3://bucket/")));
        assert!(loc("http://host:9000/a").contains(&loc("http://HOST:9000/a/b")));
        assert!(!loc("http://host:9000/a").contains(&loc("http://host:9001/a/b")));
        // A URL and a local path never overlap; memory overlaps nothing.
        assert!(!a.overlaps(&loc("/data/store.zarr")));
        assert!(!loc("memory://").overlaps(&loc("memory://")));
    }

    #[test]
    fn joining_a_node_path_stays_inside_the_store() {
        let dir = temp_dir("join");
        let store = loc(dir.to_str().unwrap());
        let node = store.join("/a/b/");
        assert_eq!(node.local_path().unwrap(), dir.join("a/b"));
        assert_eq!(node.as_str(), format!("{}/a/b", dir.display()));
        assert!(store.contains(&node) && !node.contains(&store));
        assert_eq!(store.join("").as_str(), store.as_str());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
