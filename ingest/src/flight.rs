//! Client side of the Flight contract: send a flush to the writer, whole
//! ([`WriterClient::send`]) or batch by batch as it accumulates
//! ([`WriterClient::open`]), and wait for its durable acknowledgement.
use std::borrow::Cow;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{Action, FlightClient, FlightData, FlightDescriptor};
use futures::{StreamExt, TryStreamExt};
use millpond_proto::{
    AckOutcome, ErrorKind, FlushAck, FlushDescriptor, OffsetRange, RecordedOffsets,
    RecordedOffsetsRequest, WriteError, ACTION_INGEST_STARTED, ACTION_RECORDED_OFFSETS,
    FLOW_WINDOW_BYTES,
};
use millpond_shared::retry::{GaveUp, Ladder};
use millpond_shared::shutdown::{Stop, Stopped};
use prost::Message;

use crate::epoch::LakeTopic;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The writer judged the flush unwritable; resending cannot help.
    #[error("writer refused flush permanently ({error_type}): {message}")]
    Permanent { error_type: String, message: String },
    /// No acknowledgement before the deadline.
    #[error("no acknowledgement within {0:?}: {1}")]
    Deadline(Duration, String),
    /// A streamed flush lost its stream; the writer wrote nothing of it,
    /// or wrote all of it and the ack was lost.
    #[error("the flush stream broke: {0}")]
    Broken(String),
    /// Ingest is stopping and the writer did not answer in time (see
    /// [`AfterStop`]).
    #[error("gave up waiting for the writer")]
    Stopped(#[from] Stopped),
}

/// How long a flush still waits for the writer once SIGTERM (or SIGINT)
/// came: well under Kubernetes' default terminationGracePeriodSeconds
/// (30 s). A flush not acknowledged by then is given up: nothing of it is
/// committed to Kafka, so it is read again at the next start.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// How long a wait for the writer goes on once the stop came: the one rule
/// for every call of this file.
#[derive(Debug, Clone, Copy)]
enum AfterStop {
    /// Nothing consumed depends on it (reading the lake's offsets): it
    /// ends at the stop.
    Ends,
    /// Delivering a flush, or saying this ingest stopped: it may go on
    /// until [`SHUTDOWN_GRACE`] after the stop.
    Grace,
}

/// Runs `wait` until it ends, or until `stop` (if any) says it must give
/// up, as `after` says.
async fn unless_stopped<T>(
    stop: Option<&Stop>,
    after: AfterStop,
    wait: impl std::future::Future<Output = Result<T, SendError>>,
) -> Result<T, SendError> {
    let Some(stop) = stop else {
        return wait.await;
    };
    let grace = match after {
        AfterStop::Ends => Duration::ZERO,
        AfterStop::Grace => SHUTDOWN_GRACE,
    };
    tokio::select! {
        done = wait => done,
        () = stop.after(grace) => Err(Stopped.into()),
    }
}

pub struct WriterClient {
    addr: String,
    channel: Option<tonic::transport::Channel>,
    /// This ingest instance, announced on every new connection so a writer
    /// that restarted meanwhile still waits for this instance's final flush.
    instance: Option<String>,
    /// The name the lake records the topic's offsets under.
    lake_topic: Option<LakeTopic>,
    /// Ends the waits for the writer once ingest is stopping.
    stop: Option<Stop>,
}

/// HTTP/2 pings on the connection to the writer, and how long one may go
/// unanswered before the connection counts as dead.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Resend ladder: 1 s doubling to 30 s, jittered upward.
const RESEND: Ladder = Ladder {
    attempts: u32::MAX,
    base: Duration::from_secs(1),
    jitter: 0.25,
};

type Attempt<T> = millpond_shared::retry::Attempt<T, SendError>;

impl WriterClient {
    pub fn new(addr: impl Into<String>) -> Self {
        WriterClient {
            addr: addr.into(),
            channel: None,
            instance: None,
            lake_topic: None,
            stop: None,
        }
    }

    /// Names the topic's offsets as `lake_topic` says in every flush and
    /// in reads of the recorded offsets (MILLPOND_TOPIC_EPOCH).
    pub fn recording(mut self, lake_topic: LakeTopic) -> Self {
        self.lake_topic = Some(lake_topic);
        self
    }

