//! One read of a stream of variable-length elements (strings, byte strings): the subset
//! planned once into a [`VarLenRead`] when admitted, then fetched, decoded and assembled
//! into a new `VarLenBuffer` on the read's thread.

use super::ordered_reads::{PlannedRead, StreamSource};
use super::stream_store::StreamStore;
use crate::buffer::{BufferPrototype, VarLenBuffer};
use crate::errors::Result;
use crate::options::ReadOptions;
use crate::pipeline::VarLenRead;
use crate::zarr::check_subset;
use std::ops::Range;
use std::sync::Arc;

/// The reads of a stream of `VarLenBuffer`s made by `proto`.
pub(crate) struct VarLenSource<A> {
    store: A,
    proto: BufferPrototype,
    opts: ReadOptions,
}

impl<A: StreamStore> VarLenSource<A> {
    pub(crate) fn new(store: A, proto: &BufferPrototype, opts: &ReadOptions) -> Arc<Self> {
        Arc::new(VarLenSource {
            store,
            proto: proto.clone(),
            opts: opts.clone(),
        })
    }
}

impl<A: StreamStore> StreamSource<VarLenBuffer> for VarLenSource<A> {
    fn plan(self: Arc<Self>, subset: &[Range<u64>]) -> Result<PlannedRead<VarLenBuffer>> {
        let array = self.store.array();
        check_subset(array.shape(), subset, array.path().as_str())?;
        let inner_fetch = self.store.inner_fetch();
        let read = VarLenRead::new(array, subset, &self.proto, &self.opts, inner_fetch)?;
        Ok(PlannedRead {
            units: read.unit_keys(),
            read: Box::new(move |claim, cancel| {
                let (proto, opts) = (&self.proto, &self.opts);
                self.store.with_stage(claim, cancel, |array, stage| {
                    read.run(array, proto, opts, stage)
                })
            }),
        })
    }

    fn spawn(&self, job: Box<dyn FnOnce() + Send>) {
        self.store.spawn(job);
    }
}
