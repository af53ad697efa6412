//! What happens when zarrs refuses an array's metadata: the equivalent v2 metadata zarrbuf
//! opens instead (structured dtypes, null fill values), or a sentence that says why the array
//! does not open.

use crate::errors::{Error, Result};

/// After zarrs refused an array's metadata: the equivalent v2 metadata zarrbuf opens instead
/// (structured dtypes, null fill values; see `plugins::dtypes::v2_metadata_fallback`), or the error,
/// given the `.zarray` bytes if there are any.
pub(crate) fn open_fallback(
    name: &str,
    refused: zarrs::array::ArrayCreateError,
    zarray: Option<&[u8]>,
) -> Result<zarrs::array::ArrayMetadata> {
    match zarray.and_then(crate::zarr::plugins::dtypes::v2_metadata_fallback) {
        Some(Ok(meta)) => Ok(meta),
        Some(Err(why)) => Err(Error::zarr(
            name,
            format!("cannot open the array: {why}"),
            Some(Box::new(refused)),
        )),
        None => Err(Error::zarr(
            name,
            describe_open_error(&refused),
            Some(Box::new(refused)),
        )),
    }
}

/// A sentence for the reasons an array does not open.
pub(crate) fn describe_open_error(e: &zarrs::array::ArrayCreateError) -> String {
    use zarrs::array::ArrayCreateError as E;
    match e {
        E::MissingMetadata => {
            "no array metadata (neither zarr.json nor .zarray) at this path; check the store and --path".into()
        }
        other => {
            let text = other.to_string();
            let names = |ids: &[&'static str]| -> Option<&'static str> {
                ids.iter().copied().find(|id| {
                    text.contains(&format!("codec {id} "))
                        || text.contains(&format!("codec numcodecs.{id} "))
                        || text.contains(&format!("id: \"{id}\""))
                })
            };
            if let Some(id) = names(&["json2", "msgpack2", "pickle", "vlen-array"]) {
                format!(
                    "cannot open the array: {text}. Its elements are Python objects (numcodecs' \
                     {id} filter), which have no fixed-size form for zarrbuf buffers; read it with \
                     zarr-python"
                )
            } else if !cfg!(feature = "zfp") && names(&["zfpy", "zfp"]).is_some() {
                format!(
                    "cannot open the array: {text}. zarrbuf reads zfp/zfpy (numcodecs ZFPY) when \
                     built with the `zfp` feature (cargo build --features zfp; building the zfp \
                     C library needs cmake and libclang)"
                )
            } else {
                format!("cannot open the array: {text}")
            }
        }
    }
}
