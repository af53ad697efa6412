//! How a read that decompresses on the device sizes its batches: by chunk count, from the
//! device's SM count, with staging counted in compressed bytes.
//!
//! nvCOMP gives each zstd or DEFLATE chunk of a batch about one thread block (one warp runs
//! a zstd frame's sequences), so a batch's time is close to one chunk's until the batch has
//! many more chunks than the GPU has SMs. Measured on an H100 (132 SMs): 64 chunks of 1 MiB
//! per batch decoded at 5.4 GB/s, about 110 at 7.9 GB/s; NVIDIA's guidance is batches in the
//! thousands. Batches were sized by the staging slots they held (decoded bytes), which kept
//! them near 110 chunks of 1 MiB within the default 256 MiB; now they are sized here.

#[cfg(test)]
use super::tuning::CHUNKS_PER_SM;
use super::tuning::Tuning;

/// Chunks start at multiples of this in a batch's input buffer (nvCOMP needs 8 for zstd, 4
/// for LZ4 and DEFLATE; 256 keeps every chunk on its own cache lines).
pub(crate) const CHUNK_ALIGN: usize = 256;

/// What [`batch_plan`] decides from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchPlanInput {
    /// The device's streaming multiprocessors (`DeviceOps::sm_count`; 0 counts as 1).
    pub sm_count: usize,
    /// Chunks the read hands the device decoder (at most; some may decode on the CPU).
    pub chunks: usize,
    /// Bytes of the largest decoded chunk: also the most a compressed chunk the device
    /// gets may take (a chunk that does not compress below it decodes on the CPU).
    pub decoded_chunk_bytes: usize,
    /// A typical compressed chunk's bytes, when known (observed so far, or from a shard
    /// index); `None` before any chunk is seen.
    pub compressed_chunk_bytes: Option<usize>,
    /// The read's staging budget (`ReadOptions::staging_bytes`).
    pub staging_bytes: usize,
    /// Chunks per SM and batches in flight ([`super::tuning::tuning`]).
    pub tuning: Tuning,
}

/// How a read's device batches are formed, and the memory they take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchPlan {
    /// Most chunks in one batch: `chunks_per_sm × sm_count`, or the whole read when it has
    /// fewer, or fewer when the estimated compressed chunks do not fit `batch_bytes`. At
    /// least 1.
    pub chunks_per_batch: usize,
    /// Batches in flight (the tuning's `batches_in_flight`).
    pub batches_in_flight: usize,
    /// Most compressed bytes one batch holds: the size of each batch's input buffer in device
    /// memory. A batch closes early when its next chunk would not fit.
    pub batch_bytes: usize,
    /// Device memory for the batches' compressed input: `batches_in_flight × batch_bytes`.
    pub device_input_bytes: usize,
    /// Most device scratch the batches may take for chunks that cannot be decompressed
    /// straight into the output (`batches_in_flight × chunks_per_batch` decoded chunks,
    /// twice that for shuffled blosc); grown on demand, none when every chunk lands in place.
    pub device_scratch_bytes: usize,
    /// Whether the batches reach `chunks_per_sm × sm_count` chunks (or the whole read):
    /// false when the budget, at the estimated compressed size, holds fewer.
    pub fills_device: bool,
}

