//! Buffers over several devices (vkdispatch's multi-device buffers): a [`MultiPrototype`]
//! makes one allocation per device; a [`MultiBuffer`] / [`MultiNDBuffer`] holds one part per
//! device, either the same data on each ([`Placement::Replicate`]) or consecutive
//! chunk-aligned pieces of one array ([`Placement::Split`]).
//!
//! Several host memories can stand in for several devices ([`MultiPrototype::host`]): the
//! partitioning and the parallel pipelines are then exercised without a GPU.

use super::{Buffer, BufferPrototype, NDBuffer};
use crate::data_types::Order;
use crate::errors::{Error, Result};
use crate::place::Device;
use std::ops::Range;

/// Where new memory comes from on each of several devices: one [`BufferPrototype`] per part.
///
/// ```
/// use zarrbuf::{BufferPrototype, Device};
/// use zarrbuf::multi::MultiPrototype;
/// let gpus = BufferPrototype::cuda_devices(&[0, 1])?;
/// assert_eq!(gpus.devices(), vec![Device::Cuda(0), Device::Cuda(1)]);
/// let stand_in = MultiPrototype::host(3)?;
/// assert_eq!(stand_in.len(), 3);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiPrototype {
    parts: Vec<BufferPrototype>,
}

impl MultiPrototype {
    /// One part per prototype, in order.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty list.
    pub fn new(parts: Vec<BufferPrototype>) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi-device prototype needs at least one device".into(),
            ));
        }
        Ok(MultiPrototype { parts })
    }

    /// `n` parts in host memory, standing in for `n` devices (what CI tests with).
    ///
    /// # Errors
    /// `InvalidArgument` when `n` is 0.
    pub fn host(n: usize) -> Result<Self> {
        Self::new(vec![BufferPrototype::cpu(); n])
    }

    /// The prototype of each part.
    pub fn parts(&self) -> &[BufferPrototype] {
        &self.parts
    }

    /// The number of parts (devices).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: a multi-device prototype has at least one part.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The device of each part.
    pub fn devices(&self) -> Vec<Device> {
        self.parts.iter().map(|p| p.device()).collect()
    }
}

impl BufferPrototype {
    /// Device memory on each of the CUDA devices `ordinals`, one part per entry (an ordinal
    /// may repeat: the parts are then separate allocations on one device).
    ///
    /// # Errors
    /// `InvalidArgument` for an empty list. Absent devices are reported at the first
    /// allocation (`DeviceUnavailable`).
    ///
    /// ```
    /// let p = zarrbuf::BufferPrototype::cuda_devices(&[0, 0])?;
    /// assert_eq!(p.len(), 2);
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn cuda_devices(ordinals: &[usize]) -> Result<MultiPrototype> {
        MultiPrototype::new(ordinals.iter().map(|&n| BufferPrototype::cuda(n)).collect())
    }
}

