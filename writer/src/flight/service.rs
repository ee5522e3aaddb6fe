//! The writer's Flight service: a DoPut is received, written and
//! acknowledged; the actions and the refusals of what the writer does not
//! serve.
use millpond_shared::failpoint::{self, Failpoint};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use millpond_proto::FlushAck;
use millpond_shared::metrics::WriterMetrics;
use tokio::sync::watch;
use tonic::{Request, Response, Status, Streaming};

use super::activity::Activity;
use super::bounds::Bounds;
use super::budget::Budget;
use super::codec::encode_ack;
use super::receive::{receive, Received};
use super::status::{failure_status, refusal_type};
use super::{actions, write};
use crate::config::{in_flight_default, DEFAULT_MAX_FLUSH_BYTES, DEFAULT_UPLOAD_IDLE_TIMEOUT};
use crate::health::WriterHealth;
use crate::sink::{SharedSink, SinkErrorKind};

#[derive(Clone)]
pub struct WriterService {
    sink: SharedSink,
    metrics: WriterMetrics,
    health: Arc<WriterHealth>,
    /// Receives a reason when the writer must exit non-zero.
    fatal: watch::Sender<Option<String>>,
    activity: Arc<Activity>,
    /// What one DoPut, and all of them at once, may hold and how long one
    /// may go quiet.
    bounds: Bounds,
    /// The sink's whole-write budget, told to each ingest that announces
    /// itself (none: the writer tells nothing).
    write_budget: Option<millpond_proto::WriterBudget>,
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
            health,
            fatal,
            activity: Arc::default(),
            bounds: Bounds {
                max_flush_bytes: DEFAULT_MAX_FLUSH_BYTES,
                in_flight: Budget::new(
                    in_flight_default(DEFAULT_MAX_FLUSH_BYTES),
                    Some(metrics.in_flight_bytes.clone()),
                ),
                idle: DEFAULT_UPLOAD_IDLE_TIMEOUT,
            },
            metrics,
            write_budget: None,
        }
    }

    /// Answers each "ingest-started" with `budget`, which ingest's send
    /// deadline must hold.
    pub fn with_write_budget(mut self, budget: millpond_proto::WriterBudget) -> Self {
        self.write_budget = Some(budget);
        self
    }

    /// Bounds each DoPut (MILLPOND_WRITER_MAX_FLUSH_BYTES), all of them at
    /// once (MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES) and how long one may send
    /// nothing (MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S).
    pub fn with_bounds(mut self, max_flush_bytes: u64, in_flight: u64, idle: Duration) -> Self {
        self.bounds = Bounds {
            max_flush_bytes,
            in_flight: Budget::new(in_flight, Some(self.metrics.in_flight_bytes.clone())),
            idle,
        };
        self
    }

    /// Shared view of DoPut activity (for graceful shutdown).
    pub fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }

    async fn put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<BoxStream<'static, Result<PutResult, Status>>>, Status> {
        let receiving = Instant::now();
        let received = receive(&self.sink, &self.bounds, request)
            .await
            .inspect_err(|status| {
                let what = refusal_type(status);
                self.metrics.errors.with_label_values(&[what]).inc();
            })?;
        // `_held` keeps the flush's bytes counted until it is written.
        let Received {
            flush,
            encoding: enc,
            bytes,
            rows: rows_in,
            held: _held,
        } = received;
        // A streamed flush arrives over the time ingest takes to consume
        // it; the flush's duration is the write, from its last message.
        let received_ms = receiving.elapsed().as_millis() as u64;
        let started = Instant::now();
        let id = flush.id.clone();
        let result = write::write(
            self.sink.clone(),
            self.metrics.clone(),
            self.activity.clone(),
            flush,
        )
        .await?;

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
                let status = failure_status(&id, &failure);
                if failure.error.is_fault() {
                    self.health.write_failed(failure.error.kind);
                }
                if failure.exhausted {
                    let why = match failure.error.kind {
                        SinkErrorKind::Deadline => "given up at its deadline",
                        _ => "retries exhausted",
                    };
                    let reason = format!("flush {id}: {why}: {}", failure.error.message);
                    self.health.set_fatal(failure.error.kind);
                    let _ = self.fatal.send(Some(reason));
                }
                Err(status)
            }
        }
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
        actions::action(
            &self.sink,
            &self.activity,
            self.write_budget.as_ref(),
            request,
        )
        .await
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let types = actions::types();
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
