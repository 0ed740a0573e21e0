//! The fixed, seeded subset of problems the bench runs.
//!
//! The task numbers of the dataset, sorted ascending (0..=163 for HumanEval), are shuffled by a
//! Fisher-Yates shuffle driven by `loopgate_bench::Rng` (xorshift64*) seeded with
//! [`SUBSET_SEED`]; the subset of size N is the first N of that order. So every run with the
//! same N draws the same problems, and a smaller N is a prefix of a larger one (a 3-problem
//! smoke run is part of the 40).

use crate::Rng;

use super::error::HumanEvalError;

/// The seed of the subset (the number of the issue that asked for the benchmark).
pub const SUBSET_SEED: u64 = 13;

/// The default subset size.
pub const DEFAULT_SUBSET_SIZE: usize = 40;

/// The first `n` task numbers of the seeded shuffle of `numbers` (in that drawn order).
pub fn draw_subset(numbers: &[u32], n: usize, seed: u64) -> Result<Vec<u32>, HumanEvalError> {
    if n == 0 {
        return Err(HumanEvalError::EmptySubset);
    }
    if n > numbers.len() {
        return Err(HumanEvalError::SubsetTooLarge {
            asked: n,
            have: numbers.len(),
        });
    }
    let mut order = numbers.to_vec();
    order.sort_unstable();
    let mut rng = Rng::new(seed);
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order.truncate(n);
    Ok(order)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn subset_is_fixed_prefix_stable_and_order_independent() {
        let all: Vec<u32> = (0..164).collect();
        let forty = draw_subset(&all, 40, SUBSET_SEED).unwrap();
        assert_eq!(forty.len(), 40);
        let mut unique = forty.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 40, "no problem drawn twice");
        assert!(forty.iter().all(|n| *n < 164));
        // Same seed, same draw, whatever order the file listed the problems in.
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(draw_subset(&reversed, 40, SUBSET_SEED).unwrap(), forty);
        // A smaller subset is a prefix of the larger one.
        assert_eq!(draw_subset(&all, 3, SUBSET_SEED).unwrap(), forty[..3]);
        // Another seed draws another subset.
        assert_ne!(draw_subset(&all, 40, SUBSET_SEED + 1).unwrap(), forty);
    }

    #[test]
    fn subset_sizes_out_of_range_are_errors() {
        let cases: &[(usize, usize, &str)] = &[
            (5, 0, "asked for an empty subset"),
            (5, 6, "asked for 6 problems, the dataset has 5"),
        ];
        let numbers: Vec<u32> = (0..5).collect();
        for (have, n, want) in cases {
            let err = draw_subset(&numbers[..*have], *n, SUBSET_SEED).unwrap_err();
            assert_eq!(err.to_string(), *want);
        }
        assert_eq!(draw_subset(&numbers, 5, 1).unwrap().len(), 5);
    }
}
