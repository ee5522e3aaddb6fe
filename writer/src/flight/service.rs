use millpond_shared::failpoint::{self, Failpoint};
use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::Schema;
use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use millpond_proto::{
    ErrorKind, FlushAck, OffsetRange, RecordedOffsets, RecordedOffsetsRequest, WriteError,
    ACTION_INGEST_STARTED, ACTION_INGEST_STOPPED, ACTION_RECORDED_OFFSETS,
};
use millpond_shared::metrics::{error_type, WriterMetrics};
use prost::Message;
use tokio::sync::watch;
use tonic::{Code, Request, Response, Status, Streaming};

use super::codec::{decode_descriptor, encode_ack, encode_write_error, Encoding};
use crate::health::WriterHealth;
use crate::sink::{Flush, SharedSink, WriteFailure};

#[derive(Clone)]
pub struct WriterService {
    sink: SharedSink,
    metrics: WriterMetrics,
    health: Arc<WriterHealth>,
    /// Receives a reason when the writer must exit non-zero.
    fatal: watch::Sender<Option<String>>,
    activity: Arc<Activity>,
    /// Most Arrow IPC bytes one DoPut may carry (a whole flush).
    max_flush_bytes: u64,
}

/// DoPut activity and the pod's ingest, so a stopping writer can wait for
/// that ingest's final flush and no longer.
#[derive(Default)]
pub struct Activity {
    in_flight: std::sync::atomic::AtomicUsize,
    /// The ingest instance that said it started and has not said it stopped.
    ingest: std::sync::Mutex<Option<String>>,
    /// Set once the writer stops serving: a flush whose stream ends after
    /// it is not written (the sink is closing).
    closing: std::sync::atomic::AtomicBool,
}

