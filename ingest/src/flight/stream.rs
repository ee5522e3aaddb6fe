//! A flush on its way to the writer batch by batch while ingest still
//! consumes it, ended by a trailer carrying the whole descriptor.
use std::borrow::Cow;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::{FlightClient, FlightData, FlightDescriptor};
use futures::{StreamExt, TryStreamExt};
use millpond_proto::{FlushAck, FlushDescriptor};
use millpond_shared::shutdown::Stop;
use prost::Message;

use super::answer::{ack_of, classify, unless_stopped, AfterStop, Attempt, SendError, NO_ACK};
use crate::epoch::LakeTopic;

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
    /// See [`WriterClient::recording`](super::WriterClient::recording).
    lake_topic: Option<LakeTopic>,
    /// The client's stop: a flush waits [`SHUTDOWN_GRACE`](super::SHUTDOWN_GRACE) after it.
    stop: Option<Stop>,
}

impl FlushStream {
    /// A stream on `client` for the flush `flush_id`, its head descriptor
    /// to go with the first batch.
    pub(super) fn start(
        client: FlightClient,
        flush_id: &str,
        lake_topic: Option<LakeTopic>,
        stop: Option<Stop>,
    ) -> FlushStream {
        let (tx, rx) = tokio::sync::mpsc::channel::<FlightData>(STREAM_QUEUE);
        let reply = tokio::spawn(put_stream(client, rx));
        FlushStream {
            tx,
            reply,
            replied: false,
            lake_topic,
            stop,
            head: Some(FlightDescriptor::new_cmd(
                FlushDescriptor {
                    flush_id: flush_id.to_owned(),
                    trailer: true,
                    ..Default::default()
                }
                .encode_to_vec(),
            )),
        }
    }

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
