//! The bounds of one DoPut as it arrives: its own size
//! (MILLPOND_WRITER_MAX_FLUSH_BYTES), its share of what all DoPuts hold at
//! once (MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES) and the longest it may send
//! nothing (MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S).
use std::sync::Arc;
use std::time::Duration;

use arrow_flight::error::FlightError;
use arrow_flight::FlightData;
use futures::stream;
use tonic::{Status, Streaming};

use super::budget::{Budget, Held, Refused};
use super::status::{busy, idle, larger_than_in_flight, too_large};

/// The bounds of one DoPut.
#[derive(Clone)]
pub struct Bounds {
    /// MILLPOND_WRITER_MAX_FLUSH_BYTES.
    pub max_flush_bytes: u64,
    /// MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES, shared by all DoPuts.
    pub in_flight: Arc<Budget>,
    /// MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S: the longest wait for a message.
    pub idle: Duration,
}

impl Bounds {
    /// Takes a message's bytes for the DoPut holding `held`, or refuses it.
    pub fn take(&self, held: &mut Held, flush_id: &str, n: u64) -> Result<(), Status> {
        if held.bytes().saturating_add(n) > self.max_flush_bytes {
            return Err(too_large(flush_id, self.max_flush_bytes));
        }
        held.take(n).map_err(|why| match why {
            Refused::Alone => larger_than_in_flight(flush_id, self.in_flight.limit()),
            Refused::Busy => busy(flush_id, self.in_flight.limit()),
        })
    }
}

/// The DoPut's messages after the first, each awaited at most `after`:
/// an upload that goes quiet is cut and ends with [`idle`].
pub fn unless_idle(
    stream: Streaming<FlightData>,
    flush_id: String,
    after: Duration,
) -> impl futures::Stream<Item = Result<FlightData, FlightError>> {
    stream::unfold(Some(stream), move |s| {
        let id = flush_id.clone();
        async move {
            let mut s = s?;
            match tokio::time::timeout(after, s.message()).await {
                Ok(Ok(Some(fd))) => Some((Ok(fd), Some(s))),
                Ok(Ok(None)) => None,
                Ok(Err(status)) => Some((Err(FlightError::Tonic(Box::new(status))), None)),
                Err(_) => Some((Err(FlightError::Tonic(Box::new(idle(&id, after)))), None)),
            }
        }
    })
}
