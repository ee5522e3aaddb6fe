//! A proxy that adds SASL/OAUTHBEARER with a session lifetime (KIP-368) in
//! front of a plaintext broker: it answers SaslHandshake and
//! SaslAuthenticate itself, granting every session `lifetime`, adds the two
//! APIs to the broker's ApiVersions answer, and forwards everything else
//! both ways. It records each authentication with the connection it came
//! on, so a test can see a client re-authenticate an open connection. No
//! broker we can run here speaks OAUTHBEARER.
use std::collections::HashSet;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sasl::{api_versions, bearer_token, read_frame, reply, OAUTHBEARER};

const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

/// One SaslAuthenticate: on which connection, when, with which token.
#[derive(Debug, Clone)]
pub struct Authentication {
    pub connection: usize,
    pub at: Instant,
    pub token: Option<String>,
}

pub struct SaslProxy {
    pub port: u16,
    auths: Arc<Mutex<Vec<Authentication>>>,
}

struct Conn {
    id: usize,
    lifetime: Duration,
    client: Arc<Mutex<TcpStream>>,
    /// Correlation ids of forwarded ApiVersions requests, whose answers get
    /// the SASL APIs added.
    rewrite: Arc<Mutex<HashSet<i32>>>,
    auths: Arc<Mutex<Vec<Authentication>>>,
}

impl SaslProxy {
    /// Forwards to `upstream` (host:port); sessions last `lifetime`.
    pub fn start(upstream: String, lifetime: Duration) -> SaslProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let auths = Arc::new(Mutex::new(Vec::new()));
        let sink = auths.clone();
        std::thread::spawn(move || {
            for (id, client) in listener.incoming().flatten().enumerate() {
                let Ok(up) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let conn = Conn {
                    id,
                    lifetime,
                    client: Arc::new(Mutex::new(client.try_clone().unwrap())),
                    rewrite: Arc::default(),
                    auths: sink.clone(),
                };
                conn.run(client, up);
            }
        });
        SaslProxy { port, auths }
    }

    pub fn authentications(&self) -> Vec<Authentication> {
        self.auths.lock().unwrap().clone()
    }
}

impl Conn {
    fn run(self, client: TcpStream, up: TcpStream) {
        let (to_client, rewrite) = (self.client.clone(), self.rewrite.clone());
        let mut from_up = up.try_clone().unwrap();
        std::thread::spawn(move || {
            while let Ok(frame) = read_frame(&mut from_up) {
                let correlation = i32::from_be_bytes(frame[0..4].try_into().unwrap());
                let frame = if rewrite.lock().unwrap().remove(&correlation) {
                    with_sasl_apis(&frame)
                } else {
                    frame
                };
                if write_frame(&to_client, &frame).is_err() {
                    break;
                }
            }
            let _ = to_client.lock().unwrap().shutdown(std::net::Shutdown::Both);
        });
        std::thread::spawn(move || {
            let (mut client, mut up) = (client, up);
            while let Ok(frame) = read_frame(&mut client) {
                if self.request(&frame, &mut up).is_err() {
                    break;
                }
            }
            let _ = up.shutdown(std::net::Shutdown::Both);
        });
    }

    fn request(&self, frame: &[u8], up: &mut TcpStream) -> std::io::Result<()> {
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let correlation = &frame[4..8];
        let answer = |body: &[u8]| reply(&mut self.client.lock().unwrap(), correlation, body);
        match key {
            // A newer ApiVersions is refused with the v0 answer, as brokers
            // do; the client asks again with v0, which goes upstream.
            API_VERSIONS if version > 0 => answer(&api_versions(35, &[(API_VERSIONS, 0, 0)])),
            API_VERSIONS => {
                let id = i32::from_be_bytes(correlation.try_into().unwrap());
                self.rewrite.lock().unwrap().insert(id);
                forward(up, frame)
            }
            SASL_HANDSHAKE => {
                let mut body = 0i16.to_be_bytes().to_vec();
                body.extend_from_slice(&1i32.to_be_bytes());
                body.extend_from_slice(&(OAUTHBEARER.len() as i16).to_be_bytes());
                body.extend_from_slice(OAUTHBEARER);
                answer(&body)
            }
            SASL_AUTHENTICATE => {
                self.auths.lock().unwrap().push(Authentication {
                    connection: self.id,
                    at: Instant::now(),
                    token: bearer_token(frame),
                });
                // error_code, error_message (null), auth_bytes (empty: the
                // OAUTHBEARER success), and from v1 session_lifetime_ms.
                let mut body = 0i16.to_be_bytes().to_vec();
                body.extend_from_slice(&(-1i16).to_be_bytes());
                body.extend_from_slice(&0i32.to_be_bytes());
                if version >= 1 {
                    body.extend_from_slice(&(self.lifetime.as_millis() as i64).to_be_bytes());
                }
                answer(&body)
            }
            _ => forward(up, frame),
        }
    }
}

fn forward(up: &mut TcpStream, frame: &[u8]) -> std::io::Result<()> {
    up.write_all(&(frame.len() as u32).to_be_bytes())?;
    up.write_all(frame)
}

fn write_frame(to: &Mutex<TcpStream>, frame: &[u8]) -> std::io::Result<()> {
    let mut s = to.lock().unwrap();
    s.write_all(&(frame.len() as u32).to_be_bytes())?;
    s.write_all(frame)
}

/// An ApiVersions v0 answer (correlation id first) with SaslHandshake v0-1
/// and SaslAuthenticate v0-1 in place of whatever the broker said of them.
fn with_sasl_apis(frame: &[u8]) -> Vec<u8> {
    let error = i16::from_be_bytes([frame[4], frame[5]]);
    let n = i32::from_be_bytes(frame[6..10].try_into().unwrap()) as usize;
    let mut apis: Vec<(i16, i16, i16)> = (0..n)
        .map(|i| {
            let at = 10 + i * 6;
            let v = |o: usize| i16::from_be_bytes([frame[at + o], frame[at + o + 1]]);
            (v(0), v(2), v(4))
        })
        .filter(|(key, _, _)| ![SASL_HANDSHAKE, SASL_AUTHENTICATE].contains(key))
        .collect();
    apis.extend([(SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 1)]);
    let mut out = frame[0..4].to_vec();
    out.extend_from_slice(&api_versions(error, &apis));
    out
}
