//! MurmurHash3, x86 32-bit variant: the hash Iceberg's `bucket` transform
//! uses (seed 0), from the `murmur3` crate; checked here against the Iceberg
//! spec's reference values and well-known vectors.

/// MurmurHash3_x86_32 of `data` with `seed`.
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    // A slice reader never fails, so the crate's io::Result is always Ok.
    murmur3::murmur3_32(&mut std::io::Cursor::new(data), seed)
        .expect("reading from a byte slice cannot fail")
}

/// Iceberg's `bucket[n]` of already-serialised value bytes:
/// `(hash & i32::MAX) % n`.
pub fn bucket(bytes: &[u8], n: u32) -> u32 {
    (murmur3_x86_32(bytes, 0) & 0x7fff_ffff) % n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(bytes: &[u8]) -> i32 {
        murmur3_x86_32(bytes, 0) as i32
    }

    /// Reference values from the Iceberg table spec, Appendix B (hash as a
    /// signed 32-bit int).
    #[test]
    fn iceberg_spec_reference_hashes() {
        assert_eq!(signed(&34i64.to_le_bytes()), 2017239379, "int/long 34");
        // decimal(4,2) 14.20: unscaled 1420 = 0x058c, minimal big-endian.
        assert_eq!(signed(&[0x05, 0x8c]), -500754589, "decimal 14.20");
        // date 2017-11-16 = day 17486, hashed as a long.
        assert_eq!(signed(&17486i64.to_le_bytes()), -653330422, "date");
        // time 22:31:08 in microseconds.
        assert_eq!(signed(&81068000000i64.to_le_bytes()), -662762989, "time");
        // timestamp 2017-11-16T22:31:08 in microseconds.
        assert_eq!(
            signed(&1510871468000000i64.to_le_bytes()),
            -2047944441,
            "timestamp"
        );
        assert_eq!(signed(b"iceberg"), 1210000089, "string");
        let uuid = uuid::Uuid::parse_str("f79c3e09-677c-4bbd-a479-3f349cb785e7").unwrap();
        assert_eq!(signed(uuid.as_bytes()), 1488055340, "uuid");
        assert_eq!(signed(&[0, 1, 2, 3]), -188683207, "fixed/binary");
    }

    #[test]
    fn well_known_vectors() {
        assert_eq!(murmur3_x86_32(b"", 0), 0);
        assert_eq!(murmur3_x86_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_x86_32(b"hello", 0), 0x248b_fa47);
        assert_eq!(
            murmur3_x86_32(b"The quick brown fox jumps over the lazy dog", 0),
            0x2e4f_f723
        );
    }

    #[test]
    fn bucket_discards_the_sign_bit() {
        // 34 -> 2017239379: bucket[100] = 79 (Iceberg's own example).
        assert_eq!(bucket(&34i64.to_le_bytes(), 100), 79);
        // A negative hash: -188683207 & i32::MAX = 1958800441.
        assert_eq!(bucket(&[0, 1, 2, 3], 1_000_000_000), 958_800_441);
    }
}
