//! A listener that plays a Kafka broker just far enough to receive a
//! client's SASL/OAUTHBEARER token: it answers ApiVersions and the
//! SaslHandshake for OAUTHBEARER, records the SaslAuthenticate request, and
//! hangs up. No broker we can run here speaks OAUTHBEARER.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub struct SaslCapture {
    pub bootstrap: String,
    messages: Arc<Mutex<Vec<Vec<u8>>>>,
}

pub(crate) const OAUTHBEARER: &[u8] = b"OAUTHBEARER";

/// One length-prefixed Kafka frame, without its length.
pub(crate) fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame)?;
    Ok(frame)
}

pub(crate) fn reply(s: &mut TcpStream, correlation: &[u8], body: &[u8]) -> std::io::Result<()> {
    s.write_all(&((correlation.len() + body.len()) as u32).to_be_bytes())?;
    s.write_all(correlation)?;
    s.write_all(body)
}

/// `error_code` and an array of `(api_key, min, max)`: ApiVersions v0.
pub(crate) fn api_versions(error: i16, apis: &[(i16, i16, i16)]) -> Vec<u8> {
    let mut b = error.to_be_bytes().to_vec();
    b.extend_from_slice(&(apis.len() as i32).to_be_bytes());
    for (key, min, max) in apis {
        for v in [key, min, max] {
            b.extend_from_slice(&v.to_be_bytes());
        }
    }
    b
}

/// Answers ApiVersions (a newer version is refused with the v0 answer, as
/// brokers do; the client retries with v0) and SaslHandshake for
/// OAUTHBEARER; returns the SaslAuthenticate request.
fn serve(mut s: TcpStream) -> std::io::Result<Vec<u8>> {
    loop {
        let frame = read_frame(&mut s)?;
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let correlation = frame[4..8].to_vec();
        match key {
            18 if version > 0 => reply(&mut s, &correlation, &api_versions(35, &[(18, 0, 0)]))?,
            18 => {
                let apis = [(17, 0, 1), (18, 0, 0), (36, 0, 0)];
                reply(&mut s, &correlation, &api_versions(0, &apis))?
            }
            17 => {
                let mechanism = OAUTHBEARER;
                let mut body = 0i16.to_be_bytes().to_vec();
                body.extend_from_slice(&1i32.to_be_bytes());
                body.extend_from_slice(&(mechanism.len() as i16).to_be_bytes());
                body.extend_from_slice(mechanism);
                reply(&mut s, &correlation, &body)?
            }
            _ => return Ok(frame),
        }
    }
}

impl SaslCapture {
    pub fn start() -> SaslCapture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let bootstrap = listener.local_addr().unwrap().to_string();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let sink = messages.clone();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                if let Ok(m) = serve(s) {
                    sink.lock().unwrap().push(m);
                }
            }
        });
        SaslCapture {
            bootstrap,
            messages,
        }
    }

    /// The bearer tokens received so far.
    pub fn tokens(&self) -> Vec<String> {
        self.messages
            .lock()
            .unwrap()
            .iter()
            .filter_map(|m| bearer_token(m))
            .collect()
    }
}

/// The bearer token in a SaslAuthenticate request (the SASL message inside
/// is `n,,\x01auth=Bearer <token>\x01\x01`).
pub(crate) fn bearer_token(frame: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(frame);
    let (_, rest) = text.split_once("n,,\u{1}auth=Bearer ")?;
    Some(rest.split('\u{1}').next()?.to_owned())
}