/// One DoPut in flight; ends when dropped, so a handler dropped mid-stream
/// (client reset, client killed) is not counted forever.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Activity {
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(self.clone())
    }

    fn ingest(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.ingest.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A (re)started ingest replaces the previous one: one ingest per pod.
    pub fn ingest_started(&self, id: &str) {
        *self.ingest() = Some(id.to_owned());
    }

    /// Only the current instance's stop counts (a late message from one
    /// that was replaced does not release the writer early).
    pub fn ingest_stopped(&self, id: &str) {
        let mut current = self.ingest();
        if current.as_deref() == Some(id) {
            *current = None;
        }
    }

    /// Nothing left to wait for: no DoPut running and no ingest that has
    /// yet to send its final flush.
    pub fn drained(&self) -> bool {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 && self.ingest().is_none()
    }

    /// No flush is written from now on; those still arriving are refused
    /// as retryable.
    pub fn close(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn closing(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The ingest instance still expected, for the shutdown log.
    pub fn awaited_ingest(&self) -> Option<String> {
        self.ingest().clone()
    }
}

impl WriterService {
    pub fn new(
        sink: SharedSink,
        metrics: WriterMetrics,
        health: Arc<WriterHealth>,
        fatal: watch::Sender<Option<String>>,
    ) -> Self {
        WriterService {
            sink,
            metrics,
            health,
            fatal,
            activity: Arc::default(),
            max_flush_bytes: crate::config::DEFAULT_MAX_FLUSH_BYTES,
        }
    }

    /// Bounds each DoPut (MILLPOND_WRITER_MAX_FLUSH_BYTES).
    pub fn with_max_flush_bytes(mut self, max: u64) -> Self {
        self.max_flush_bytes = max;
        self
    }

    /// Shared view of DoPut activity (for graceful shutdown).
    pub fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }

    pub(super) async fn put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<BoxStream<'static, Result<PutResult, Status>>>, Status> {
        let receiving = Instant::now();
        let (flush, enc, bytes, rows_in) = self.receive(request).await.inspect_err(|status| {
            // RESOURCE_EXHAUSTED: over MILLPOND_WRITER_MAX_FLUSH_BYTES.
            let what = if status.code() == tonic::Code::ResourceExhausted {
                error_type::FLUSH_TOO_LARGE
            } else {
                error_type::FLIGHT_REQUEST
            };
            self.metrics.errors.with_label_values(&[what]).inc();
        })?;
        // A streamed flush arrives over the time ingest takes to consume
        // it; the flush's duration is the write, from its last message.
        let received_ms = receiving.elapsed().as_millis() as u64;
        let started = Instant::now();
        let id = flush.id.clone();
        let sink = self.sink.clone();
        let metrics = self.metrics.clone();
        let activity = self.activity.clone();
        let result = tokio::task::spawn_blocking(move || {
            let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
            if activity.closing() {
                // Checked under the sink's lock, which closing takes too.
                if let Some(token) = flush.streamed {
                    sink.stream_end(&flush.id, token);
                }
                return Err(WriteFailure {
                    error: crate::sink::SinkError::transient(
                        "the writer is stopping; the flush was not written",
                    ),
                    attempts: 0,
                    exhausted: false,
                });
            }
            let name = sink.name();
            let written = sink
                .write_retrying(&flush, &metrics, &std::thread::sleep)
                .map(|r| (r.into_inner(), name));
            if let (Err(_), Some(token)) = (&written, flush.streamed) {
                sink.stream_end(&flush.id, token);
            }
            written
        })
        .await
        .map_err(|e| Status::internal(format!("write task failed: {e}")))?;

        match result {
            Ok((receipt, sink_name)) => {
                failpoint::abort(Failpoint::KillAfterCommit);
                self.health.write_succeeded();
                self.metrics.records_written.inc_by(receipt.rows_written);
                self.metrics
                    .flush_duration
                    .observe(started.elapsed().as_secs_f64());
                self.metrics.flush_size_bytes.observe(bytes as f64);
                self.metrics.flush_size_records.observe(rows_in as f64);
                tracing::info!(flush_id = %id, rows = receipt.rows_written, dead_letters = receipt.dead_letters_written, outcome = ?receipt.outcome,
                    snapshot = ?receipt.snapshot_id, received_ms, ms = started.elapsed().as_millis() as u64, "flush durable");
                let ack = FlushAck {
                    flush_id: id,
                    rows_written: receipt.rows_written,
                    dead_letters_written: receipt.dead_letters_written,
                    outcome: receipt.outcome as i32,
                    sink: sink_name.to_owned(),
                    table: receipt.table,
                    snapshot_id: receipt.snapshot_id.unwrap_or(-1),
                    recorded: receipt.recorded,
                    recorded_by_another_flush: receipt.recorded_by_another_flush,
                };
                let put = PutResult {
                    app_metadata: encode_ack(&ack, enc),
                };
                Ok(Response::new(stream::once(async { Ok(put) }).boxed()))
            }
            Err(failure) => {
                let status = self.failure_status(&id, &failure);
                self.health.write_failed(
                    failure.error.message.clone(),
                    failure.error.kind == crate::sink::SinkErrorKind::Permanent,
                );
                if failure.exhausted {
                    let why = match failure.error.kind {
                        crate::sink::SinkErrorKind::Deadline => "given up at its deadline",
                        _ => "retries exhausted",
                    };
                    let reason = format!("flush {id}: {why}: {}", failure.error.message);
                    self.health.set_fatal(reason.clone());
                    let _ = self.fatal.send(Some(reason));
                }
                Err(status)
            }
        }
    }

    pub(super) async fn action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<BoxStream<'static, Result<arrow_flight::Result, Status>>>, Status> {
        let action = request.into_inner();
        let done = || {
            let empty = arrow_flight::Result {
                body: Default::default(),
            };
            Ok(Response::new(stream::once(async { Ok(empty) }).boxed()))
        };
        match action.r#type.as_str() {
            ACTION_RECORDED_OFFSETS => {}
            ACTION_INGEST_STARTED | ACTION_INGEST_STOPPED => {
                let id = std::str::from_utf8(&action.body)
                    .map_err(|_| Status::invalid_argument("ingest id must be UTF-8"))?;
                if action.r#type == ACTION_INGEST_STARTED {
                    tracing::info!(ingest = %id, "ingest started; a stop waits for its final flush");
                    self.activity.ingest_started(id);
                } else {
                    tracing::info!(ingest = %id, "ingest stopped");
                    self.activity.ingest_stopped(id);
                }
                return done();
            }
            other => {
                return Err(Status::unimplemented(format!(
                    "unknown action {other:?}; supported: {ACTION_RECORDED_OFFSETS}, \
                     {ACTION_INGEST_STARTED}, {ACTION_INGEST_STOPPED}"
                )))
            }
        }
        let req = RecordedOffsetsRequest::decode(action.body.as_ref())
            .map_err(|e| Status::invalid_argument(format!("RecordedOffsetsRequest: {e}")))?;
        let sink = self.sink.clone();
        let ranges: Vec<OffsetRange> = tokio::task::spawn_blocking(move || {
            let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
            let r = sink.recorded_offsets(&req.topic);
            if r.is_err() {
                sink.reset_caches();
            }
            r
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| Status::unavailable(format!("reading recorded offsets: {}", e.message)))?;
        let body = RecordedOffsets { ranges }.encode_to_vec();
        let result = arrow_flight::Result { body: body.into() };
        Ok(Response::new(stream::once(async { Ok(result) }).boxed()))
    }

    fn failure_status(&self, flush_id: &str, f: &WriteFailure) -> Status {
        let kind = if f.error.is_retryable() {
            ErrorKind::Retryable
        } else {
            ErrorKind::Permanent
        };
        let details = WriteError {
            kind: kind as i32,
            error_type: f.error.error_type().to_owned(),
            message: f.error.message.clone(),
            flush_id: flush_id.to_owned(),
        };
        let code = if f.error.is_retryable() {
            Code::Unavailable
        } else {
            Code::FailedPrecondition
        };
        let text = format!(
            "flush {flush_id} not written after {} attempt(s): {}",
            f.attempts, f.error.message
        );
        Status::with_details(code, text, encode_write_error(&details))
    }

    async fn receive(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<(Flush, Encoding, u64, u64), Status> {
        let mut stream = request.into_inner();
        let first = stream
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("empty DoPut stream: expected a flush"))?;
        let cmd = first
            .flight_descriptor
            .as_ref()
            .map(|d| d.cmd.clone())
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                Status::invalid_argument("the first DoPut message must carry a FlightDescriptor whose cmd is a FlushDescriptor")
            })?;
        let (head, enc) = decode_descriptor(&cmd).map_err(Status::invalid_argument)?;
        if head.flush_id.is_empty() {
            return Err(Status::invalid_argument("flush_id must not be empty"));
        }
        let wire = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = wire.clone();
        // A streamed flush ends with a message holding no Arrow data whose
        // app_metadata is the whole descriptor; it never reaches the decoder.
        let trailer = Arc::new(std::sync::Mutex::new(None::<bytes::Bytes>));
        let slot = trailer.clone();
        let streamed = head.trailer;
        let all = stream::once(async { Ok(first) })
            .chain(stream.map_err(|s| FlightError::Tonic(Box::new(s))))
            .and_then({
                let (limit, flush_id) = (self.max_flush_bytes, head.flush_id.clone());
                move |fd: FlightData| {
                    let n = (fd.data_header.len() + fd.data_body.len()) as u64;
                    let total = counter.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
                    futures::future::ready(if total > limit {
                        Err(FlightError::Tonic(Box::new(too_large(&flush_id, limit))))
                    } else {
                        Ok(fd)
                    })
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
                self.sink
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .stream_begin(&head.flush_id)
            })
            .map(|token| Taken {
                sink: self.sink.clone(),
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
                        Some(t) => self.stream_batch(t, b).await?,
                        None => batches.push(b),
                    }
                }
                DecodedPayload::None => {}
            }
            if streamed && rows > 0 {
                failpoint::abort(Failpoint::KillMidStream);
            }
        }
        let desc = if streamed {
            let bytes = trailer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "streamed flush {} ended without its trailing descriptor; nothing was written",
                        head.flush_id
                    ))
                })?;
            let (desc, _) = decode_descriptor(&bytes)
                .map_err(|e| Status::invalid_argument(format!("trailing descriptor: {e}")))?;
            if desc.flush_id != head.flush_id {
                return Err(Status::invalid_argument(format!(
                    "trailing descriptor names flush {:?}, the stream began as {:?}",
                    desc.flush_id, head.flush_id
                )));
            }
            desc
        } else {
            head
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
            dead_letters: desc.dead_letters,
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
        let bytes = wire.load(std::sync::atomic::Ordering::Relaxed);
        Ok((flush, enc, bytes, rows))
    }

    /// Hands one batch of a streamed flush to the sink. A refusal ends the
    /// stream with a retryable status: the sender sends the flush whole.
    async fn stream_batch(
        &self,
        t: &Taken,
        batch: arrow::array::RecordBatch,
    ) -> Result<(), Status> {
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
            self.failure_status(&t.flush_id, &failure)
        })
    }
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

