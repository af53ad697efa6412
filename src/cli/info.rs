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
    let described = match array.varlen_kind() {
        Some(_) => Described::varlen(array.describe_varlen()?),
        None => Described::fixed(array.describe()?),
    };
    described.print(store, path)
}

/// What `info` prints of an array, of either kind of elements: its layout, and its data
/// type as the kind names it.
struct Described {
    zarr_format: u8,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    inner_chunks: Option<Vec<u64>>,
    data_type: String,
    codecs: Vec<String>,
    fill_value: String,
}

impl Described {
    fn fixed(i: zarrbuf::ArrayInfo) -> Self {
        Described {
            zarr_format: i.zarr_format,
            shape: i.shape,
            chunks: i.chunks,
            inner_chunks: i.inner_chunks,
            data_type: i.data_type.to_string(),
            codecs: i.codecs,
            fill_value: i.fill_value,
        }
    }

    fn varlen(i: zarrbuf::VarLenInfo) -> Self {
        Described {
            zarr_format: i.zarr_format,
            shape: i.shape,
            chunks: i.chunks,
            inner_chunks: i.inner_chunks,
            data_type: format!(
                "{} (variable-length {}; stored as {})",
                zarr_type_name(i.data_type),
                i.data_type,
                i.stored_type
            ),
            codecs: i.codecs,
            fill_value: i.fill_value,
        }
    }

    fn print(&self, store: &str, path: &str) -> Result<()> {
        outln!("array:      {}", label(store, path))?;
        outln!("zarr:       v{}", self.zarr_format)?;
        outln!("shape:      {:?}", self.shape)?;
        match &self.inner_chunks {
            Some(inner) => {
                outln!("shards:     {:?}", self.chunks)?;
                outln!("chunks:     {inner:?} (inside each shard)")?;
            }
            None => outln!("chunks:     {:?}", self.chunks)?,
        }
        outln!("data type:  {}", self.data_type)?;
        outln!("codecs:     {}", self.codecs.join(", "))?;
        outln!("fill value: {}", self.fill_value)?;
        Ok(())
    }
}
