//! A TCP proxy a test can cut, to simulate a catalog or storage outage
//! without stopping the shared service.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if flag.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let up = upstream.clone();
                let flag = flag.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(up).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = async { while !flag.load(Ordering::SeqCst) {
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await } } => {}
                    }
                });
            }
        });
        Proxy { port, cut, task }
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