/// The part of a multi-device buffer that lives on `device`: the only one there, or a clear
/// error naming the index accessor.
fn only_part_on<T>(parts: &[T], device: Device, device_of: impl Fn(&T) -> Device) -> Result<&T> {
    let mut on = parts.iter().filter(|p| device_of(p) == device);
    match (on.next(), on.next()) {
        (Some(p), None) => Ok(p),
        (None, _) => Err(Error::InvalidArgument(format!(
            "no part lives on {device}; the parts live on {}",
            parts
                .iter()
                .map(|p| device_of(p).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        (Some(_), Some(_)) => Err(Error::InvalidArgument(format!(
            "{} parts live on {device}; pick one by index with part(i)",
            parts.iter().filter(|p| device_of(p) == device).count()
        ))),
    }
}

/// One flat buffer per device, each of the same length.
///
/// ```
/// use zarrbuf::Buffer;
/// use zarrbuf::multi::{MultiBuffer, MultiPrototype};
/// let src = Buffer::from_vec(vec![1u8, 2, 3]);
/// let copies = MultiBuffer::replicate(&src, &MultiPrototype::host(2)?)?;
/// assert_eq!(copies.len(), 2);
/// assert_eq!(copies.part(1).unwrap().to_vec()?, vec![1, 2, 3]);
/// assert_ne!(copies[0].storage_id(), copies[1].storage_id());
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiBuffer {
    parts: Vec<Buffer>,
}

impl MultiBuffer {
    /// `len` zero bytes on every device: one allocation each.
    ///
    /// ```
    /// let m = zarrbuf::multi::MultiBuffer::zeros(8, &zarrbuf::multi::MultiPrototype::host(2)?)?;
    /// assert!(m.parts().iter().all(|b| b.len() == 8));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn zeros(len: usize, proto: &MultiPrototype) -> Result<Self> {
        let parts = proto
            .parts()
            .iter()
            .map(|p| Buffer::zeros(len, p))
            .collect::<Result<_>>()?;
        Ok(MultiBuffer { parts })
    }

    /// `len` bytes on every device, allocated on first write ([`Buffer::lazy`]).
    ///
    /// ```
    /// let m = zarrbuf::multi::MultiBuffer::lazy(1 << 20, &zarrbuf::multi::MultiPrototype::host(4)?);
    /// assert!(m.parts().iter().all(|b| !b.is_allocated()));
    /// # Ok::<(), zarrbuf::Error>(())
    /// ```
    pub fn lazy(len: usize, proto: &MultiPrototype) -> Self {
        MultiBuffer {
            parts: proto.parts().iter().map(|p| Buffer::lazy(len, p)).collect(),
        }
    }

    /// A copy of `src` on every device, the copies made in parallel.
    pub fn replicate(src: &Buffer, proto: &MultiPrototype) -> Result<Self> {
        let parts = std::thread::scope(|s| {
            let copies: Vec<_> = proto
                .parts()
                .iter()
                .map(|p| s.spawn(move || src.copy_to_new(p)))
                .collect();
            copies
                .into_iter()
                .map(join_worker)
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(MultiBuffer { parts })
    }

    /// The parts, one per device, in the prototype's order.
    pub fn parts(&self) -> &[Buffer] {
        &self.parts
    }

    /// Part `i`, or `None` past the end.
    pub fn part(&self, i: usize) -> Option<&Buffer> {
        self.parts.get(i)
    }

    /// The number of parts.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// True when there are no parts (never, for buffers made from a [`MultiPrototype`]).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The part on `device`.
    ///
    /// # Errors
    /// `InvalidArgument` when no part, or more than one, lives there (use
    /// [`part`](Self::part)).
    pub fn on(&self, device: Device) -> Result<&Buffer> {
        only_part_on(&self.parts, device, |b| b.memory().device())
    }
}

impl std::ops::Index<usize> for MultiBuffer {
    type Output = Buffer;

    /// # Panics
    /// When `i` is not below [`len`](MultiBuffer::len); [`part`](MultiBuffer::part) returns
    /// `None` instead.
    fn index(&self, i: usize) -> &Buffer {
        &self.parts[i]
    }
}

/// How a read over several devices places the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// The whole requested subset on every device.
    Replicate,
    /// The subset cut along `axis` into consecutive chunk-aligned partitions, one per
    /// device (balanced by extent; a device gets an empty part when there are fewer chunks
    /// than devices).
    Split {
        /// The axis cut.
        axis: usize,
    },
}

/// One NDBuffer per device and the part of the array subset each holds.
///
/// ```
/// use zarrbuf::NDBuffer;
/// use zarrbuf::multi::{MultiNDBuffer, MultiPrototype, Placement};
/// let parts = vec![NDBuffer::from_vec(vec![1u8, 2], &[2])?, NDBuffer::from_vec(vec![3u8], &[1])?];
/// let m = MultiNDBuffer::from_parts(parts, vec![vec![0..2], vec![2..3]], Placement::Split { axis: 0 })?;
/// assert_eq!(m.subset(1), Some(&[2..3][..]));
/// let whole = m.gather(&zarrbuf::BufferPrototype::cpu())?;
/// assert_eq!(whole.to_vec::<u8>()?, vec![1, 2, 3]);
/// # Ok::<(), zarrbuf::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiNDBuffer {
    parts: Vec<NDBuffer>,
    subsets: Vec<Vec<Range<u64>>>,
    placement: Placement,
}

impl MultiNDBuffer {
    /// Assembles parts read elsewhere; `subsets[i]` is the array subset `parts[i]` holds.
    ///
    /// # Errors
    /// `ShapeMismatch` when the counts differ, a part's shape is not its subset's, or the
    /// parts differ in data type; `InvalidArgument` when split parts do not tile one subset
    /// along the axis in order, or replicated parts hold different subsets.
    pub fn from_parts(
        parts: Vec<NDBuffer>,
        subsets: Vec<Vec<Range<u64>>>,
        placement: Placement,
    ) -> Result<Self> {
        if parts.len() != subsets.len() || parts.is_empty() {
            return Err(Error::ShapeMismatch(format!(
                "{} parts but {} subsets (need one subset per part, at least one part)",
                parts.len(),
                subsets.len()
            )));
        }
        for (i, (p, s)) in parts.iter().zip(&subsets).enumerate() {
            let want: Vec<usize> = s.iter().map(|r| (r.end - r.start) as usize).collect();
            if p.shape() != want.as_slice() || p.dtype() != parts[0].dtype() {
                return Err(Error::ShapeMismatch(format!(
                    "part {i} is {} {:?} but its subset {s:?} needs {} {want:?}",
                    p.dtype(),
                    p.shape(),
                    parts[0].dtype()
                )));
            }
        }
        match placement {
            Placement::Replicate => {
                if subsets.iter().any(|s| s != &subsets[0]) {
                    return Err(Error::InvalidArgument(
                        "replicated parts must all hold the same subset".into(),
                    ));
                }
            }
            Placement::Split { axis } => {
                let ndim = subsets[0].len();
                let tiles = axis < ndim
                    && subsets.windows(2).all(|w| {
                        w[0].len() == ndim
                            && w[1].len() == ndim
                            && w[0][axis].end == w[1][axis].start
                            && (0..ndim).all(|k| k == axis || w[0][k] == w[1][k])
                    });
                if !tiles {
                    return Err(Error::InvalidArgument(format!(
                        "split parts must tile one subset along axis {axis}, in order: {subsets:?}"
                    )));
                }
            }
        }
        Ok(MultiNDBuffer {
            parts,
            subsets,
            placement,
        })
    }

    /// The parts, one per device, in the prototype's order.
    pub fn parts(&self) -> &[NDBuffer] {
        &self.parts
    }

    /// Part `i`, or `None` past the end.
    pub fn part(&self, i: usize) -> Option<&NDBuffer> {
        self.parts.get(i)
    }

    /// The array subset part `i` holds.
    pub fn subset(&self, i: usize) -> Option<&[Range<u64>]> {
        self.subsets.get(i).map(Vec::as_slice)
    }

    /// The number of parts.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Always false: there is at least one part.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// How the parts place the data.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The array subset all parts together hold.
    pub fn whole_subset(&self) -> Vec<Range<u64>> {
        let mut whole = self.subsets[0].clone();
        if let Placement::Split { axis } = self.placement {
            whole[axis].end = self.subsets[self.subsets.len() - 1][axis].end;
        }
        whole
    }

    /// The part on `device`.
    ///
    /// # Errors
    /// `InvalidArgument` when no part, or more than one, lives there (use
    /// [`part`](Self::part)).
    pub fn on(&self, device: Device) -> Result<&NDBuffer> {
        only_part_on(&self.parts, device, |b| b.memory().device())
    }

    /// The whole subset in one new C-order NDBuffer made by `proto`: the split parts put
    /// side by side, or a copy of the first replica.
    pub fn gather(&self, proto: &BufferPrototype) -> Result<NDBuffer> {
        match self.placement {
            Placement::Replicate => self.parts[0].copy_to(proto, Order::C),
            Placement::Split { axis } => {
                let whole = self.whole_subset();
                let shape: Vec<usize> = whole.iter().map(|r| (r.end - r.start) as usize).collect();
                let mut out = NDBuffer::empty(&shape, self.parts[0].dtype(), Order::C, proto)?;
                let mut at = 0usize;
                for part in &self.parts {
                    let n = part.shape()[axis];
                    if n > 0 {
                        let mut place: Vec<Range<usize>> = shape.iter().map(|&d| 0..d).collect();
                        place[axis] = at..at + n;
                        out.set(&place, part)?;
                    }
                    at += n;
                }
                Ok(out)
            }
        }
    }
}

impl std::ops::Index<usize> for MultiNDBuffer {
    type Output = NDBuffer;

    /// # Panics
    /// When `i` is not below [`len`](MultiNDBuffer::len); [`part`](MultiNDBuffer::part)
    /// returns `None` instead.
    fn index(&self, i: usize) -> &NDBuffer {
        &self.parts[i]
    }
}

/// The result of a scoped thread, a panic turned into an error instead of propagated.
pub(crate) fn join_worker<T>(handle: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    handle.join().unwrap_or_else(|_| {
        Err(Error::InvalidArgument(
            "a per-device worker panicked (internal error: please report)".into(),
        ))
    })
}
