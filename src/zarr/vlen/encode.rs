//! Building one chunk of variable-length elements for a write: encoded straight into zarr's
//! `vlen-utf8` / `vlen-bytes` layout ([`VlenEncoder`]; numcodecs' `VLenUTF8` / `VLenBytes`,
//! the same bytes), or gathered as zarrs' variable-length `ArrayBytes` ([`VlenGather`]) for
//! chains zarrs encodes (sharding, array-to-array codecs).
//!
//! The `vlen-utf8` / `vlen-bytes` layout of a chunk of `n` elements: a little-endian `u32`
//! `n`, then for each element in C order a little-endian `u32` byte length followed by its
//! bytes. Counts and lengths over `u32::MAX` cannot be written (an error says so).

use crate::errors::{Error, Result};
use zarrs::array::codec::{VlenBytesCodec, VlenUtf8Codec, VlenV2Codec};
use zarrs::array::{Array, ArrayBytes, ArrayBytesOffsets, ArrayShardedExt};

/// Where the elements of one chunk go, one by one in C order.
pub(crate) trait ElementSink {
    /// Appends one element.
    fn push(&mut self, element: &[u8]) -> Result<()>;

    /// Appends the elements of a run of Arrow offsets into `values` (`offsets.len() - 1`
    /// elements; element `i` is `values[offsets[i]..offsets[i + 1]]`).
    fn push_run(&mut self, offsets: &[i64], values: &[u8]) -> Result<()> {
        for w in offsets.windows(2) {
            let bytes = usize::try_from(w[0])
                .ok()
                .zip(usize::try_from(w[1]).ok())
                .and_then(|(a, b)| values.get(a..b))
                .ok_or_else(|| bad_offsets(w[0], w[1], values.len()))?;
            self.push(bytes)?;
        }
        Ok(())
    }
}

fn bad_offsets(a: i64, b: i64, len: usize) -> Error {
    Error::InvalidArgument(format!(
        "variable-length offsets {a}..{b} lie outside the values ({len} bytes)"
    ))
}

/// Whether every element pushed so far equals the fill value.
#[derive(Debug)]
struct FillTracker {
    fill: Vec<u8>,
    all_fill: bool,
}

impl FillTracker {
    fn see(&mut self, element: &[u8]) {
        self.all_fill = self.all_fill && element == self.fill.as_slice();
    }
}

/// Encodes one chunk into the `vlen-utf8` / `vlen-bytes` layout (see the module docs).
#[derive(Debug)]
pub(crate) struct VlenEncoder {
    out: Vec<u8>,
    expected: usize,
    count: usize,
    fill: FillTracker,
}

impl VlenEncoder {
    /// An encoder for a chunk of `expected` elements whose fill value is `fill`;
    /// `value_bytes` is a hint of the elements' total length.
    pub(crate) fn new(expected: usize, value_bytes: usize, fill: &[u8]) -> Result<Self> {
        if u32::try_from(expected).is_err() {
            return Err(Error::Unsupported(format!(
                "a chunk of {expected} variable-length elements: vlen-utf8 and vlen-bytes \
                 count a chunk's elements in 32 bits (at most {}); choose smaller chunks",
                u32::MAX
            )));
        }
        let mut out = Vec::with_capacity(4 + 4 * expected + value_bytes);
        out.extend_from_slice(&(expected as u32).to_le_bytes());
        Ok(VlenEncoder {
            out,
            expected,
            count: 0,
            fill: FillTracker {
                fill: fill.to_vec(),
                all_fill: true,
            },
        })
    }

    /// The encoded chunk, and whether every element was the fill value. An error when the
    /// number of elements pushed is not the number announced.
    pub(crate) fn finish(self) -> Result<(Vec<u8>, bool)> {
        if self.count != self.expected {
            return Err(Error::ShapeMismatch(format!(
                "a chunk of {} variable-length elements was given {}",
                self.expected, self.count
            )));
        }
        Ok((self.out, self.fill.all_fill))
    }
}

impl ElementSink for VlenEncoder {
    fn push(&mut self, element: &[u8]) -> Result<()> {
        let len = u32::try_from(element.len()).map_err(|_| {
            Error::Unsupported(format!(
                "an element of {} bytes: vlen-utf8 and vlen-bytes store each element's length \
                 in 32 bits (at most {} bytes)",
                element.len(),
                u32::MAX
            ))
        })?;
        if self.count == self.expected {
            return Err(Error::ShapeMismatch(format!(
                "a chunk of {} variable-length elements was given more",
                self.expected
            )));
        }
        self.count += 1;
        self.fill.see(element);
        self.out.extend_from_slice(&len.to_le_bytes());
        self.out.extend_from_slice(element);
        Ok(())
    }
}

