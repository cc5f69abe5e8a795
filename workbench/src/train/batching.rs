//! Length-grouped batches: examples of similar length share a batch, so little of each
//! batch is padding, while the order stays random from epoch to epoch.
//!
//! Each epoch: shuffle all example indices (seeded), cut them into *buckets* of
//! `bucket_batches × batch_size`, sort each bucket by length (longest first), cut it
//! into batches, and shuffle the order of all batches (seeded). transformers'
//! `LengthGroupedSampler` works the same way with buckets of 50 batches.

use crate::{Error, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The RNG of epoch `epoch` of a run seeded with `seed`: each epoch's order is a pure
/// function of (seed, epoch), so a run resumed at any step replays the same batches.
pub fn epoch_rng(seed: u64, epoch: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(epoch as u64 + 1);
    rng
}

/// Batches of example indices for one epoch.
///
/// * `lengths[i]`: the length (tokens) of example `i`;
/// * `bucket_batches`: batches per sorting bucket; `0` gives random batches (no grouping).
///
/// Every index `0..lengths.len()` appears in exactly one batch; only the last batch of
/// a bucket may be smaller than `batch_size`.
pub fn length_grouped_batches(
    lengths: &[usize],
    batch_size: usize,
    bucket_batches: usize,
    seed: u64,
    epoch: usize,
) -> Result<Vec<Vec<usize>>> {
    if batch_size == 0 {
        return Err(Error::param("batch_size", "must be at least 1"));
    }
    let mut rng = epoch_rng(seed, epoch);
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.shuffle(&mut rng);
    let mut batches: Vec<Vec<usize>> = Vec::with_capacity(lengths.len().div_ceil(batch_size));
    if bucket_batches == 0 {
        batches.extend(order.chunks(batch_size).map(<[usize]>::to_vec));
    } else {
        for bucket in order.chunks(bucket_batches * batch_size) {
            let mut bucket = bucket.to_vec();
            // Stable sort: equal lengths keep their shuffled order.
            bucket.sort_by_key(|&i| std::cmp::Reverse(lengths[i]));
            batches.extend(bucket.chunks(batch_size).map(<[usize]>::to_vec));
        }
        batches.shuffle(&mut rng);
    }
    Ok(batches)
}

/// Number of batches per epoch for `n` examples (independent of the seed).
pub fn batches_per_epoch(n: usize, batch_size: usize, bucket_batches: usize) -> usize {
    if batch_size == 0 {
        return 0;
    }
    if bucket_batches == 0 {
        return n.div_ceil(batch_size);
    }
    let bucket = bucket_batches * batch_size;
    let full = n / bucket;
    full * bucket_batches + (n % bucket).div_ceil(batch_size)
}
