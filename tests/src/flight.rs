//! Flight client helpers: DoPut a flush, read the ack.
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::{FlightClient, FlightDescriptor};
use futures::{StreamExt, TryStreamExt};
use millpond_proto::coordinates::{self, Coordinate};
use millpond_proto::{
    FlushAck, FlushDescriptor, FlushTrigger, OffsetRange, RecordedOffsets, RecordedOffsetsRequest,
};
use prost::Message;

pub async fn client(addr: &str) -> FlightClient {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    FlightClient::new(channel)
}

/// `n` rows {id: start.., name: "row-<id>"}.
pub fn rows(start: i64, n: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n as i64).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("row-{i}")).collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
        ])),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

/// 1,000 letters and digits drawn by a generator seeded with `seed`: text
/// that compresses little, for files of a chosen size.
pub fn noise(seed: i64) -> String {
    use rand::{Rng, SeedableRng};
    rand::rngs::StdRng::seed_from_u64(seed as u64)
        .sample_iter(rand::distr::Alphanumeric)
        .take(1000)
        .map(char::from)
        .collect()
}

/// `batch` plus the Kafka coordinates of its rows: partition `partition`,
/// offsets from `first`, timestamp 1000 x offset ms, key `k<offset>`.
pub fn with_coordinates(batch: RecordBatch, partition: i32, first: i64) -> RecordBatch {
    let offsets: Vec<i64> = (first..first + batch.num_rows() as i64).collect();
    let keys: Vec<Vec<u8>> = offsets
        .iter()
        .map(|o| format!("k{o}").into_bytes())
        .collect();
    let coords = offsets.iter().zip(&keys).map(|(&offset, key)| Coordinate {
        partition,
        offset,
        timestamp_ms: Some(offset * 1000),
        key: Some(key.as_slice()),
    });
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut arrays = batch.columns().to_vec();
    for (f, a) in coordinates::columns(coords) {
        fields.push(f);
        arrays.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
}

pub fn descriptor(id: &str, ranges: Vec<OffsetRange>, rows: usize) -> FlushDescriptor {
    FlushDescriptor {
        flush_id: id.into(),
        trigger: FlushTrigger::Size as i32,
        ranges,
        expected_rows: rows as u64,
        dead_letters: vec![],
        trailer: false,
    }
}

/// DoPut one flush; Ok(ack) or the gRPC status.
pub async fn put(
    client: &mut FlightClient,
    desc: &FlushDescriptor,
    batches: Vec<RecordBatch>,
) -> Result<FlushAck, tonic::Status> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    let fd = FlightDescriptor::new_cmd(desc.encode_to_vec());
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .with_flight_descriptor(Some(fd))
        .build(futures::stream::iter(batches.into_iter().map(Ok)));
    let results = match client.do_put(stream).await {
        Ok(s) => s,
        Err(e) => return Err(to_status(e)),
    };
    let results: Vec<_> = match results.try_collect().await {
        Ok(r) => r,
        Err(e) => return Err(to_status(e)),
    };
    assert_eq!(results.len(), 1, "exactly one PutResult per flush");
    Ok(FlushAck::decode(results[0].app_metadata.as_ref()).expect("ack is a FlushAck"))
}

fn to_status(e: arrow_flight::error::FlightError) -> tonic::Status {
    match e {
        arrow_flight::error::FlightError::Tonic(s) => *s,
        other => tonic::Status::unknown(other.to_string()),
    }
}

pub async fn recorded(client: &mut FlightClient, topic: &str) -> Vec<OffsetRange> {
    let body = RecordedOffsetsRequest {
        topic: topic.into(),
    }
    .encode_to_vec();
    let mut s = client
        .do_action(arrow_flight::Action::new(
            millpond_proto::ACTION_RECORDED_OFFSETS,
            body,
        ))
        .await
        .unwrap();
    let first = s.next().await.unwrap().unwrap();
    RecordedOffsets::decode(first.as_ref()).unwrap().ranges
}

/// DoPut raw messages; Ok(ack) or the gRPC status. For malformed streams.
pub async fn put_messages(
    client: &mut FlightClient,
    messages: Vec<arrow_flight::FlightData>,
) -> Result<FlushAck, tonic::Status> {
    let results = match client
        .do_put(futures::stream::iter(messages.into_iter().map(Ok)))
        .await
    {
        Ok(s) => s,
        Err(e) => return Err(to_status(e)),
    };
    let results: Vec<_> = match results.try_collect().await {
        Ok(r) => r,
        Err(e) => return Err(to_status(e)),
    };
    Ok(FlushAck::decode(results[0].app_metadata.as_ref()).expect("ack is a FlushAck"))
}

/// The messages of a streamed flush (FlushDescriptor.trailer): the head
/// descriptor on the first, each batch with its own schema, then `trailer`
/// as the app_metadata of a message without Arrow data (`None`: left out).
pub async fn streamed_messages(
    flush_id: &str,
    batches: Vec<RecordBatch>,
    trailer: Option<&FlushDescriptor>,
) -> Vec<arrow_flight::FlightData> {
    let head = FlushDescriptor {
        flush_id: flush_id.into(),
        trailer: true,
        ..Default::default()
    };
    let mut fd = Some(FlightDescriptor::new_cmd(head.encode_to_vec()));
    let mut out = Vec::new();
    for b in batches {
        let encoded: Vec<_> = FlightDataEncoderBuilder::new()
            .with_schema(b.schema())
            .with_flight_descriptor(fd.take())
            .build(futures::stream::iter([Ok(b)]))
            .try_collect()
            .await
            .unwrap();
        out.extend(encoded);
    }
    if let Some(t) = trailer {
        out.push(arrow_flight::FlightData {
            app_metadata: t.encode_to_vec().into(),
            ..Default::default()
        });
    }
    out
}