/// The batch plan of a device-decoding read.
///
/// **Chunks per batch**: at least the tuning's `chunks_per_sm` (default 4) × the device's SM
/// count (528 on an H100), or every chunk of the read when it has fewer (one batch).
///
/// **Memory** (staging counts compressed bytes): a batch's chunks are copied, still
/// compressed, from the workers' staging slots into the batch's input buffer in device
/// memory as they come, each at a [`CHUNK_ALIGN`]-byte boundary, and their slots are free
/// again at once; so the pinned staging of a device-decoding read is the workers' ring of
/// slots (at most `staging_bytes`, as when the CPU decodes), whatever the batch size. Each
/// of the `batches_in_flight` batches (default 2) gets its share of `staging_bytes` (half,
/// by default) as its input buffer
/// (`batch_bytes`; at least one decoded chunk, at most what `chunks_per_batch` decoded
/// chunks would take), so the compressed input in device memory is at most
/// `max(staging_bytes, 2 × decoded chunk)` too. Decoded chunks go straight into the output
/// where the layout allows; elsewhere into device scratch (`device_scratch_bytes` at most)
/// and the fused scatter kernel places them. Example, H100 (132 SMs), 1 MiB chunks that
/// compress to 0.25 MiB, default 256 MiB budget: 512 chunks per batch (budget-bound, short
/// of 528), 2 × 128 MiB device input, up to 1 GiB device scratch, the slots' pinned memory.
///
/// **A budget too small for the target**: when `compressed_chunk_bytes` is known and
/// `chunks_per_batch` of them do not fit `batch_bytes`, the batch takes as many as fit
/// (never fewer than one) and `fills_device` is false: the budget wins over filling the
/// GPU (raise `staging_bytes` to about `2 × 4 × SMs × compressed chunk` to fill it). With
/// no estimate the target stands and batches close early on bytes while gathering.
pub(crate) fn batch_plan(input: BatchPlanInput) -> BatchPlan {
    let in_flight = input.tuning.batches_in_flight.max(1);
    let target = input
        .tuning
        .chunks_per_sm
        .max(1)
        .saturating_mul(input.sm_count.max(1));
    let want = target.min(input.chunks).max(1);
    let decoded = align_up(input.decoded_chunk_bytes.max(1));
    let share = (input.staging_bytes / in_flight).max(decoded);
    let batch_bytes = share.min(want.saturating_mul(decoded));
    let fit = match input.compressed_chunk_bytes {
        Some(c) => batch_bytes / align_up(c.clamp(1, input.decoded_chunk_bytes.max(1))),
        None => want,
    };
    let chunks_per_batch = want.min(fit).max(1);
    BatchPlan {
        chunks_per_batch,
        batches_in_flight: in_flight,
        batch_bytes,
        device_input_bytes: in_flight.saturating_mul(batch_bytes),
        device_scratch_bytes: in_flight
            .saturating_mul(chunks_per_batch)
            .saturating_mul(decoded),
        fills_device: chunks_per_batch == want,
    }
}

