//! What a dead letter costs while a flush holds it and sends it: the struct,
//! each field's heap allocation as the allocator sizes it, and its encoded
//! form in the descriptor sent to the writer. Counted against FLUSH_SIZE
//! like a batch's Arrow buffers, so a flush of dead letters weighs what it
//! holds (`ingest/tests/it/dead_letter_cost.rs` measures it).
use millpond_proto::DeadLetter;
use prost::Message;

/// glibc malloc: each chunk carries an 8-byte header and is rounded up to
/// 16 bytes, at least 32.
fn allocation(capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else {
        (capacity + 8).next_multiple_of(16).max(32)
    }
}

/// Bytes `l` costs held in a flush and encoded in its descriptor.
pub fn dead_letter(l: &DeadLetter) -> usize {
    let held = std::mem::size_of::<DeadLetter>()
        + allocation(l.topic.capacity())
        + allocation(l.reason.capacity())
        + allocation(l.column.capacity())
        + allocation(l.live_type.capacity())
        + allocation(l.original.capacity())
        + l.key.as_ref().map_or(0, |k| allocation(k.capacity()));
    // The descriptor's field 5: tag, length, message.
    let sent = l.encoded_len();
    held + sent + 1 + prost::length_delimiter_len(sent)
}
