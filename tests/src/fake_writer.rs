//! Writers that do not answer: a Flight server that answers ingest's
//! startup calls but never acknowledges a flush, and a TCP port that
//! accepts connections and never says a word.
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use millpond_proto::{RecordedOffsets, ACTION_RECORDED_OFFSETS};
use prost::Message;
use tonic::{Request, Response, Status, Streaming};

/// A Flight server that says the lake holds nothing, takes every flush's
/// data and never acknowledges it. It runs until the test process ends.
pub struct SilentOnFlush {
    pub addr: String,
    /// FlightData messages taken on DoPut streams.
    messages: Arc<AtomicUsize>,
}

impl SilentOnFlush {
    pub fn start() -> SilentOnFlush {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let messages = Arc::new(AtomicUsize::new(0));
        let service = Service {
            messages: messages.clone(),
        };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tonic::transport::Server::builder()
                    .add_service(FlightServiceServer::new(service))
                    .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                    .await
                    .unwrap();
            });
        });
        SilentOnFlush { addr, messages }
    }

    pub fn messages_taken(&self) -> usize {
        self.messages.load(Ordering::SeqCst)
    }
}

struct Service {
    messages: Arc<AtomicUsize>,
}

type Boxed<T> = BoxStream<'static, Result<T, Status>>;

fn unimplemented<T>() -> Result<T, Status> {
    Err(Status::unimplemented("not a call ingest makes"))
}

#[tonic::async_trait]
impl FlightService for Service {
    type HandshakeStream = Boxed<HandshakeResponse>;
    type ListFlightsStream = Boxed<FlightInfo>;
    type DoGetStream = Boxed<FlightData>;
    type DoPutStream = Boxed<PutResult>;
    type DoActionStream = Boxed<arrow_flight::Result>;
    type ListActionsStream = Boxed<ActionType>;
    type DoExchangeStream = Boxed<FlightData>;

    /// Reads the flush to its end, then never answers.
    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let mut incoming = request.into_inner();
        while let Some(Ok(_)) = incoming.next().await {
            self.messages.fetch_add(1, Ordering::SeqCst);
        }
        std::future::pending().await
    }

    /// Stream opens are a round trip here.
    async fn list_actions(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(stream::empty().boxed()))
    }

    /// Recorded offsets: none. Any other action (ingest started or
    /// stopped) is taken.
    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let items = match request.get_ref().r#type.as_str() {
            ACTION_RECORDED_OFFSETS => vec![Ok(arrow_flight::Result {
                body: RecordedOffsets::default().encode_to_vec().into(),
            })],
            _ => vec![],
        };
        Ok(Response::new(stream::iter(items).boxed()))
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

/// A port that accepts TCP connections and never sends a byte (a process
/// that hangs, or a port that is not the writer's). Connections are held
/// until the test process ends.
pub struct Mute {
    pub addr: String,
}

impl Mute {
    pub fn start() -> Mute {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            for conn in listener.incoming().flatten() {
                held.push(conn);
            }
        });
        Mute { addr }
    }
}