    fn to_lake<'a>(&self, desc: &'a FlushDescriptor) -> Cow<'a, FlushDescriptor> {
        match &self.lake_topic {
            Some(t) => t.to_lake(desc),
            None => Cow::Borrowed(desc),
        }
    }

    /// Ends every wait for the writer at `stop`, or [`SHUTDOWN_GRACE`]
    /// after it for a flush.
    pub fn stopping_on(mut self, stop: Stop) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Whether a flush may no longer wait for the writer: the stop came
    /// more than [`SHUTDOWN_GRACE`] ago.
    pub fn past_grace(&self) -> bool {
        self.stop
            .as_ref()
            .and_then(Stop::at)
            .is_some_and(|at| at.elapsed() >= SHUTDOWN_GRACE)
    }

    /// Announces `instance` (ACTION_INGEST_STARTED) on every new connection.
    pub fn announcing(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    async fn connect(&mut self) -> Result<FlightClient, String> {
        if self.channel.is_none() {
            let channel = tonic::transport::Channel::from_shared(format!("http://{}", self.addr))
                .map_err(|e| e.to_string())?
                .connect_timeout(Duration::from_secs(5))
                // A writer that froze or vanished without closing the
                // connection is noticed within seconds, not at a deadline.
                .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
                .keep_alive_timeout(KEEPALIVE_TIMEOUT)
                .keep_alive_while_idle(true)
                // Large windows: a flush is tens of MB on one HTTP/2 stream.
                .initial_stream_window_size(FLOW_WINDOW_BYTES)
                .initial_connection_window_size(FLOW_WINDOW_BYTES)
                .connect()
                .await
                .map_err(|e| format!("connect {}: {e}", self.addr))?;
            if let Some(id) = &self.instance {
                let action = Action::new(ACTION_INGEST_STARTED, id.as_bytes().to_vec());
                let mut c = FlightClient::new(channel.clone());
                c.do_action(action)
                    .await
                    .map_err(|e| format!("announcing ingest {id}: {e}"))?
                    .try_collect::<Vec<_>>()
                    .await
                    .map_err(|e| format!("announcing ingest {id}: {e}"))?;
            }
            self.channel = Some(channel);
        }
        Ok(FlightClient::new(
            self.channel.clone().expect("just connected"),
        ))
    }

    /// [`WriterClient::retry`], ended by the stop as `after` says.
    async fn retrying<T, F, Fut>(
        &mut self,
        deadline: Duration,
        after: AfterStop,
        what: &str,
        op: F,
    ) -> Result<T, SendError>
    where
        T: Send,
        F: FnMut(FlightClient) -> Fut + Send,
        Fut: std::future::Future<Output = Attempt<T>> + Send,
    {
        let stop = self.stop.clone();
        let outcome = unless_stopped(stop.as_ref(), after, self.retry(deadline, what, op)).await;
        if matches!(outcome, Err(SendError::Stopped(_))) {
            // Given up mid-attempt: the connection may hold half a call.
            self.channel = None;
        }
        outcome
    }

    /// Runs `op` on a connection until it is done or fatal, reconnecting
    /// after each failure, on the RESEND ladder within `deadline`. Each
    /// attempt, its connection included, is bounded by the time left.
    async fn retry<T, F, Fut>(
        &mut self,
        deadline: Duration,
        what: &str,
        op: F,
    ) -> Result<T, SendError>
    where
        T: Send,
        F: FnMut(FlightClient) -> Fut + Send,
        Fut: std::future::Future<Output = Attempt<T>> + Send,
    {
        RESEND
            .retry_within(
                deadline,
                Duration::from_secs(1),
                &mut (self, op),
                |(this, op), left| {
                    Box::pin(async move {
                        let started = Instant::now();
                        let outcome = match tokio::time::timeout(left, this.connect()).await {
                            Ok(Ok(c)) => {
                                let rest = left.saturating_sub(started.elapsed());
                                match tokio::time::timeout(rest, op(c)).await {
                                    Ok(o) => o,
                                    Err(_) => Attempt::Retry(format!("no answer within {left:?}")),
                                }
                            }
                            Ok(Err(e)) => Attempt::Retry(e),
                            Err(_) => Attempt::Retry(format!("no connection within {left:?}")),
                        };
                        if matches!(outcome, Attempt::Retry(_)) {
                            this.channel = None;
                        }
                        outcome
                    })
                },
                |failed, delay, why| {
                    tracing::warn!(what, attempt = failed, delay_ms = delay.as_millis() as u64, error = %why,
                        "writer did not acknowledge; resending")
                },
            )
            .await
            .map_err(|g| match g {
                GaveUp::Fatal(e) => e,
                GaveUp::Exhausted(why) => SendError::Deadline(deadline, why),
            })
    }

    /// Forgets the connection: the next call connects (and announces
    /// this instance) anew. For a stream that broke.
    pub fn reset(&mut self) {
        self.channel = None;
    }

    /// Says `action` (`ACTION_INGEST_STOPPED`) for an ingest instance,
    /// retrying until `deadline`.
    pub async fn announce(
        &mut self,
        action: &'static str,
        instance: &str,
        deadline: Duration,
    ) -> Result<(), SendError> {
        let body = instance.as_bytes().to_vec();
        self.retrying(deadline, AfterStop::Grace, action, |mut c| {
            let body = body.clone();
            async move {
                match c.do_action(Action::new(action, body)).await {
                    Ok(s) => match s.try_collect::<Vec<_>>().await {
                        Ok(_) => Attempt::Done(()),
                        Err(e) => Attempt::Retry(e.to_string()),
                    },
                    Err(e) => Attempt::Retry(e.to_string()),
                }
            }
        })
        .await
    }

    /// Offsets the lake recorded per partition; waits for the writer.
    pub async fn recorded_offsets(
        &mut self,
        topic: &str,
        deadline: Duration,
    ) -> Result<Vec<OffsetRange>, SendError> {
        let lake_name = match &self.lake_topic {
            Some(t) => t.lake_name(topic),
            None => topic,
        };
        let body = RecordedOffsetsRequest {
            topic: lake_name.into(),
        }
        .encode_to_vec();
        let lake_topic = self.lake_topic.clone();
        let ranges = self
            .retrying(deadline, AfterStop::Ends, "recorded-offsets", |mut c| {
                let body = body.clone();
                async move {
                    let stream = match c
                        .do_action(Action::new(ACTION_RECORDED_OFFSETS, body))
                        .await
                    {
                        Ok(s) => s,
                        Err(e) => return Attempt::Retry(e.to_string()),
                    };
                    match stream.try_collect::<Vec<_>>().await {
                        Ok(items) => {
                            match items.first().map(|b| RecordedOffsets::decode(b.as_ref())) {
                                Some(Ok(r)) => Attempt::Done(r.ranges),
                                _ => Attempt::Retry("malformed recorded-offsets answer".into()),
                            }
                        }
                        Err(e) => Attempt::Retry(e.to_string()),
                    }
                }
            })
            .await?;
        Ok(match lake_topic {
            Some(t) => t.from_lake(ranges),
            None => ranges,
        })
    }

    /// Opens a streamed flush (see `FlushDescriptor.trailer`) whose first
    /// batch is `first`, connecting until `deadline`. Nothing of the flush
    /// is lost while this fails: `first` is only borrowed.
    pub async fn open(
        &mut self,
        flush_id: &str,
        first: &RecordBatch,
        deadline: Duration,
    ) -> Result<FlushStream, SendError> {
        // A round trip first: a cached connection to a writer that died
        // would otherwise take the first batches and lose them. A new
        // connection announces this ingest to the (restarted) writer.
        let client = self
            .retrying(
                deadline,
                AfterStop::Grace,
                "stream-open",
                |mut c| async move {
                    match c.list_actions().await {
                        Ok(s) => match s.try_collect::<Vec<_>>().await {
                            Ok(_) => Attempt::Done(c),
                            Err(e) => Attempt::Retry(e.to_string()),
                        },
                        Err(e) => Attempt::Retry(e.to_string()),
                    }
                },
            )
            .await?;
        let (tx, rx) = tokio::sync::mpsc::channel::<FlightData>(STREAM_QUEUE);
        let reply = tokio::spawn(put_stream(client, rx));
        let mut stream = FlushStream {
            tx,
            reply,
            replied: false,
            lake_topic: self.lake_topic.clone(),
            stop: self.stop.clone(),
            head: Some(FlightDescriptor::new_cmd(
                FlushDescriptor {
                    flush_id: flush_id.to_owned(),
                    trailer: true,
                    ..Default::default()
                }
                .encode_to_vec(),
            )),
        };
        stream.push(first, deadline).await?;
        Ok(stream)
    }

    /// Sends the flush until the writer acknowledges it. The same id,
    /// offsets and rows go out on every attempt.
    pub async fn send(
        &mut self,
        desc: &FlushDescriptor,
        schema: SchemaRef,
        batches: &[RecordBatch],
        deadline: Duration,
    ) -> Result<FlushAck, SendError> {
        let cmd = self.to_lake(desc).encode_to_vec();
        self.retrying(deadline, AfterStop::Grace, "flush", |mut c| {
            let fd = FlightDescriptor::new_cmd(cmd.clone());
            // The encoder needs an owned stream; cloning batches is cheap (Arc'd buffers).
            let owned: Vec<RecordBatch> = batches.to_vec();
            let stream = FlightDataEncoderBuilder::new()
                .with_schema(schema.clone())
                .with_flight_descriptor(Some(fd))
                .build(futures::stream::iter(owned.into_iter().map(Ok)));
            async move {
                let result = match c.do_put(stream).await {
                    Ok(s) => s.try_collect::<Vec<_>>().await,
                    Err(e) => Err(e),
                };
                match result {
                    Ok(results) => match ack_of(&results) {
                        Some(ack) => Attempt::Done(ack),
                        None => Attempt::Retry(NO_ACK.into()),
                    },
                    Err(e) => classify(e),
                }
            }
        })
        .await
    }
}

