//! One read, as one value: what is read (the array and the subset), into what (the output),
//! how (the options), and its units, planned once ([`plan_units`]) when a route first needs
//! them and then handed on: the small route takes them, the direct route counts them and
//! checks their shards, the staged driver runs them.

use crate::buffer::NDBuffer;
use crate::errors::Result;
use crate::options::ReadOptions;
use crate::zarr::{UnitPlan, plan_units};
use std::ops::Range;
use zarrs::array::Array;

/// A read of `subset` of `array` into `out` (its shape the subset's, its data type the
/// array's: the fronts check that), and its unit plan once made.
pub(crate) struct ReadRequest<'a, S: ?Sized> {
    pub array: &'a Array<S>,
    pub subset: &'a [Range<u64>],
    pub out: &'a NDBuffer,
    pub opts: &'a ReadOptions,
    /// The units, once planned; a route that takes them leaves `None`.
    plan: Option<UnitPlan>,
}

impl<'a, S: ?Sized> ReadRequest<'a, S> {
    /// The read of `subset` of `array` into `out`, not planned yet.
    pub(crate) fn new(
        array: &'a Array<S>,
        subset: &'a [Range<u64>],
        out: &'a NDBuffer,
        opts: &'a ReadOptions,
    ) -> Self {
        ReadRequest {
            array,
            subset,
            out,
            opts,
            plan: None,
        }
    }

    /// This read with its units already planned elsewhere (`None`: not yet), as an async read
    /// hands its plan from the task to its blocking thread.
    pub(crate) fn with_plan(mut self, plan: Option<UnitPlan>) -> Self {
        self.plan = plan;
        self
    }

    /// The read's units, planned on the first call.
    pub(crate) fn plan(&mut self) -> Result<&mut UnitPlan> {
        let plan = match self.plan.take() {
            Some(plan) => plan,
            None => plan_units(self.array, self.subset, self.out.dtype().size())?,
        };
        Ok(self.plan.insert(plan))
    }

    /// The read's units, taken out of the request (planned now if they were not).
    pub(crate) fn take_plan(&mut self) -> Result<UnitPlan> {
        match self.plan.take() {
            Some(plan) => Ok(plan),
            None => plan_units(self.array, self.subset, self.out.dtype().size()),
        }
    }

    /// The units planned so far, if any, given up by the request (to be handed on).
    pub(crate) fn into_plan(self) -> Option<UnitPlan> {
        self.plan
    }
}
