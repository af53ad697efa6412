//! Splitting a request along one axis into chunk-aligned partitions, one per device, so that
//! no chunk (or shard) is fetched and decoded by two devices.

use crate::errors::{Error, Result};
use crate::zarr::zarr_error;
use std::ops::Range;
use zarrs::array::{Array, ArraySubset};

/// `subset` cut along `axis` into `parts` consecutive partitions whose inner boundaries are
/// chunk boundaries of `array` (its outer grid: shards for sharded arrays), balanced by
/// extent. A partition is empty (extent 0 on `axis`) when there are fewer chunks than parts.
pub(crate) fn chunk_aligned_partitions<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    axis: usize,
    parts: usize,
) -> Result<Vec<Vec<Range<u64>>>> {
    if axis >= subset.len() {
        return Err(Error::InvalidArgument(format!(
            "cannot split along axis {axis} of a {}-dimensional request; pick an axis below {}",
            subset.len(),
            subset.len()
        )));
    }
    if parts == 0 {
        return Err(Error::InvalidArgument(
            "a split needs at least one part (one device)".into(),
        ));
    }
    let cuts = chunk_starts_inside(array, subset, axis)?;
    Ok(split_at_cuts(subset[axis].clone(), &cuts, parts)
        .into_iter()
        .map(|r| {
            let mut part = subset.to_vec();
            part[axis] = r;
            part
        })
        .collect())
}

/// The array coordinates on `axis` where a chunk intersecting `subset` starts, strictly
/// inside `subset[axis]`, ascending.
fn chunk_starts_inside<S: ?Sized>(
    array: &Array<S>,
    subset: &[Range<u64>],
    axis: usize,
) -> Result<Vec<u64>> {
    let range = subset[axis].clone();
    if range.is_empty() || subset.iter().any(|r| r.is_empty()) {
        return Ok(Vec::new());
    }
    let request = ArraySubset::new_with_ranges(subset);
    let chunks = array
        .chunks_in_array_subset(&request)
        .map_err(|e| zarr_error(array, e))?
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "the chunk grid of array {} cannot say which chunks a subset touches, so it cannot be split at chunk boundaries",
                array.path()
            ))
        })?;
    let first = chunks.start().to_vec();
    let count = chunks.shape()[axis];
    let mut cuts = Vec::new();
    for j in 1..count {
        let mut index = first.clone();
        index[axis] += j;
        let origin = array
            .chunk_origin(&index)
            .map_err(|e| zarr_error(array, e))?;
        let at = origin[axis];
        if at > range.start && at < range.end {
            cuts.push(at);
        }
    }
    Ok(cuts)
}

/// `range` cut into `parts` consecutive ranges at points taken from `cuts` (ascending, inside
/// `range`), each boundary the cut nearest to an even split. Ranges may be empty.
pub(crate) fn split_at_cuts(range: Range<u64>, cuts: &[u64], parts: usize) -> Vec<Range<u64>> {
    let mut points = Vec::with_capacity(cuts.len() + 2);
    points.push(range.start);
    points.extend(cuts.iter().copied());
    points.push(range.end);
    let extent = range.end - range.start;
    let mut bounds = vec![range.start];
    let mut at = 0; // index into `points` of the last boundary chosen
    for i in 1..parts {
        let target = range.start + (extent as u128 * i as u128 / parts as u128) as u64;
        // The first point at or after the target, never before the last boundary.
        let next = at + points[at..].partition_point(|&p| p < target);
        let next = next.min(points.len() - 1);
        let pick = if next > at && target - points[next - 1] < points[next] - target {
            next - 1
        } else {
            next
        };
        at = pick.max(at);
        bounds.push(points[at]);
    }
    bounds.push(range.end);
    bounds.windows(2).map(|w| w[0]..w[1]).collect()
}

#[cfg(test)]
mod tests {
    use super::split_at_cuts;

    #[test]
    fn splits_balance_at_chunk_boundaries() {
        // 10 chunks of 10 over 0..100, 4 parts: boundaries nearest 25, 50, 75.
        let cuts: Vec<u64> = (1..10).map(|c| c * 10).collect();
        assert_eq!(
            split_at_cuts(0..100, &cuts, 4),
            vec![0..30, 30..50, 50..80, 80..100]
        );
        // A request starting mid-chunk keeps its own ends.
        assert_eq!(split_at_cuts(5..95, &cuts, 2), vec![5..50, 50..95]);
        // One part: the whole range.
        assert_eq!(split_at_cuts(3..7, &[], 1), vec![3..7]);
    }

    #[test]
    fn fewer_chunks_than_parts_leaves_parts_empty() {
        let parts = split_at_cuts(0..20, &[10], 4);
        assert_eq!(parts.len(), 4);
        assert_eq!(parts.iter().map(|r| r.end - r.start).sum::<u64>(), 20);
        assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
        assert!(
            parts
                .iter()
                .all(|r| r.start == 0 || r.start == 10 || r.start == 20)
        );
        assert_eq!(
            split_at_cuts(0..5, &[], 3)
                .iter()
                .filter(|r| !r.is_empty())
                .count(),
            1
        );
    }

    #[test]
    fn partitions_are_contiguous_and_cover_the_range() {
        for parts in 1..7 {
            for n in 0..30u64 {
                let cuts: Vec<u64> = (1..n).map(|c| c * 7).filter(|&c| c < 7 * n).collect();
                let got = split_at_cuts(0..7 * n, &cuts, parts);
                assert_eq!(got.len(), parts);
                assert_eq!(got[0].start, 0);
                assert_eq!(got[parts - 1].end, 7 * n);
                assert!(got.windows(2).all(|w| w[0].end == w[1].start));
                assert!(
                    got.iter()
                        .all(|r| r.start % 7 == 0 && r.end % 7 == 0 || r.end == 7 * n)
                );
            }
        }
    }
}