/// `n` rounded up to a multiple of [`CHUNK_ALIGN`].
pub(crate) fn align_up(n: usize) -> usize {
    n.div_ceil(CHUNK_ALIGN).saturating_mul(CHUNK_ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn plan(
        sms: usize,
        chunks: usize,
        decoded: usize,
        compressed: Option<usize>,
        budget: usize,
    ) -> BatchPlan {
        batch_plan(BatchPlanInput {
            sm_count: sms,
            chunks,
            decoded_chunk_bytes: decoded,
            compressed_chunk_bytes: compressed,
            staging_bytes: budget,
            tuning: Tuning::DEFAULT,
        })
    }

    #[test]
    fn a_read_with_fewer_chunks_than_the_target_is_one_batch() {
        for chunks in [1, 2, 7, 100, 527, 528] {
            let p = plan(132, chunks, MIB, Some(MIB / 5), 256 * MIB);
            assert_eq!(p.chunks_per_batch, chunks, "{chunks} chunks");
            assert!(p.fills_device);
            // The input buffers hold no more than the read's decoded chunks.
            assert!(p.batch_bytes <= chunks * MIB);
        }
    }

    #[test]
    fn many_chunks_make_batches_of_four_per_sm() {
        for (sms, chunks) in [(132, 1024), (132, 100_000), (108, 5000), (1, 10), (16, 65)] {
            let p = plan(sms, chunks, 64 << 10, Some(16 << 10), 256 * MIB);
            assert_eq!(p.chunks_per_batch, 4 * sms, "{sms} SMs, {chunks} chunks");
            assert!(p.chunks_per_batch >= CHUNKS_PER_SM * sms);
            assert!(p.fills_device);
            assert_eq!(p.batches_in_flight, 2);
        }
        // No estimate yet: the target stands (batches close on bytes while gathering).
        let p = plan(132, 1024, MIB, None, 256 * MIB);
        assert_eq!(p.chunks_per_batch, 528);
        assert_eq!(p.batch_bytes, 128 * MIB);
    }

    #[test]
    fn staging_counts_compressed_bytes() {
        // 1 MiB chunks compressing 5:1 on an H100: 528 per batch within 256 MiB, where
        // counting decoded bytes would have allowed 128.
        let p = plan(132, 4096, MIB, Some(MIB / 5), 256 * MIB);
        assert_eq!(p.chunks_per_batch, 528);
        assert_eq!(p.batch_bytes, 128 * MIB);
        assert_eq!(p.device_input_bytes, 256 * MIB);
        assert_eq!(p.device_scratch_bytes, 2 * 528 * MIB);
        // Small reads take small buffers: 10 chunks of 1 MiB never need more than 10 MiB each.
        let p = plan(132, 10, MIB, None, 256 * MIB);
        assert_eq!((p.chunks_per_batch, p.batch_bytes), (10, 10 * MIB));
    }

    #[test]
    fn a_budget_too_small_for_the_target_limits_the_batch_and_says_so() {
        // 0.25 MiB compressed chunks: 512 fit 128 MiB, short of 528.
        let p = plan(132, 4096, MIB, Some(MIB / 4), 256 * MIB);
        assert_eq!(p.chunks_per_batch, 512);
        assert!(!p.fills_device);
        // Incompressible chunks: as many as half the budget holds.
        let p = plan(132, 4096, MIB, Some(MIB), 256 * MIB);
        assert_eq!(p.chunks_per_batch, 128);
        assert!(!p.fills_device);
        // A larger budget fills the device again.
        let p = plan(132, 4096, MIB, Some(MIB), 2 * 528 * MIB);
        assert_eq!(p.chunks_per_batch, 528);
        assert!(p.fills_device);
        // Compressed sizes are counted with their alignment padding.
        let p = plan(4, 100, 4096, Some(257), 2 * 16 * 512);
        assert_eq!(p.chunks_per_batch, 16);
    }

    #[test]
    fn the_tuning_sets_chunks_per_sm_and_batches_in_flight() {
        let tuning = Tuning {
            chunks_per_sm: 16,
            batches_in_flight: 4,
            probe_share: 8,
        };
        let p = batch_plan(BatchPlanInput {
            sm_count: 132,
            chunks: 100_000,
            decoded_chunk_bytes: 128 << 10,
            compressed_chunk_bytes: Some(32 << 10),
            staging_bytes: 1 << 30,
            tuning,
        });
        assert_eq!(p.chunks_per_batch, 16 * 132);
        assert_eq!(p.batches_in_flight, 4);
        // Each of the four gets a quarter of the budget (less than its 2112 decoded chunks).
        assert_eq!(p.batch_bytes, (1 << 30) / 4);
        assert_eq!(p.device_input_bytes, 4 * p.batch_bytes);
        assert!(p.fills_device);
    }

    #[test]
    fn never_zero() {
        for p in [
            plan(0, 0, 0, None, 0),
            plan(0, 1, 0, Some(0), 0),
            plan(132, 1000, 64 * MIB, Some(64 * MIB), 0),
            plan(132, 1000, 64 * MIB, Some(usize::MAX), 1),
            plan(1, usize::MAX, usize::MAX / 2, None, usize::MAX),
        ] {
            assert!(p.chunks_per_batch >= 1, "{p:?}");
            assert!(p.batch_bytes >= 1, "{p:?}");
        }
        // A budget below one chunk still holds one chunk per batch.
        let p = plan(132, 1000, 64 * MIB, Some(64 * MIB), MIB);
        assert_eq!((p.chunks_per_batch, p.batch_bytes), (1, 64 * MIB));
    }
}
