//! The byte ranges a small read fetches of an uncompressed unit (a chunk or inner chunk
//! stored in its decoded layout: C order, no bytes-to-bytes codecs), instead of the whole
//! unit.
//!
//! The read's region of the unit is a set of rows along the unit's last axis, each one
//! contiguous run of bytes; runs that touch (the region spans whole trailing dimensions)
//! are one run, and runs at most [`RangePolicy::gap`] apart are fetched as one request.
//! When that gives more than [`RangePolicy::max_requests`] requests, the one request from
//! the first needed byte to the last is taken instead; and when the requests would carry at
//! least half of the unit, the unit is fetched whole (`None`), as it was before: a few bytes
//! saved are not worth a request more, or a copy more.
//!
//! The bytes fetched are the concatenation of the requests, in order; [`UnitRanges::place`]
//! puts them where they lie in the unit's decoded bytes (the bytes between are never read).

use crate::zarr::Unit;
use std::ops::Range;

/// How a unit's needed bytes are turned into requests, by the kind of store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RangePolicy {
    /// Runs at most this many bytes apart are fetched by one request.
    pub gap: u64,
    /// More requests than this for one unit: one request spanning the needed bytes.
    pub max_requests: usize,
}

impl RangePolicy {
    /// Local files (a directory, a zip file, memory): a request is a `pread` of a file
    /// already open (one open per unit, for all its requests), about a microsecond, in which
    /// a page-cache copy moves several KiB; and the disk reads whole pages anyway. So runs
    /// closer than a page are read together, and up to 32 requests (a 32³ patch of 4-byte
    /// elements is 32 planes of 4 KiB) beat reading a MiB unit whole.
    pub(crate) const LOCAL: RangePolicy = RangePolicy {
        gap: 4 << 10,
        max_requests: 32,
    };

    /// Object stores: every request is a round trip (20–80 ms, when one connection carries
    /// 1–4 MiB), so a unit is fetched by one request spanning its needed bytes — the gaps
    /// inside one unit cost less than another round trip — or whole.
    pub(crate) const REMOTE: RangePolicy = RangePolicy {
        gap: u64::MAX,
        max_requests: 1,
    };

    /// The policy for a store whose fetches wait a network round trip (`remote`) or not.
    pub(crate) fn for_store(remote: bool) -> RangePolicy {
        if remote {
            RangePolicy::REMOTE
        } else {
            RangePolicy::LOCAL
        }
    }
}

/// The requests that fetch the part of a unit a read needs (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnitRanges {
    /// Byte ranges in the unit's decoded (= stored) bytes: ascending, disjoint, not empty.
    requests: Vec<Range<u64>>,
    /// The unit's size in bytes (decoded, and stored: the chain has no bytes-to-bytes codecs).
    unit_len: u64,
}

impl UnitRanges {
    /// The requests for the part of `unit` a read needs, its elements `elem` bytes each;
    /// `None`: fetch it whole.
    pub(crate) fn of_unit(unit: &Unit, elem: usize, policy: RangePolicy) -> Option<UnitRanges> {
        UnitRanges::plan(
            &unit.shape_usize(),
            &unit.local_start(),
            &unit.region_shape(),
            elem,
            policy,
        )
    }

    /// The requests for the region of `region` elements at `local` in a C-order unit of
    /// `shape` (see [`UnitRanges::of_unit`]).
    pub(crate) fn plan(
        shape: &[usize],
        local: &[usize],
        region: &[usize],
        elem: usize,
        policy: RangePolicy,
    ) -> Option<UnitRanges> {
        let d = shape.len();
        if d == 0 || local.len() != d || region.len() != d || region.contains(&0) {
            return None;
        }
        if (0..d).any(|k| {
            local[k]
                .checked_add(region[k])
                .is_none_or(|end| end > shape[k])
        }) {
            return None;
        }
        let elem = elem as u64;
        let unit_len = shape
            .iter()
            .try_fold(elem, |n, &s| n.checked_mul(s as u64))?;
        // Byte strides of the unit, C order.
        let mut strides = vec![elem; d];
        for k in (0..d - 1).rev() {
            strides[k] = strides[k + 1] * shape[k + 1] as u64;
        }
        let run = region[d - 1] as u64 * elem;
        let rows: usize = region[..d - 1].iter().product();
        let mut requests: Vec<Range<u64>> = Vec::new();
        let mut at = vec![0usize; d - 1];
        for _ in 0..rows {
            let start: u64 = (0..d)
                .map(|k| (local[k] + at.get(k).copied().unwrap_or(0)) as u64 * strides[k])
                .sum();
            let row = start..start + run;
            match requests.last_mut() {
                Some(last) if row.start <= last.end.saturating_add(policy.gap) => {
                    last.end = row.end;
                }
                _ => {
                    if requests.len() == policy.max_requests {
                        requests = vec![span(&requests, local, region, &strides, run)];
                        break;
                    }
                    requests.push(row);
                }
            }
            for k in (0..d - 1).rev() {
                at[k] += 1;
                if at[k] < region[k] {
                    break;
                }
                at[k] = 0;
            }
        }
        let fetched: u64 = requests.iter().map(|r| r.end - r.start).sum();
        (fetched.saturating_mul(2) < unit_len).then_some(UnitRanges { requests, unit_len })
    }

