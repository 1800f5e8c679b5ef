//! A tiny seeded PRNG (SplitMix64). Kill moments and churn timings come from it so that a failing
//! run can be replayed with the same `--seed`; no cryptographic quality is needed.

/// SplitMix64: one 64-bit state, full period, good enough spread for picking delays.
#[derive(Debug, Clone)]
pub struct SeededRng {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `low..high` (`low` when the range is empty).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_range_is_respected() {
        let mut a = SeededRng::new(7);
        let mut b = SeededRng::new(7);
        let mut c = SeededRng::new(8);
        let xs: Vec<u64> = (0..16).map(|_| a.range(10, 20)).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.range(10, 20)).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.range(10, 20)).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert!(xs.iter().all(|x| (10..20).contains(x)));
        assert_eq!(a.range(5, 5), 5);
    }
}
