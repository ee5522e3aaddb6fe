//! The compaction tiers: the size bands `compact` merges, `compact-probe`
//! plans and the lake-state metrics count files in.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub n: u8,
    /// Files of at least `min` and under `max` bytes are merged ...
    pub min: u64,
    pub max: u64,
    /// ... towards files of this size.
    pub target: u64,
}

const MIB: u64 = 1 << 20;

pub const TIERS: [Tier; 3] = [
    Tier {
        n: 1,
        min: 0,
        max: MIB,
        target: 5 * MIB,
    },
    Tier {
        n: 2,
        min: MIB,
        max: 10 * MIB,
        target: 32 * MIB,
    },
    Tier {
        n: 3,
        min: 10 * MIB,
        max: 64 * MIB,
        target: 128 * MIB,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_hand_their_output_to_the_next_band() {
        for pair in TIERS.windows(2) {
            assert_eq!(pair[0].max, pair[1].min);
            assert!(pair[0].target >= pair[1].min && pair[0].target < pair[1].max);
        }
    }
}