/// FlightData messages a streamed flush may have queued for the writer
/// (each at most the encoder's 2 MiB): what ingest holds beyond the batch
/// it is converting.
const STREAM_QUEUE: usize = 4;

/// How long a stream the writer ended early is given to say why.
const ENDED_WAIT: Duration = Duration::from_secs(5);

/// A flush on its way to the writer while ingest still consumes it.
pub struct FlushStream {
    tx: tokio::sync::mpsc::Sender<FlightData>,
    reply: tokio::task::JoinHandle<Result<FlushAck, FlightError>>,
    /// The head descriptor, sent with the first batch.
    head: Option<FlightDescriptor>,
    /// `reply` has given its result (to `ended`): it is not awaited again.
    replied: bool,
    /// See [`WriterClient::recording`].
    lake_topic: Option<LakeTopic>,
    /// The client's stop: a flush waits [`SHUTDOWN_GRACE`] after it.
    stop: Option<Stop>,
}

impl FlushStream {
    /// Sends one batch with its own schema. An error means the stream is
    /// broken: what it carried is gone and the flush must be rebuilt.
    pub async fn push(&mut self, batch: &RecordBatch, deadline: Duration) -> Result<(), SendError> {
        let stop = self.stop.clone();
        unless_stopped(
            stop.as_ref(),
            AfterStop::Grace,
            self.push_within(batch, deadline),
        )
        .await
    }