/// A DoPut past MILLPOND_WRITER_MAX_FLUSH_BYTES: refused as it arrives,
/// nothing written; permanent (the same flush is as large again).
fn too_large(flush_id: &str, limit: u64) -> Status {
    let message = format!(
        "flush {flush_id} carries more than MILLPOND_WRITER_MAX_FLUSH_BYTES ({limit} bytes of Arrow data); \
         nothing was written. Raise MILLPOND_WRITER_MAX_FLUSH_BYTES on the writer or lower FLUSH_SIZE on ingest"
    );
    let details = WriteError {
        kind: ErrorKind::Permanent as i32,
        error_type: error_type::FLUSH_TOO_LARGE.to_owned(),
        message: message.clone(),
        flush_id: flush_id.to_owned(),
    };
    Status::with_details(
        Code::ResourceExhausted,
        message,
        details.encode_to_vec().into(),
    )
}

fn flight_to_status(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(s) => *s,
        other => Status::invalid_argument(format!("bad Flight data: {other}")),
    }
}

#[tonic::async_trait]
impl FlightService for WriterService {
    type HandshakeStream = BoxStream<'static, Result<HandshakeResponse, Status>>;
    type ListFlightsStream = BoxStream<'static, Result<FlightInfo, Status>>;
    type DoGetStream = BoxStream<'static, Result<FlightData, Status>>;
    type DoPutStream = BoxStream<'static, Result<PutResult, Status>>;
    type DoActionStream = BoxStream<'static, Result<arrow_flight::Result, Status>>;
    type ListActionsStream = BoxStream<'static, Result<ActionType, Status>>;
    type DoExchangeStream = BoxStream<'static, Result<FlightData, Status>>;

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let _in_flight = self.activity.begin();
        self.put(request).await
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        self.action(request).await
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let types = [
            (
                ACTION_RECORDED_OFFSETS,
                "Offsets the lake recorded per partition (body: RecordedOffsetsRequest)",
            ),
            (
                ACTION_INGEST_STARTED,
                "The pod's ingest announces itself (body: instance id); a stopping writer waits for it",
            ),
            (
                ACTION_INGEST_STOPPED,
                "The pod's ingest sent its final flush (body: instance id)",
            ),
        ]
        .map(|(t, d)| {
            Ok(ActionType {
                r#type: t.into(),
                description: d.into(),
            })
        });
        Ok(Response::new(stream::iter(types).boxed()))
    }

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented(
            "handshake: the writer has no authentication",
        ))
    }

    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented(
            "list_flights: the writer only accepts DoPut",
        ))
    }

    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Err(Status::unimplemented(
            "get_flight_info: the writer only accepts DoPut",
        ))
    }

    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented(
            "poll_flight_info: the writer only accepts DoPut",
        ))
    }

    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented(
            "get_schema: the writer only accepts DoPut",
        ))
    }

    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        Err(Status::unimplemented(
            "do_get: the writer only accepts DoPut",
        ))
    }

    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented(
            "do_exchange: the writer only accepts DoPut",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn a_put_dropped_mid_stream_is_no_longer_in_flight() {
        let activity = Arc::new(Activity::default());
        let put = async {
            let _in_flight = activity.begin();
            std::future::pending::<()>().await;
        };
        // The handler future is dropped before it finishes, as tonic does
        // when the client resets the stream.
        let mut put = Box::pin(put);
        let waker = futures::task::noop_waker();
        let _ = put
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker));
        assert!(!activity.drained());
        drop(put);
        assert!(activity.drained());
    }

    #[test]
    fn only_the_current_ingest_releases_a_stopping_writer() {
        let activity = Activity::default();
        assert!(
            activity.drained(),
            "no ingest announced: nothing to wait for"
        );
        activity.ingest_started("a");
        activity.ingest_started("b"); // a restarted in the pod
        activity.ingest_stopped("a"); // late stop of the old instance
        assert!(!activity.drained());
        assert_eq!(activity.awaited_ingest().as_deref(), Some("b"));
        activity.ingest_stopped("b");
        assert!(activity.drained());
    }
}
