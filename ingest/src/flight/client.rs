//! The connection to the writer: flushes sent whole, streams opened, the
//! lake's recorded offsets read, and this instance announced, each retried
//! on one ladder until its deadline.
use std::borrow::Cow;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{Action, FlightClient, FlightDescriptor};
use futures::TryStreamExt;
use millpond_proto::{
    FlushAck, FlushDescriptor, OffsetRange, RecordedOffsets, RecordedOffsetsRequest, WriterBudget,
    ACTION_INGEST_STARTED, ACTION_RECORDED_OFFSETS, FLOW_WINDOW_BYTES,
};
use millpond_shared::retry::{GaveUp, Ladder};
use millpond_shared::shutdown::Stop;
use prost::Message;

use super::answer::{
    ack_of, classify, unless_stopped, AfterStop, Attempt, SendError, NO_ACK, SHUTDOWN_GRACE,
};
use super::stream::FlushStream;
use crate::epoch::LakeTopic;

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
    /// The writer's whole-write budget, as it answered the last
    /// announcement (none: not announced yet, or a writer without one).
    budget: Option<WriterBudget>,
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

impl WriterClient {
    pub fn new(addr: impl Into<String>) -> Self {
        WriterClient {
            addr: addr.into(),
            channel: None,
            instance: None,
            lake_topic: None,
            stop: None,
            budget: None,
        }
    }

    /// The writer's whole-write budget, once a connection announced this
    /// ingest: what the send deadline must hold ([`WriterBudget::held_by`]).
    pub fn writer_budget(&self) -> Option<&WriterBudget> {
        self.budget.as_ref()
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
                let answer = c
                    .do_action(action)
                    .await
                    .map_err(|e| format!("announcing ingest {id}: {e}"))?
                    .try_collect::<Vec<_>>()
                    .await
                    .map_err(|e| format!("announcing ingest {id}: {e}"))?;
                self.budget = answer
                    .first()
                    .filter(|b| !b.is_empty())
                    .and_then(|b| WriterBudget::decode(b.as_ref()).ok());
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

    /// Offsets the lake recorded per partition; waits for the writer, and
    /// ends at the stop (nothing consumed depends on it).
    pub async fn recorded_offsets(
        &mut self,
        topic: &str,
        deadline: Duration,
    ) -> Result<Vec<OffsetRange>, SendError> {
        self.read_recorded(topic, deadline, AfterStop::Ends).await
    }

    /// [`Self::recorded_offsets`] while delivering a flush the writer
    /// refused as overlapping them (the final flush of a pod whose
    /// partition a new owner took over): it may go on until
    /// [`SHUTDOWN_GRACE`] after the stop, as the flush's send may.
    pub async fn recorded_offsets_delivering(
        &mut self,
        topic: &str,
        deadline: Duration,
    ) -> Result<Vec<OffsetRange>, SendError> {
        self.read_recorded(topic, deadline, AfterStop::Grace).await
    }

    async fn read_recorded(
        &mut self,
        topic: &str,
        deadline: Duration,
        after: AfterStop,
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
            .retrying(deadline, after, "recorded-offsets", |mut c| {
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
        let mut stream =
            FlushStream::start(client, flush_id, self.lake_topic.clone(), self.stop.clone());
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