    async fn push_within(
        &mut self,
        batch: &RecordBatch,
        deadline: Duration,
    ) -> Result<(), SendError> {
        let encoded: Vec<FlightData> = FlightDataEncoderBuilder::new()
            .with_schema(batch.schema())
            .with_flight_descriptor(self.head.take())
            .build(futures::stream::iter([Ok(batch.clone())]))
            .try_collect()
            .await
            .map_err(|e| SendError::Permanent {
                error_type: "encode".into(),
                message: e.to_string(),
            })?;
        // One deadline for the whole batch, however many messages it takes.
        let tx = &self.tx;
        let sent = tokio::time::timeout(deadline, async {
            for fd in encoded {
                tx.send(fd).await?;
            }
            Ok::<_, tokio::sync::mpsc::error::SendError<FlightData>>(())
        })
        .await;
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(self.ended(deadline.min(ENDED_WAIT)).await),
            Err(_) => Err(SendError::Deadline(
                deadline,
                "the writer stopped reading".into(),
            )),
        }
    }

    /// The writer ended the stream before its trailer: its status says
    /// why. A permanent refusal is final (a rebuilt flush would be refused
    /// too); anything else, or no status within `wait`, is a broken stream.
    async fn ended(&mut self, wait: Duration) -> SendError {
        let status = tokio::time::timeout(wait, &mut self.reply).await;
        self.replied = status.is_ok();
        match status {
            Ok(Ok(Err(e))) => match classify::<()>(e) {
                Attempt::Fatal(e) => e,
                Attempt::Retry(why) => SendError::Broken(why),
                Attempt::Done(()) => unreachable!("classify never returns Done"),
            },
            _ => SendError::Broken("the writer ended the stream".into()),
        }
    }

    /// Ends the stream with the whole descriptor and waits for the ack,
    /// all within `deadline`.
    pub async fn finish(
        self,
        desc: &FlushDescriptor,
        deadline: Duration,
    ) -> Result<FlushAck, SendError> {
        let stop = self.stop.clone();
        unless_stopped(
            stop.as_ref(),
            AfterStop::Grace,
            self.finish_within(desc, deadline),
        )
        .await
    }

    async fn finish_within(
        mut self,
        desc: &FlushDescriptor,
        deadline: Duration,
    ) -> Result<FlushAck, SendError> {
        if self.replied {
            return Err(SendError::Broken(
                "the writer already ended the stream".into(),
            ));
        }
        let desc = match &self.lake_topic {
            Some(t) => t.to_lake(desc),
            None => Cow::Borrowed(desc),
        };
        let trailer = FlightData {
            app_metadata: desc.encode_to_vec().into(),
            ..Default::default()
        };
        let outcome = tokio::time::timeout(deadline, async {
            // A refused trailer still leaves the writer's answer to read:
            // its status says whether a resend can help.
            let _ = self.tx.send(trailer).await;
            self.tx = tokio::sync::mpsc::channel(1).0;
            (&mut self.reply).await
        })
        .await;
        match outcome {
            Err(_) => Err(SendError::Deadline(deadline, "no acknowledgement".into())),
            Ok(Err(e)) => Err(SendError::Broken(format!("stream task: {e}"))),
            Ok(Ok(Ok(ack))) => Ok(ack),
            Ok(Ok(Err(e))) => match classify::<()>(e) {
                Attempt::Fatal(e) => Err(e),
                Attempt::Retry(why) => Err(SendError::Broken(why)),
                Attempt::Done(()) => unreachable!("classify never returns Done"),
            },
        }
    }
}

