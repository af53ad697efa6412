//! [`VarLenBuffer`]: variable-length strings or byte strings in Arrow's *large* layout (an
//! `i64` offsets buffer and one values buffer) in any memory.

use super::{Buffer, BufferPrototype};
use crate::data_types::VarLenKind;
use crate::errors::{Error, Result};
use crate::place::Memory;

/// An n-d array of variable-length elements (strings or byte strings) in Arrow's *large*
/// string/binary layout, in host, pinned or CUDA memory.
///
/// # Invariants
///
/// - the element count `n` is the product of [`shape`](Self::shape) (1 for a 0-d array), and
///   elements are in C order of the shape;
/// - [`offsets`](Self::offsets) holds `n + 1` little-endian `i64`s (`8 * (n + 1)` bytes): the
///   first is 0, they never decrease, and the last is the length of
///   [`values`](Self::values); element `i` is `values[offsets[i]..offsets[i + 1]]`;
/// - for [`VarLenKind::Utf8`] every element is valid UTF-8;
/// - `offsets` and `values` live in the same kind of memory.
///
/// The offsets and values buffers are exactly what pyarrow's `large_string` /
/// `large_binary` arrays and cuDF's string columns (with 64-bit offsets) hold, so they can be
/// handed over without a copy. Constructors check the invariants; on device memory
/// [`from_parts`](Self::from_parts) checks only the sizes (reading the offsets would need a
/// copy to the host), so a device `VarLenBuffer` made from foreign parts trusts its maker for
/// the rest.
///
/// ```
/// use zarrbuf::{BufferPrototype, VarLenBuffer};
/// let names = VarLenBuffer::from_strings(vec![2, 2], ["ab", "", "αβγ", "d"])?;
/// assert_eq!(names.len(), 4);
/// assert_eq!(names.get_str(2)?, "αβγ");
/// assert_eq!(names.offsets().to_vec()?.len(), 5 * 8);
/// assert_eq!(names.values().len(), 2 + 6 + 1);
/// let all: Vec<String> = names.iter_str()?.collect::<zarrbuf::Result<_>>()?;
/// assert_eq!(all, ["ab", "", "αβγ", "d"]);
/// assert_eq!(names.prototype().memory(), zarrbuf::Memory::Host);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct VarLenBuffer {
    shape: Vec<u64>,
    kind: VarLenKind,
    offsets: Buffer,
    values: Buffer,
}

/// The element count of `shape`, or an error when it overflows.
pub(crate) fn element_count(shape: &[u64]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            Error::InvalidSize(format!(
                "a variable-length array of shape {shape:?} has more elements than this \
                 machine can address"
            ))
        })
}

/// Checks host offsets (`n + 1` little-endian i64s) against a values length; returns the
/// offsets as `i64`s.
fn check_offsets(offsets: &[u8], n: usize, values_len: usize) -> Result<Vec<i64>> {
    let bad = |why: String| {
        Err(Error::InvalidArgument(format!(
            "variable-length offsets: {why}"
        )))
    };
    let offs: Vec<i64> = offsets
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    if offs.len() != n + 1 {
        return bad(format!(
            "{} offsets for {n} elements; expected {}",
            offs.len(),
            n + 1
        ));
    }
    if offs[0] != 0 {
        return bad(format!("the first offset is {}, not 0", offs[0]));
    }
    if let Some(i) = offs.windows(2).position(|w| w[1] < w[0]) {
        return bad(format!(
            "offset {} ({}) is less than offset {i} ({}); offsets never decrease",
            i + 1,
            offs[i + 1],
            offs[i]
        ));
    }
    let last = offs[n];
    if u64::try_from(last).ok() != Some(values_len as u64) {
        return bad(format!(
            "the last offset is {last} but the values hold {values_len} bytes; they must agree"
        ));
    }
    Ok(offs)
}

