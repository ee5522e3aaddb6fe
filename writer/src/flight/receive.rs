//! One DoPut received: the descriptor decoded, the Arrow batches read (or,
//! for a streamed flush the sink takes as it arrives, handed to the sink
//! batch by batch), the trailer checked and the batches aligned into one
//! flush. Bounded as it arrives: by MILLPOND_WRITER_MAX_FLUSH_BYTES, by the
//! bytes all DoPuts hold at once, and by how long it may send nothing.
use std::sync::{Arc, Mutex};

use arrow::datatypes::Schema;
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::FlightData;
use futures::stream;
use futures::{StreamExt, TryStreamExt};
use millpond_shared::failpoint::{self, Failpoint};
use tonic::{Request, Status, Streaming};

use super::bounds::{unless_idle, Bounds};
use super::budget::Held;
use super::codec::{decode_descriptor, Decoded, Encoding};
use super::status::{failure_status, flight_to_status, idle};
use crate::sink::WriteFailure;
use crate::sink::{Flush, SharedSink};

/// A flush as received, with what the metrics say of it.
pub struct Received {
    pub flush: Flush,
    pub encoding: Encoding,
    /// Size of the Arrow IPC payload received.
    pub bytes: u64,
    pub rows: u64,
    /// The flush's share of the in-flight bound, held until it is dropped
    /// (once the flush is written or refused).
    pub held: Held,
}

pub async fn receive(
    sink: &SharedSink,
    bounds: &Bounds,
    request: Request<Streaming<FlightData>>,
) -> Result<Received, Status> {
    let mut stream = request.into_inner();
    let first = tokio::time::timeout(bounds.idle, stream.message())
        .await
        .map_err(|_| idle("(no descriptor yet)", bounds.idle))??
        .ok_or_else(|| Status::invalid_argument("empty DoPut stream: expected a flush"))?;
    let Decoded {
        desc: head,
        letters: head_letters,
        encoding: enc,
    } = head_of(&first)?;
    let held = Arc::new(Mutex::new(bounds.in_flight.hold()));
    let holding = held.clone();
    // A streamed flush ends with a message holding no Arrow data whose
    // app_metadata is the whole descriptor; it never reaches the decoder.
    let trailer = Arc::new(Mutex::new(None::<bytes::Bytes>));
    let slot = trailer.clone();
    let streamed = head.trailer;
    let all = stream::once(async { Ok(first) })
        .chain(unless_idle(stream, head.flush_id.clone(), bounds.idle))
        .and_then({
            let (bounds, flush_id) = (bounds.clone(), head.flush_id.clone());
            move |fd: FlightData| {
                // Descriptors count too: a trailer carries the flush's
                // dead letters.
                let descriptor = fd.flight_descriptor.as_ref().map_or(0, |d| d.cmd.len());
                let n = (fd.data_header.len()
                    + fd.data_body.len()
                    + fd.app_metadata.len()
                    + descriptor) as u64;
                let mut held = holding.lock().unwrap_or_else(|p| p.into_inner());
                let taken = bounds.take(&mut held, &flush_id, n);
                futures::future::ready(
                    taken
                        .map(|()| fd)
                        .map_err(|s| FlightError::Tonic(Box::new(s))),
                )
            }
        })
        .and_then(move |fd: FlightData| {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            let out = if slot.is_some() {
                Err(FlightError::protocol(
                    "a message followed the trailing descriptor of a streamed flush",
                ))
            } else if streamed && fd.data_header.is_empty() && !fd.app_metadata.is_empty() {
                *slot = Some(fd.app_metadata);
                Ok(None)
            } else {
                Ok(Some(fd))
            };
            futures::future::ready(out)
        })
        .try_filter_map(futures::future::ok);
    // The sink may take a streamed flush's batches as they arrive; the
    // guard makes it forget them if the stream fails.
    // On this worker (the sink's lock may be held by a write): a
    // handler dropped meanwhile cannot leave a stream begun unguarded.
    let mut taken = if streamed {
        tokio::task::block_in_place(|| {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .stream_begin(&head.flush_id)
        })
        .map(|token| Taken {
            sink: sink.clone(),
            flush_id: head.flush_id.clone(),
            token,
            armed: true,
        })
    } else {
        None
    };
    let mut decoder = FlightDataDecoder::new(all);
    let mut schema = None;
    let mut batches = Vec::new();
    let mut rows = 0u64;
    while let Some(item) = decoder.next().await {
        match item.map_err(flight_to_status)?.payload {
            DecodedPayload::Schema(s) => schema = Some(s),
            DecodedPayload::RecordBatch(b) => {
                rows += b.num_rows() as u64;
                match &taken {
                    Some(t) => stream_batch(t, b).await?,
                    None => batches.push(b),
                }
            }
            DecodedPayload::None => {}
        }
        if streamed && rows > 0 {
            failpoint::abort(Failpoint::KillMidStream);
        }
    }
    let (desc, letters) = if streamed {
        let Decoded { desc, letters, .. } = trailing(&trailer, &head.flush_id)?;
        (desc, letters)
    } else {
        (head, head_letters)
    };
    // Batches may differ in schema (a streamed flush sends each as it
    // was converted): align them as ingest aligns a flush sent whole.
    let (schema, batches) = millpond_shared::unify::aligned(batches)
        .map_err(|e| Status::invalid_argument(format!("flush batches: {e}")))?
        .unwrap_or_else(|| {
            (
                schema.unwrap_or_else(|| Arc::new(Schema::empty())),
                Vec::new(),
            )
        });
    let flush = Flush {
        id: desc.flush_id.clone(),
        trigger: desc.trigger(),
        ranges: desc.ranges,
        schema,
        batches,
        dead_letters: letters,
        streamed: taken.as_ref().map(|t| t.token),
    };
    if desc.expected_rows > 0 && rows != desc.expected_rows {
        return Err(Status::invalid_argument(format!(
            "flush {} carried {rows} rows but its descriptor announced {}",
            flush.id, desc.expected_rows
        )));
    }
    // From here the write owns what the sink took.
    if let Some(t) = taken.as_mut() {
        t.armed = false;
    }
    // Size of the Arrow IPC payload received (decoded batches share
    // message buffers, so their in-memory sizes would double count).
    let held = std::mem::replace(
        &mut *held.lock().unwrap_or_else(|p| p.into_inner()),
        bounds.in_flight.hold(),
    );
    Ok(Received {
        flush,
        encoding: enc,
        bytes: held.bytes(),
        rows,
        held,
    })
}