impl Drop for FlushStream {
    /// A stream given up on stops at once instead of holding its queued
    /// data and the connection's flow-control window.
    fn drop(&mut self) {
        self.reply.abort();
    }
}

async fn put_stream(
    mut client: FlightClient,
    rx: tokio::sync::mpsc::Receiver<FlightData>,
) -> Result<FlushAck, FlightError> {
    let messages = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok);
    let results: Vec<_> = client.do_put(messages).await?.try_collect().await?;
    ack_of(&results).ok_or_else(|| FlightError::protocol(NO_ACK))
}

const NO_ACK: &str = "writer answered without an acknowledgement";

/// The acknowledgement in a DoPut's answer, if it holds one.
fn ack_of(results: &[arrow_flight::PutResult]) -> Option<FlushAck> {
    results
        .first()
        .and_then(|r| FlushAck::decode(r.app_metadata.as_ref()).ok())
        .filter(|ack| ack.outcome() != AckOutcome::Unspecified)
}

fn classify<T>(e: FlightError) -> Attempt<T> {
    if let FlightError::Tonic(status) = &e {
        if let Ok(w) = WriteError::decode(status.details()) {
            if !status.details().is_empty() && w.kind() == ErrorKind::Permanent {
                return Attempt::Fatal(SendError::Permanent {
                    error_type: w.error_type,
                    message: w.message,
                });
            }
        }
        if matches!(
            status.code(),
            tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition
        ) {
            return Attempt::Fatal(SendError::Permanent {
                error_type: "rejected".into(),
                message: status.message().to_owned(),
            });
        }
    }
    Attempt::Retry(e.to_string())
}
