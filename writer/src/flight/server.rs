use std::net::SocketAddr;

use arrow_flight::flight_service_server::FlightServiceServer;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

use super::service::WriterService;

pub struct ServerHandle {
    pub addr: SocketAddr,
    pub task: JoinHandle<Result<(), tonic::transport::Error>>,
}

/// Serves until `shutdown` resolves; in-flight DoPuts finish first.
pub async fn serve(
    addr: SocketAddr,
    service: WriterService,
    max_message_bytes: usize,
    flow_window_bytes: u32,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<ServerHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let svc = FlightServiceServer::new(service)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes);
    let task = tokio::spawn(
        tonic::transport::Server::builder()
            // A flush is tens of MB in one stream: HTTP/2's default 64 KiB
            // windows would cost a round trip every 64 KiB. What the window
            // lets ingest send ahead waits in memory.
            .initial_stream_window_size(Some(flow_window_bytes))
            .initial_connection_window_size(Some(flow_window_bytes))
            .add_service(svc)
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown),
    );
    Ok(ServerHandle { addr, task })
}