impl VarLenBuffer {
    /// A variable-length buffer from its parts, checked against the invariants (see the
    /// type's docs): on host and pinned memory everything (sizes, offsets, UTF-8 for
    /// [`VarLenKind::Utf8`]); on device memory the sizes only (`offsets` is `8 * (n + 1)`
    /// bytes and in the same kind of memory as `values`), since reading device offsets needs
    /// a copy to the host — the caller vouches for the rest there.
    ///
    /// ```
    /// use zarrbuf::{Buffer, VarLenBuffer, VarLenKind};
    /// let offsets: Vec<u8> = [0i64, 3, 3, 5].iter().flat_map(|o| o.to_le_bytes()).collect();
    /// let v = VarLenBuffer::from_parts(
    ///     vec![3], VarLenKind::Bytes, Buffer::from_vec(offsets), Buffer::from_vec(b"a\0bcd".to_vec()))?;
    /// assert_eq!(v.get_bytes(0)?, b"a\0b");
    /// assert_eq!(v.get_bytes(1)?, b"");
    /// let bad: Vec<u8> = [0i64, 9].iter().flat_map(|o| o.to_le_bytes()).collect();
    /// assert!(VarLenBuffer::from_parts(
    ///     vec![1], VarLenKind::Bytes, Buffer::from_vec(bad), Buffer::from_vec(vec![1])).is_err());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_parts(
        shape: Vec<u64>,
        kind: VarLenKind,
        offsets: Buffer,
        values: Buffer,
    ) -> Result<Self> {
        let n = element_count(&shape)?;
        let want = n
            .checked_add(1)
            .and_then(|m| m.checked_mul(8))
            .ok_or_else(|| Error::InvalidSize(format!("offsets of {n} elements")))?;
        if offsets.len() != want {
            return Err(Error::InvalidArgument(format!(
                "variable-length offsets of shape {shape:?} ({n} elements) take {want} bytes \
                 (n + 1 little-endian i64s), but the offsets buffer has {} bytes",
                offsets.len()
            )));
        }
        if offsets.memory() != values.memory() {
            return Err(Error::InvalidArgument(format!(
                "variable-length offsets in {} and values in {}: both must be in the same memory",
                offsets.memory(),
                values.memory()
            )));
        }
        if offsets.is_host_accessible() {
            let offs = check_offsets(&offsets.as_host_bytes()?, n, values.len())?;
            if kind == VarLenKind::Utf8 {
                let bytes = values.as_host_bytes()?;
                for (i, w) in offs.windows(2).enumerate() {
                    // The offsets were checked against the values' length above.
                    let s = &bytes[w[0] as usize..w[1] as usize];
                    if let Err(e) = std::str::from_utf8(s) {
                        return Err(Error::InvalidArgument(format!(
                            "variable-length element {i} is not valid UTF-8 ({e}); use \
                             VarLenKind::Bytes for arbitrary bytes"
                        )));
                    }
                }
            }
        }
        Ok(Self::from_checked(shape, kind, offsets, values))
    }

    /// A buffer from parts that zarrbuf's own code made and knows to satisfy the invariants.
    pub(crate) fn from_checked(
        shape: Vec<u64>,
        kind: VarLenKind,
        offsets: Buffer,
        values: Buffer,
    ) -> Self {
        VarLenBuffer {
            shape,
            kind,
            offsets,
            values,
        }
    }

    /// UTF-8 strings of the given shape (C order), in host memory.
    ///
    /// ```
    /// let v = zarrbuf::VarLenBuffer::from_strings(vec![3], ["x", "", "ÿ"])?;
    /// assert_eq!(v.get_str(2)?, "ÿ");
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_strings<I, T>(shape: Vec<u64>, strings: I) -> Result<Self>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<str>,
    {
        Self::build(shape, VarLenKind::Utf8, strings.into_iter().map(StrBytes))
    }

    /// Byte strings of the given shape (C order), in host memory.
    ///
    /// ```
    /// let v = zarrbuf::VarLenBuffer::from_bytes_iter(vec![2], [&b"\0\x01"[..], b""])?;
    /// assert_eq!(v.get_bytes(0)?, b"\0\x01");
    /// assert_eq!(v.kind(), zarrbuf::VarLenKind::Bytes);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn from_bytes_iter<I, T>(shape: Vec<u64>, items: I) -> Result<Self>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        Self::build(shape, VarLenKind::Bytes, items.into_iter())
    }

    fn build<T: AsRef<[u8]>>(
        shape: Vec<u64>,
        kind: VarLenKind,
        items: impl Iterator<Item = T>,
    ) -> Result<Self> {
        let n = element_count(&shape)?;
        let mut offsets = Vec::with_capacity(8 * (n.min(1 << 20) + 1));
        let mut values = Vec::new();
        offsets.extend_from_slice(&0i64.to_le_bytes());
        let mut count = 0usize;
        for item in items {
            count += 1;
            if count > n {
                break;
            }
            values.extend_from_slice(item.as_ref());
            offsets.extend_from_slice(&(values.len() as i64).to_le_bytes());
        }
        if count != n {
            return Err(Error::ShapeMismatch(format!(
                "shape {shape:?} holds {n} elements but {} were given",
                if count > n {
                    "more".to_string()
                } else {
                    count.to_string()
                }
            )));
        }
        Ok(Self::from_checked(
            shape,
            kind,
            Buffer::from_vec(offsets),
            Buffer::from_vec(values),
        ))
    }

    /// The shape (C order).
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// UTF-8 strings or byte strings.
    pub fn kind(&self) -> VarLenKind {
        self.kind
    }

    /// The number of elements (the product of the shape).
    pub fn len(&self) -> usize {
        self.offsets.len() / 8 - 1
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The offsets: `len() + 1` little-endian `i64`s.
    pub fn offsets(&self) -> &Buffer {
        &self.offsets
    }

    /// The values: every element's bytes, one after another.
    pub fn values(&self) -> &Buffer {
        &self.values
    }

    /// The kind of memory both buffers live in.
    pub fn memory(&self) -> Memory {
        self.values.memory()
    }

    /// A prototype that makes memory where this buffer lives.
    pub fn prototype(&self) -> BufferPrototype {
        BufferPrototype::for_memory(self.memory())
    }

    /// Takes the buffers apart: `(shape, kind, offsets, values)`.
    pub fn into_parts(self) -> (Vec<u64>, VarLenKind, Buffer, Buffer) {
        (self.shape, self.kind, self.offsets, self.values)
    }

    /// This buffer in host memory: itself (the same storage) when it already is host
    /// accessible, else a copy of each of its two buffers.
    ///
    /// ```
    /// let v = zarrbuf::VarLenBuffer::from_strings(vec![1], ["a"])?;
    /// assert_eq!(v.to_host()?.values().storage_id(), v.values().storage_id());
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn to_host(&self) -> Result<VarLenBuffer> {
        let host = BufferPrototype::cpu();
        Ok(Self::from_checked(
            self.shape.clone(),
            self.kind,
            host_copy(&self.offsets, &host)?,
            host_copy(&self.values, &host)?,
        ))
    }

    /// The byte range of element `i` in the values (host memory only).
    fn range(&self, i: usize) -> Result<(usize, usize)> {
        let n = self.len();
        if i >= n {
            return Err(Error::OutOfBounds(format!(
                "element {i} of a variable-length buffer of {n} elements"
            )));
        }
        let offs = self.host_bytes(&self.offsets)?;
        let at = |k: usize| {
            let raw: [u8; 8] = offs[8 * k..8 * k + 8].try_into().unwrap_or_default();
            i64::from_le_bytes(raw) as usize
        };
        Ok((at(i), at(i + 1)))
    }

    fn host_bytes<'a>(&self, b: &'a Buffer) -> Result<super::HostBytes<'a>> {
        if !b.is_host_accessible() {
            return Err(Error::NotHostAccessible(format!(
                "a variable-length buffer in {}",
                b.memory()
            )));
        }
        b.as_host_bytes()
    }

    /// The bytes of element `i` (flat C-order index), copied out; host memory only
    /// (`NotHostAccessible` on a device: call [`to_host`](Self::to_host) first).
    pub fn get_bytes(&self, i: usize) -> Result<Vec<u8>> {
        let (a, b) = self.range(i)?;
        Ok(self.host_bytes(&self.values)?[a..b].to_vec())
    }

    /// Element `i` (flat C-order index) as a string; host memory only. Byte strings that are
    /// not UTF-8 are an error.
    pub fn get_str(&self, i: usize) -> Result<String> {
        let bytes = self.get_bytes(i)?;
        String::from_utf8(bytes).map_err(|e| {
            Error::DataType(format!(
                "element {i} of these {} is not valid UTF-8 ({e})",
                self.kind
            ))
        })
    }

    /// Every element as a string, in C order; host memory only (the error comes at once).
    pub fn iter_str(&self) -> Result<impl Iterator<Item = Result<String>> + '_> {
        self.host_bytes(&self.offsets)?;
        Ok((0..self.len()).map(move |i| self.get_str(i)))
    }

    /// Every element's bytes, in C order; host memory only (the error comes at once).
    pub fn iter_bytes(&self) -> Result<impl Iterator<Item = Result<Vec<u8>>> + '_> {
        self.host_bytes(&self.offsets)?;
        Ok((0..self.len()).map(move |i| self.get_bytes(i)))
    }
}

