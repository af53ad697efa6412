//! One read of a stream of fixed-size elements: the subset planned once into its units
//! when admitted, then read through the read core (`read_shared`: the host cache, else the
//! staged pipeline) into a new `NDBuffer`.

use super::ordered_reads::{PlannedRead, StreamSource};
use super::stream_store::StreamStore;
use crate::buffer::{BufferPrototype, NDBuffer};
use crate::data_types::{DataType, Order};
use crate::errors::Result;
use crate::options::ReadOptions;
use crate::pipeline::{Cancel, Claim, ReadRequest, check_output_size, read_shared};
use crate::zarr::{UnitPlan, check_subset, data_type_of, plan_units};
use std::ops::Range;
use std::sync::Arc;

/// The reads of a stream of `NDBuffer`s made by `proto`.
pub(crate) struct FixedSource<A> {
    store: A,
    proto: BufferPrototype,
    opts: ReadOptions,
}

impl<A: StreamStore> FixedSource<A> {
    pub(crate) fn new(store: A, proto: &BufferPrototype, opts: &ReadOptions) -> Arc<Self> {
        Arc::new(FixedSource {
            store,
            proto: proto.clone(),
            opts: opts.clone(),
        })
    }

    /// Reads `subset`, its units `plan`, into a new output (on the read's thread).
    fn read(
        &self,
        subset: &[Range<u64>],
        (dtype, plan): (DataType, UnitPlan),
        claim: &Claim,
        cancel: &Cancel,
    ) -> Result<NDBuffer> {
        let (proto, opts) = (&self.proto, &self.opts);
        let shape: Vec<usize> = subset.iter().map(|r| (r.end - r.start) as usize).collect();
        check_output_size("the stream's array", subset, dtype, proto, opts)?;
        // Every element is written by the read; on an error `out` is dropped, never returned.
        let out = NDBuffer::empty_unwritten(&shape, dtype, Order::C, proto)?;
        if out.is_empty() {
            return Ok(out);
        }
        if let Some(s) = proto.stream() {
            // Ordered after the prototype stream's earlier work (see ArrayReadExt::read).
            s.synchronize()?;
        }
        let inner_fetch = self.store.inner_fetch();
        self.store.with_stage(claim, cancel, |array, stage| {
            let request = ReadRequest::new(array, subset, &out, opts).with_plan(Some(plan));
            read_shared(request, inner_fetch, stage)
        })?;
        Ok(out)
    }
}

impl<A: StreamStore> StreamSource<NDBuffer> for FixedSource<A> {
    fn plan(self: Arc<Self>, subset: &[Range<u64>]) -> Result<PlannedRead<NDBuffer>> {
        let array = self.store.array();
        check_subset(array.shape(), subset, array.path().as_str())?;
        let dtype = data_type_of(array)?;
        let plan = plan_units(array, subset, dtype.size())?;
        let units = plan.units.iter().map(|u| u.indices.clone()).collect();
        let subset = subset.to_vec();
        Ok(PlannedRead {
            units,
            read: Box::new(move |claim, cancel| self.read(&subset, (dtype, plan), claim, cancel)),
        })
    }

    fn spawn(&self, job: Box<dyn FnOnce() + Send>) {
        self.store.spawn(job);
    }
}
