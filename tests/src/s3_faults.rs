//! An HTTP proxy in front of the shared S3 service (moto) that answers
//! 403 AccessDenied, as S3 answers a write the credentials may not make, to
//! every PUT whose object path contains a given text, and forwards all
//! else: some uploads of one flush fail while the others land.
use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::task::JoinHandle;

#[derive(Clone)]
struct Shared {
    upstream: String,
    client: reqwest::Client,
    /// Refuse PUTs whose path contains this text, this many more times.
    refuse: Arc<Mutex<Option<(String, usize)>>>,
    /// Paths refused so far.
    refused: Arc<Mutex<Vec<String>>>,
}

pub struct S3Faults {
    /// `http://127.0.0.1:<port>`: the endpoint to give the client.
    pub endpoint: String,
    shared: Shared,
    task: JoinHandle<()>,
}

impl S3Faults {
    /// Forwards to `upstream` (`http://host:port`, or `host:port`).
    pub async fn start(upstream: &str) -> S3Faults {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Shared {
            upstream: match upstream.contains("://") {
                true => upstream.trim_end_matches('/').to_owned(),
                // `host:port`, as HOGLAKE_S3_ENDPOINT takes it: http.
                false => format!("http://{}", upstream.trim_end_matches('/')),
            },
            client: reqwest::Client::new(),
            refuse: Arc::default(),
            refused: Arc::default(),
        };
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        S3Faults {
            endpoint: format!("http://127.0.0.1:{port}"),
            shared,
            task,
        }
    }

    /// The next `times` PUTs whose path contains `text` are refused.
    pub fn refuse_puts(&self, text: &str, times: usize) {
        *self.shared.refuse.lock().unwrap() = Some((text.to_owned(), times));
    }

    /// The paths of the PUTs refused so far.
    pub fn refused(&self) -> Vec<String> {
        self.shared.refused.lock().unwrap().clone()
    }
}

impl Drop for S3Faults {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(State(s): State<Shared>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let refused = parts.method == Method::PUT && {
        let mut rule = s.refuse.lock().unwrap();
        match rule.as_mut() {
            Some((text, times)) if *times > 0 && path.contains(text.as_str()) => {
                *times -= 1;
                true
            }
            _ => false,
        }
    };
    if refused {
        s.refused.lock().unwrap().push(path);
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";
        return (
            StatusCode::FORBIDDEN,
            [("content-type", "application/xml")],
            xml,
        )
            .into_response();
    }
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "content-length" | "transfer-encoding" | "connection"
        ) {
            headers.append(name.clone(), value.clone());
        }
    }
    let sent = s
        .client
        .request(parts.method, format!("{}{path}{query}", s.upstream))
        .headers(headers)
        .body(bytes)
        .send()
        .await;
    let Ok(answer) = sent else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status();
    let mut out = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            out.append(name.clone(), value.clone());
        }
    }
    let body = answer.bytes().await.unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = out;
    response
}
