//! A TCP proxy a test can cut, to simulate a catalog or storage outage
//! without stopping the shared service.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    task: JoinHandle<()>,
    /// The open connections' pumps.
    pumps: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    pub async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let pumps: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (flag, open) = (cut.clone(), pumps.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let up = upstream.clone();
                let mut open = open.lock().unwrap();
                // Checked under the lock `cut` takes: a connection is either
                // refused or listed for `cut` to close.
                if flag.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                open.push(tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(up).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }));
            }
        });
        Proxy {
            port,
            cut,
            task,
            pumps,
        }
    }

    /// Closes every open connection and refuses new ones; returns once the
    /// open ones are closed.
    pub async fn cut(&self) {
        let pumps: Vec<JoinHandle<()>> = {
            let mut open = self.pumps.lock().unwrap();
            self.cut.store(true, Ordering::SeqCst);
            open.drain(..).collect()
        };
        for p in pumps {
            p.abort();
            // Aborted: its sockets are dropped by the time it resolves.
            let _ = p.await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