/// Gathers one chunk as zarrs' variable-length [`ArrayBytes`] (values and `usize` offsets),
/// for chains zarrs encodes.
#[derive(Debug)]
pub(crate) struct VlenGather {
    values: Vec<u8>,
    offsets: Vec<usize>,
    fill: FillTracker,
}

impl VlenGather {
    /// A gather of about `expected` elements whose fill value is `fill`.
    pub(crate) fn new(expected: usize, value_bytes: usize, fill: &[u8]) -> Self {
        let mut offsets = Vec::with_capacity(expected + 1);
        offsets.push(0);
        VlenGather {
            values: Vec::with_capacity(value_bytes),
            offsets,
            fill: FillTracker {
                fill: fill.to_vec(),
                all_fill: true,
            },
        }
    }

    /// The elements as zarrs' array bytes, and whether every element was the fill value.
    pub(crate) fn finish(self) -> Result<(ArrayBytes<'static>, bool)> {
        let offsets = ArrayBytesOffsets::new(self.offsets)
            .map_err(|e| Error::InvalidArgument(format!("variable-length offsets: {e}")))?;
        let bytes = ArrayBytes::new_vlen(self.values, offsets)
            .map_err(|e| Error::InvalidArgument(format!("variable-length offsets: {e}")))?;
        Ok((bytes, self.fill.all_fill))
    }
}

impl ElementSink for VlenGather {
    fn push(&mut self, element: &[u8]) -> Result<()> {
        self.fill.see(element);
        self.values.extend_from_slice(element);
        self.offsets.push(self.values.len());
        Ok(())
    }
}

/// Whether zarrbuf encodes `array`'s chunks itself with [`VlenEncoder`]: the chain is a
/// `vlen-utf8`, `vlen-bytes` (or zarrs' `vlen_v2`) codec followed by bytes-to-bytes codecs
/// only, with no sharding and no array-to-array codec before it. Other chains (sharded
/// arrays) are encoded by zarrs from [`VlenGather`]'s array bytes.
pub(crate) fn encodes_vlen_itself<S: ?Sized>(array: &Array<S>) -> bool {
    let codecs = array.codecs();
    let a2b = codecs.array_to_bytes_codec().as_any();
    !array.is_sharded()
        && codecs.array_to_array_codecs().is_empty()
        && (a2b.is::<VlenUtf8Codec>() || a2b.is::<VlenBytesCodec>() || a2b.is::<VlenV2Codec>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_count_then_length_prefixed_elements() {
        let mut e = VlenEncoder::new(3, 6, b"").unwrap();
        e.push(b"ab").unwrap();
        e.push(b"").unwrap();
        e.push("é".as_bytes()).unwrap();
        let (bytes, all_fill) = e.finish().unwrap();
        let mut want = vec![3, 0, 0, 0, 2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0, 2, 0, 0, 0];
        want.extend_from_slice("é".as_bytes());
        assert_eq!(bytes, want);
        assert!(!all_fill);
    }

    #[test]
    fn runs_of_offsets_and_fill_detection() {
        let mut e = VlenEncoder::new(2, 0, b"x").unwrap();
        e.push_run(&[1, 2, 3], b"axxb").unwrap();
        let (bytes, all_fill) = e.finish().unwrap();
        assert_eq!(bytes, [2, 0, 0, 0, 1, 0, 0, 0, b'x', 1, 0, 0, 0, b'x']);
        assert!(all_fill);
        let mut g = VlenGather::new(2, 0, b"");
        g.push_run(&[0, 1, 4], b"axxb").unwrap();
        let (bytes, all_fill) = g.finish().unwrap();
        assert!(!all_fill);
        let ArrayBytes::Variable(v) = bytes else {
            panic!("not variable-length")
        };
        assert_eq!(&**v.offsets(), &[0, 1, 4]);
        assert_eq!(&v.bytes()[..], b"axxb");
    }

    #[test]
    fn wrong_counts_and_bad_offsets_are_errors() {
        let mut e = VlenEncoder::new(1, 0, b"").unwrap();
        assert!(matches!(e.finish(), Err(Error::ShapeMismatch(_))));
        e = VlenEncoder::new(1, 0, b"").unwrap();
        e.push(b"a").unwrap();
        assert!(matches!(e.push(b"b"), Err(Error::ShapeMismatch(_))));
        let mut e = VlenEncoder::new(1, 0, b"").unwrap();
        assert!(matches!(
            e.push_run(&[0, 9], b"ab"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(VlenEncoder::new(usize::MAX, 0, b"").is_err());
    }
}
