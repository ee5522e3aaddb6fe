//! A writer that refuses a streamed flush permanently before its trailer:
//! the stream's next push says so (`SendError::Permanent`, with the
//! writer's reason), so ingest stops at once instead of reading the flush
//! again from Kafka only to be refused again at its cut.
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::Int64Array;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use millpond_ingest::flight::{SendError, WriterClient};
use millpond_proto::{ErrorKind, WriteError};
use prost::Message;
use tonic::{Code, Request, Response, Status, Streaming};

/// Reads the first message of a DoPut, then refuses the flush for good,
/// as the writer does with a flush it can never write.
struct Refusing;

type Boxed<T> = BoxStream<'static, Result<T, Status>>;

fn unimplemented<T>() -> Result<T, Status> {
    Err(Status::unimplemented("this test server only refuses DoPut"))
}

#[tonic::async_trait]
impl FlightService for Refusing {
    type HandshakeStream = Boxed<HandshakeResponse>;
    type ListFlightsStream = Boxed<FlightInfo>;
    type DoGetStream = Boxed<FlightData>;
    type DoPutStream = Boxed<PutResult>;
    type DoActionStream = Boxed<arrow_flight::Result>;
    type ListActionsStream = Boxed<ActionType>;
    type DoExchangeStream = Boxed<FlightData>;

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let mut incoming = request.into_inner();
        let _ = incoming.next().await;
        let details = WriteError {
            kind: ErrorKind::Permanent as i32,
            error_type: "schema".into(),
            message: "column x cannot be written".into(),
            flush_id: "f".into(),
        };
        Err(Status::with_details(
            Code::FailedPrecondition,
            "flush f not written",
            details.encode_to_vec().into(),
        ))
    }

    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(stream::empty().boxed()))
    }

    async fn do_action(
        &self,
        _: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        unimplemented()
    }
    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        unimplemented()
    }
    async fn list_flights(
        &self,
        _: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        unimplemented()
    }
    async fn get_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        unimplemented()
    }
    async fn poll_flight_info(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        unimplemented()
    }
    async fn get_schema(
        &self,
        _: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        unimplemented()
    }
    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        unimplemented()
    }
    async fn do_exchange(
        &self,
        _: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        unimplemented()
    }
}

#[tokio::test]
async fn a_permanent_refusal_mid_stream_is_permanent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(FlightServiceServer::new(Refusing))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
    let batch =
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();

    let mut client = WriterClient::new(addr.to_string());
    let mut stream = client
        .open("f", &batch, Duration::from_secs(10))
        .await
        .expect("the writer takes the stream's first batch");
    // The refusal lands while batches are queued; the first push that
    // finds the stream ended reports it.
    let until = Instant::now() + Duration::from_secs(20);
    let err = loop {
        match stream.push(&batch, Duration::from_secs(5)).await {
            Ok(()) => assert!(
                Instant::now() < until,
                "the writer's refusal never reached a push"
            ),
            Err(e) => break e,
        }
    };
    match err {
        SendError::Permanent {
            error_type,
            message,
        } => {
            assert_eq!(error_type, "schema");
            assert_eq!(message, "column x cannot be written");
        }
        other => panic!("a permanent refusal came back as {other:?}"),
    }
}
