//! The writer's Flight actions: the offsets the lake recorded, and the
//! pod's ingest announcing its start and its final flush.
use arrow_flight::{Action, ActionType};
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use millpond_proto::{
    OffsetRange, RecordedOffsets, RecordedOffsetsRequest, WriterBudget, ACTION_INGEST_STARTED,
    ACTION_INGEST_STOPPED, ACTION_RECORDED_OFFSETS,
};
use prost::Message;
use tonic::{Request, Response, Status};

use super::activity::Activity;
use crate::sink::SharedSink;

pub async fn action(
    sink: &SharedSink,
    activity: &Activity,
    budget: Option<&WriterBudget>,
    request: Request<Action>,
) -> Result<Response<BoxStream<'static, Result<arrow_flight::Result, Status>>>, Status> {
    let action = request.into_inner();
    let done = |body: Vec<u8>| {
        let answer = arrow_flight::Result { body: body.into() };
        Ok(Response::new(stream::once(async { Ok(answer) }).boxed()))
    };
    match action.r#type.as_str() {
        ACTION_RECORDED_OFFSETS => {}
        ACTION_INGEST_STARTED | ACTION_INGEST_STOPPED => {
            let id = std::str::from_utf8(&action.body)
                .map_err(|_| Status::invalid_argument("ingest id must be UTF-8"))?;
            if action.r#type == ACTION_INGEST_STARTED {
                tracing::info!(ingest = %id, "ingest started; a stop waits for its final flush");
                activity.ingest_started(id);
                // The budget its send deadline must hold.
                return done(budget.map(Message::encode_to_vec).unwrap_or_default());
            }
            tracing::info!(ingest = %id, "ingest stopped");
            activity.ingest_stopped(id);
            return done(Vec::new());
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
    let sink = sink.clone();
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

/// The actions `list_actions` names.
pub fn types() -> [Result<ActionType, Status>; 3] {
    [
        (
            ACTION_RECORDED_OFFSETS,
            "Offsets the lake recorded per partition (body: RecordedOffsetsRequest)",
        ),
        (
            ACTION_INGEST_STARTED,
            "The pod's ingest announces itself (body: instance id); a stopping writer waits for it. Answer: WriterBudget",
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
    })
}