    /// The requests, as byte ranges in the unit's bytes.
    pub(crate) fn requests(&self) -> &[Range<u64>] {
        &self.requests
    }

    /// The requests as byte ranges in an object where the unit starts at `base` (a shard).
    pub(crate) fn requests_at(&self, base: u64) -> Vec<Range<u64>> {
        self.requests
            .iter()
            .map(|r| base + r.start..base + r.end)
            .collect()
    }

    /// The unit's size in bytes.
    pub(crate) fn unit_len(&self) -> u64 {
        self.unit_len
    }

    /// Bytes the requests fetch in all.
    pub(crate) fn fetched_len(&self) -> u64 {
        self.requests.iter().map(|r| r.end - r.start).sum()
    }

    /// Copies `fetched`, the requests' bytes one after another, to where they lie in
    /// `unit`, the unit's decoded bytes (at least [`UnitRanges::unit_len`] long). Returns
    /// `false`, copying nothing, when `fetched` is not exactly the requests' length.
    pub(crate) fn place(&self, fetched: &[u8], unit: &mut [u8]) -> bool {
        if fetched.len() as u64 != self.fetched_len() || (unit.len() as u64) < self.unit_len {
            return false;
        }
        let mut from = 0usize;
        for r in &self.requests {
            let n = (r.end - r.start) as usize;
            let at = r.start as usize;
            unit[at..at + n].copy_from_slice(&fetched[from..from + n]);
            from += n;
        }
        true
    }
}

/// One request from the first needed byte of the region to its last: from the first
/// request's start to the end of the region's last row.
fn span(
    requests: &[Range<u64>],
    local: &[usize],
    region: &[usize],
    strides: &[u64],
    run: u64,
) -> Range<u64> {
    let first = requests.first().map_or(0, |r| r.start);
    let d = local.len();
    let last_row: u64 = (0..d - 1)
        .map(|k| (local[k] + region[k] - 1) as u64 * strides[k])
        .sum::<u64>()
        + local[d - 1] as u64 * strides[d - 1];
    first..last_row + run
}

#[cfg(test)]
mod tests {
    #![allow(clippy::single_range_in_vec_init)]
    use super::{RangePolicy, UnitRanges};

    const ALL_APART: RangePolicy = RangePolicy {
        gap: 0,
        max_requests: usize::MAX,
    };

    fn requests(
        shape: &[usize],
        local: &[usize],
        region: &[usize],
        elem: usize,
        policy: RangePolicy,
    ) -> Option<Vec<std::ops::Range<u64>>> {
        UnitRanges::plan(shape, local, region, elem, policy).map(|r| r.requests().to_vec())
    }

    #[test]
    fn a_plane_of_a_cube_is_one_contiguous_request() {
        // 1×64×64 of 64³ float32: rows touch, 16 KiB at plane 5.
        let got = requests(&[64, 64, 64], &[5, 0, 0], &[1, 64, 64], 4, ALL_APART);
        assert_eq!(got, Some(vec![5 * 16384..6 * 16384]));
    }

    #[test]
    fn rows_apart_are_requests_of_their_own_until_the_gap_joins_them() {
        // 2×2 at (1, 1) of a 4×8 uint8 unit: rows 8 bytes apart.
        let apart = requests(&[4, 8], &[1, 1], &[2, 2], 1, ALL_APART);
        assert_eq!(apart, Some(vec![9..11, 17..19]));
        let joined = RangePolicy {
            gap: 6,
            max_requests: 8,
        };
        assert_eq!(
            requests(&[4, 8], &[1, 1], &[2, 2], 1, joined),
            Some(vec![9..19])
        );
    }