fn host_copy(b: &Buffer, host: &BufferPrototype) -> Result<Buffer> {
    if b.is_host_accessible() {
        Ok(b.clone())
    } else {
        b.copy_to_new(host)
    }
}

/// A string seen as its UTF-8 bytes.
struct StrBytes<T>(T);

impl<T: AsRef<str>> AsRef<[u8]> for StrBytes<T> {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref().as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offs(v: &[i64]) -> Buffer {
        Buffer::from_vec(v.iter().flat_map(|o| o.to_le_bytes()).collect())
    }

    #[test]
    fn from_strings_layout() {
        let v = VarLenBuffer::from_strings(vec![2, 2], ["ab", "", "αβ", "d"]).unwrap();
        let o: Vec<i64> = v
            .offsets()
            .to_vec()
            .unwrap()
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(o, [0, 2, 2, 6, 7]);
        assert_eq!(v.values().to_vec().unwrap(), "abαβd".as_bytes());
        assert_eq!(v.shape(), &[2, 2]);
        assert_eq!(v.get_str(3).unwrap(), "d");
        assert!(matches!(v.get_str(4), Err(Error::OutOfBounds(_))));
    }

    #[test]
    fn zero_d_and_empty_shapes() {
        let v = VarLenBuffer::from_strings(vec![], ["only"]).unwrap();
        assert_eq!(v.len(), 1);
        let e = VarLenBuffer::from_strings(vec![0, 3], Vec::<&str>::new()).unwrap();
        assert!(e.is_empty());
        assert_eq!(e.offsets().len(), 8);
    }

