//! Which keys a check of an object store (`s3://`, `gs://`, `az://`, `http(s)://`) looks at:
//! the store's listing of the array's prefix where the store lists, else none, and the check
//! walks the chunk grid instead (every grid cell's key fetched, a missing one not stored).
//!
//! object_store lists S3, GCS and Azure natively, and an HTTP server only through WebDAV's
//! `PROPFIND`, which plain HTTP servers do not answer (nginx says 405, others 403, 404 or
//! 501, or answer with a page that is no listing). Those answers, and a store that says
//! listing is not supported, mean "no listing"; so does a listing that lacks the array's own
//! metadata, which was just read (object_store turns a 404 to `PROPFIND` into an empty
//! listing). Any other failure (a connection refused or timed out after the store's retries,
//! denied access) is an error: a check that silently skipped the listing would miss keys
//! outside the grid.

use super::walk::{Entry, Kind};
use crate::errors::{Error, Result};
use crate::stores::{Location, OpenOptions, WaitOnRuntime};
use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use std::sync::Arc;
use zarrs::storage::storage_adapter::async_to_sync::AsyncToSyncBlockOn;

/// The object store at a URL, for its listing and for the check's fetches.
pub(super) struct ObjectKeys {
    store: Arc<dyn ObjectStore>,
    location: String,
    /// An `http(s)://` store, which lists through WebDAV only.
    http: bool,
}

/// The keys under the array's prefix.
pub(super) enum Keys {
    /// Every key (relative to the array's prefix) with its size.
    Listed(Vec<Entry>),
    /// The store gave no listing: the chunk grid is walked instead.
    Unlisted,
}

impl ObjectKeys {
    /// The object store at `location` (an object-store URL), with `opts`' store options.
    pub(super) fn open(location: &Location, opts: &OpenOptions) -> Result<Self> {
        let store = crate::stores::object_store_for_url(location.as_str(), &opts.store_pairs())?;
        Ok(ObjectKeys {
            store,
            location: location.as_str().to_string(),
            http: matches!(location.scheme(), "http" | "https"),
        })
    }

    /// The object store.
    pub(super) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The keys under `prefix` (the array's node path without its leading `/`), or why the
    /// store gave none; `metadata` is the array's metadata key relative to `prefix`
    /// (`zarr.json` or `.zarray`), which a real listing holds.
    pub(super) fn list(&self, prefix: &str, metadata: &str) -> Result<Keys> {
        let dir = (!prefix.is_empty()).then(|| ObjectPath::from(prefix));
        let listing = self.store.list(dir.as_ref()).try_collect::<Vec<_>>();
        let listed = WaitOnRuntime::new()?.block_on(listing);
        let metas = match listed {
            Ok(metas) => metas,
            Err(e) if self.no_listing(&e) => return Ok(Keys::Unlisted),
            Err(e) => {
                let what = if prefix.is_empty() {
                    "the store root"
                } else {
                    prefix
                };
                return Err(Error::store(
                    &self.location,
                    format!(
                        "cannot list the keys under {what} ({e}); the check needs the listing \
                         to find keys outside the chunk grid and unknown files: check the URL \
                         and the store options (endpoint, region, credentials), give the \
                         credentials list access (on S3 s3:ListBucket for the bucket), or try \
                         again when the store answers"
                    ),
                    Some(Box::new(e)),
                ));
            }
        };
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let mut out = Vec::with_capacity(metas.len());
        for meta in metas {
            let key = meta.location.as_ref();
            crate::stores::check_key(key, "the store's listing")?;
            let rel = key.strip_prefix(start.as_str()).unwrap_or(key);
            out.push(Entry {
                rel: rel.to_string(),
                kind: Kind::File(meta.size),
            });
        }
        if !out.iter().any(|e| e.rel == metadata) {
            // The array's metadata was just read: this is no listing of its keys.
            return Ok(Keys::Unlisted);
        }
        out.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(Keys::Listed(out))
    }

    /// Whether a listing that failed with `e` means the store gives no listing (see the
    /// module docs), rather than a failure to report.
    fn no_listing(&self, e: &object_store::Error) -> bool {
        use object_store::Error as E;
        match e {
            E::NotSupported { .. } | E::NotImplemented { .. } | E::NotFound { .. } => true,
            E::PermissionDenied { .. } => self.http,
            _ if self.http => {
                let text = e.to_string();
                // object_store's request error type is not public: its status is read from
                // its message ("... status code: 405 Method Not Allowed ...").
                let status = text
                    .split_once("status code: ")
                    .and_then(|(_, rest)| rest.get(..3))
                    .and_then(|code| code.parse::<u16>().ok());
                matches!(status, Some(400 | 403 | 404 | 405 | 501))
                    || text.contains("PROPFIND response")
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(http: bool) -> ObjectKeys {
        ObjectKeys {
            store: Arc::new(object_store::memory::InMemory::new()),
            location: "test://".into(),
            http,
        }
    }

    fn generic(message: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "HTTP",
            source: message.to_string().into(),
        }
    }

    #[test]
    fn only_refusals_of_the_listing_walk_the_grid() {
        let refused = generic(
            "Error performing PROPFIND http://x/a in 2ms - Server returned non-2xx status \
             code: 405 Method Not Allowed: <html>",
        );
        let unsupported = object_store::Error::NotSupported {
            source: "no listing".into(),
        };
        let down = generic("Error performing PROPFIND http://x/a in 30s - error sending request");
        let failing = generic("... Server returned non-2xx status code: 500 Internal Server Error");
        assert!(keys(true).no_listing(&refused));
        assert!(keys(true).no_listing(&unsupported) && keys(false).no_listing(&unsupported));
        assert!(!keys(true).no_listing(&down));
        assert!(!keys(true).no_listing(&failing));
        // On S3 a refusal is an error to report (no list permission), not a missing listing.
        assert!(!keys(false).no_listing(&refused));
        let denied = object_store::Error::PermissionDenied {
            path: "a".into(),
            source: "403".into(),
        };
        assert!(keys(true).no_listing(&denied) && !keys(false).no_listing(&denied));
    }
}