    #[test]
    fn too_many_requests_become_one_span() {
        // 16 rows of 16×16×16 in 64³ float32: 16 planes of 16 rows each.
        let local = RangePolicy::LOCAL;
        let got = requests(&[64, 64, 64], &[8, 8, 8], &[16, 16, 16], 4, local)
            .expect("a 16³ patch is fetched in part");
        // Rows within a plane are 192 bytes apart: one request per plane.
        assert_eq!(got.len(), 16);
        assert_eq!(
            got[0],
            (8 * 4096 + 8 * 64 + 8) * 4..(8 * 4096 + 23 * 64 + 24) * 4
        );
        let one = RangePolicy {
            gap: 4 << 10,
            max_requests: 4,
        };
        let span = requests(&[64, 64, 64], &[8, 8, 8], &[16, 16, 16], 4, one);
        assert_eq!(
            span,
            Some(vec![
                (8 * 4096 + 8 * 64 + 8) * 4..(23 * 4096 + 23 * 64 + 24) * 4
            ])
        );
        assert_eq!(
            requests(
                &[64, 64, 64],
                &[8, 8, 8],
                &[16, 16, 16],
                4,
                RangePolicy::REMOTE
            ),
            span
        );
    }

    #[test]
    fn half_the_unit_or_more_is_fetched_whole() {
        // Half the planes: whole.
        assert_eq!(requests(&[4, 4], &[0, 0], &[2, 4], 1, ALL_APART), None);
        assert!(requests(&[4, 4], &[0, 0], &[1, 4], 1, ALL_APART).is_some());
        // The whole unit, one element of a one-element unit, a column spread over the unit
        // (by one span).
        assert_eq!(requests(&[8, 8], &[0, 0], &[8, 8], 2, ALL_APART), None);
        assert_eq!(requests(&[1], &[0], &[1], 4, ALL_APART), None);
        assert_eq!(
            requests(&[64, 64], &[0, 3], &[64, 1], 4, RangePolicy::REMOTE),
            None
        );
        // Nothing to plan: no dimensions, an empty or outside region.
        assert_eq!(requests(&[], &[], &[], 4, ALL_APART), None);
        assert_eq!(requests(&[8], &[0], &[0], 4, ALL_APART), None);
        assert_eq!(requests(&[8], &[6], &[3], 4, ALL_APART), None);
    }

    #[test]
    fn placed_bytes_land_where_they_lie_in_the_unit() {
        let ranges = UnitRanges::plan(&[4, 8], &[1, 1], &[2, 2], 1, ALL_APART).expect("ranges");
        let unit: Vec<u8> = (0..32).collect();
        let fetched: Vec<u8> = ranges
            .requests()
            .iter()
            .flat_map(|r| unit[r.start as usize..r.end as usize].to_vec())
            .collect();
        let mut out = vec![0u8; 32];
        assert!(ranges.place(&fetched, &mut out));
        for r in ranges.requests() {
            let r = r.start as usize..r.end as usize;
            assert_eq!(out[r.clone()], unit[r]);
        }
        assert_eq!(ranges.requests_at(100), vec![109..111, 117..119]);
        // A short fetch is refused, not placed.
        assert!(!ranges.place(&fetched[1..], &mut out));
    }

    /// A small deterministic generator (no dependency): splitmix64.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn random_regions_read_by_ranges_equal_the_whole_unit() {
        let mut seed = 38u64;
        let policies = [ALL_APART, RangePolicy::LOCAL, RangePolicy::REMOTE];
        for case in 0..2000 {
            let d = 1 + (next(&mut seed) % 4) as usize;
            let shape: Vec<usize> = (0..d).map(|_| 1 + (next(&mut seed) % 9) as usize).collect();
            let local: Vec<usize> = shape
                .iter()
                .map(|&s| (next(&mut seed) % s as u64) as usize)
                .collect();
            let region: Vec<usize> = shape
                .iter()
                .zip(&local)
                .map(|(&s, &l)| 1 + (next(&mut seed) % (s - l) as u64) as usize)
                .collect();
            let elem = [1usize, 2, 4, 8][(next(&mut seed) % 4) as usize];
            let policy = policies[case % policies.len()];
            let len = shape.iter().product::<usize>() * elem;
            let unit: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let Some(ranges) = UnitRanges::plan(&shape, &local, &region, elem, policy) else {
                continue;
            };
            assert!(ranges.fetched_len() * 2 < len as u64);
            assert!(ranges.requests().len() <= policy.max_requests);
            let fetched: Vec<u8> = ranges
                .requests()
                .iter()
                .flat_map(|r| unit[r.start as usize..r.end as usize].to_vec())
                .collect();
            let mut placed = vec![0u8; len];
            assert!(ranges.place(&fetched, &mut placed));
            // Every element of the region reads as in the whole unit.
            let count: usize = region.iter().product();
            for i in 0..count {
                let mut rest = i;
                let mut offset = 0;
                let mut stride = elem;
                for k in (0..d).rev() {
                    let at = local[k] + rest % region[k];
                    rest /= region[k];
                    offset += at * stride;
                    stride *= shape[k];
                }
                assert_eq!(
                    placed[offset..offset + elem],
                    unit[offset..offset + elem],
                    "case {case}: shape {shape:?} local {local:?} region {region:?}"
                );
            }
        }
    }
}
