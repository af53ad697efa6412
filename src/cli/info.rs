//! `zarrbuf info`: what an array is (its shape, chunks, data type, codecs, fill value), for
//! arrays of fixed-size and of variable-length elements alike, or a group's hierarchy.

use super::names::label;
use super::output::{out, outln};
use super::read_report::zarr_type_name;
use super::source::{Reader, Source};
use zarrbuf::{Error, Result, options::OpenOptions};

/// `zarrbuf info STORE PATH` (`--json`: the hierarchy below it as JSON).
pub(crate) fn info(store: &str, path: &str, json: bool, opts: &OpenOptions) -> Result<()> {
    if json {
        let hierarchy = zarrbuf::list_hierarchy_opt(store, path, opts)?;
        let text = serde_json::to_string_pretty(&hierarchy)
            .map_err(|e| Error::InvalidArgument(format!("cannot write the JSON: {e}")))?;
        outln!("{text}")?;
        return Ok(());
    }
    let array = match Source::open(store, path, Reader::ByLocation, opts) {
        Ok(array) => array,
        Err(Error::IsGroup { .. }) => {
            out!("{}", zarrbuf::list_hierarchy_opt(store, path, opts)?)?;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if array.varlen_kind().is_some() {
        return varlen_info(store, path, &array.describe_varlen()?);
    }
    let i = array.describe()?;
    outln!("array:      {}", label(store, path))?;
    outln!("zarr:       v{}", i.zarr_format)?;
    outln!("shape:      {:?}", i.shape)?;
    match &i.inner_chunks {
        Some(inner) => {
            outln!("shards:     {:?}", i.chunks)?;
            outln!("chunks:     {inner:?} (inside each shard)")?;
        }
        None => outln!("chunks:     {:?}", i.chunks)?,
    }
    outln!("data type:  {}", i.data_type)?;
    outln!("codecs:     {}", i.codecs.join(", "))?;
    outln!("fill value: {}", i.fill_value)?;
    Ok(())
}

/// `zarrbuf info` of a variable-length array.
fn varlen_info(store: &str, path: &str, i: &zarrbuf::VarLenInfo) -> Result<()> {
    outln!("array:      {}", label(store, path))?;
    outln!("zarr:       v{}", i.zarr_format)?;
    outln!("shape:      {:?}", i.shape)?;
    match &i.inner_chunks {
        Some(inner) => {
            outln!("shards:     {:?}", i.chunks)?;
            outln!("chunks:     {inner:?} (inside each shard)")?;
        }
        None => outln!("chunks:     {:?}", i.chunks)?,
    }
    outln!(
        "data type:  {} (variable-length {}; stored as {})",
        zarr_type_name(i.data_type),
        i.data_type,
        i.stored_type
    )?;
    outln!("codecs:     {}", i.codecs.join(", "))?;
    outln!("fill value: {}", i.fill_value)?;
    Ok(())
}