/// The flush's head descriptor, from the DoPut's first message.
fn head_of(first: &FlightData) -> Result<Decoded, Status> {
    let cmd = first
        .flight_descriptor
        .as_ref()
        .map(|d| d.cmd.clone())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            Status::invalid_argument("the first DoPut message must carry a FlightDescriptor whose cmd is a FlushDescriptor")
        })?;
    let head = decode_descriptor(cmd).map_err(Status::invalid_argument)?;
    if head.desc.flush_id.is_empty() {
        return Err(Status::invalid_argument("flush_id must not be empty"));
    }
    Ok(head)
}

/// A streamed flush's whole descriptor, from its trailer, which must name
/// the flush its stream began as.
fn trailing(trailer: &Mutex<Option<bytes::Bytes>>, flush_id: &str) -> Result<Decoded, Status> {
    let bytes = trailer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "streamed flush {flush_id} ended without its trailing descriptor; nothing was written"
            ))
        })?;
    let decoded = decode_descriptor(bytes)
        .map_err(|e| Status::invalid_argument(format!("trailing descriptor: {e}")))?;
    if decoded.desc.flush_id != flush_id {
        return Err(Status::invalid_argument(format!(
            "trailing descriptor names flush {:?}, the stream began as {flush_id:?}",
            decoded.desc.flush_id
        )));
    }
    Ok(decoded)
}

/// Hands one batch of a streamed flush to the sink. A refusal ends the
/// stream with a retryable status: the sender sends the flush whole.
async fn stream_batch(t: &Taken, batch: arrow::array::RecordBatch) -> Result<(), Status> {
    // On this worker, which hands its other tasks to another: no
    // thread handoff per batch.
    let taken = tokio::task::block_in_place(|| {
        t.sink
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stream_batch(&t.flush_id, t.token, batch)
    });
    taken.map_err(|error| {
        tracing::warn!(flush_id = %t.flush_id, error = %error.message, "streamed batch refused");
        let failure = WriteFailure {
            error,
            attempts: 1,
            exhausted: false,
        };
        failure_status(&t.flush_id, &failure)
    })
}

/// A streamed flush the sink is taking as it arrives. Dropped while armed
/// (the stream failed, or its handler was dropped), the sink forgets it.
struct Taken {
    sink: SharedSink,
    flush_id: String,
    token: u64,
    armed: bool,
}

impl Drop for Taken {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (sink, id, token) = (
            self.sink.clone(),
            std::mem::take(&mut self.flush_id),
            self.token,
        );
        let end = move || {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .stream_end(&id, token)
        };
        // Not on an async worker: the sink may be busy writing another flush.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(end)),
            Err(_) => end(),
        }
    }
}
