//! A scripted HTTP endpoint on 127.0.0.1:0 (axum): it answers every request
//! with the reply the test last set and records each request's path and
//! headers, so a test can change what a poller sees and check what it sent.
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::Router;

/// What the endpoint answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// 200 with a JSON body.
    pub fn json(body: &str) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into(),
        }
    }

    /// 302 to `location`.
    pub fn redirect(location: &str) -> Reply {
        Reply {
            status: 302,
            headers: vec![("location".into(), location.into())],
            body: String::new(),
        }
    }
}

/// One request as received: its path and its headers (names lowercase).
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Script {
    reply: Option<Reply>,
    seen: Vec<Seen>,
}

type Shared = Arc<Mutex<Script>>;

pub struct Endpoint {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    script: Shared,
    _rt: tokio::runtime::Runtime,
}

async fn answer(State(script): State<Shared>, req: Request) -> Response {
    let seen = Seen {
        path: req.uri().path().to_owned(),
        headers: req
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
    };
    let reply = {
        let mut s = script.lock().unwrap();
        s.seen.push(seen);
        s.reply.clone()
    };
    let reply = reply.unwrap_or(Reply {
        status: 503,
        headers: vec![],
        body: "no reply scripted".into(),
    });
    let mut resp = Response::new(Body::from(reply.body));
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap();
    for (n, v) in reply.headers {
        resp.headers_mut().insert(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(&v).unwrap(),
        );
    }
    resp
}

impl Endpoint {
    pub fn start(reply: Reply) -> Endpoint {
        let script: Shared = Arc::new(Mutex::new(Script {
            reply: Some(reply),
            seen: Vec::new(),
        }));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new().fallback(answer).with_state(script.clone());
        rt.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Endpoint {
            base,
            script,
            _rt: rt,
        }
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Every request from now on gets `reply`.
    pub fn set(&self, reply: Reply) {
        self.script.lock().unwrap().reply = Some(reply);
    }

    /// The requests received so far, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.script.lock().unwrap().seen.clone()
    }
}