    #[test]
    fn count_mismatch_is_an_error() {
        assert!(matches!(
            VarLenBuffer::from_strings(vec![3], ["a"]),
            Err(Error::ShapeMismatch(_))
        ));
        assert!(matches!(
            VarLenBuffer::from_strings(vec![1], ["a", "b"]),
            Err(Error::ShapeMismatch(_))
        ));
    }

    #[test]
    fn from_parts_checks_everything_on_the_host() {
        let vals = || Buffer::from_vec(b"abc".to_vec());
        let ok = VarLenBuffer::from_parts(vec![2], VarLenKind::Utf8, offs(&[0, 1, 3]), vals());
        assert_eq!(ok.unwrap().get_str(1).unwrap(), "bc");
        for (o, what) in [
            (offs(&[0, 1]), "count"),
            (offs(&[1, 2, 3]), "first"),
            (offs(&[0, 2, 1]), "decreasing"),
            (offs(&[0, 1, 2]), "last"),
            (Buffer::from_vec(vec![0; 17]), "size"),
        ] {
            let r = VarLenBuffer::from_parts(vec![2], VarLenKind::Bytes, o, vals());
            assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
        }
        let bad = Buffer::from_vec(vec![0xff, b'a']);
        let r = VarLenBuffer::from_parts(vec![1], VarLenKind::Utf8, offs(&[0, 2]), bad.clone());
        assert!(r.unwrap_err().to_string().contains("UTF-8"));
        let b = VarLenBuffer::from_parts(vec![1], VarLenKind::Bytes, offs(&[0, 2]), bad).unwrap();
        assert_eq!(b.get_bytes(0).unwrap(), [0xff, b'a']);
        assert!(matches!(b.get_str(0), Err(Error::DataType(_))));
    }

    #[test]
    fn iterators_and_host_copy() {
        let v = VarLenBuffer::from_bytes_iter(vec![2], [&b"\0"[..], b"x\0y"]).unwrap();
        let all: Vec<Vec<u8>> = v.iter_bytes().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(all, [b"\0".to_vec(), b"x\0y".to_vec()]);
        let h = v.to_host().unwrap();
        assert_eq!(h.offsets().storage_id(), v.offsets().storage_id());
        let (shape, kind, o, _) = h.into_parts();
        assert_eq!((shape, kind, o.len()), (vec![2], VarLenKind::Bytes, 24));
    }
}
