//! TLS for tests: a CA and a server certificate for 127.0.0.1 (rcgen) or
//! one read from PEM, and a TLS-terminating proxy (tokio-rustls) in front
//! of a plaintext broker.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{crypto, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A certificate authority; its certificate is written to `pem_path`.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub pem_path: PathBuf,
}

/// A server certificate and its key.
pub struct ServerCert {
    cert: CertificateDer<'static>,
    key: Vec<u8>,
}

impl ServerCert {
    /// A certificate and its PKCS#8 key from PEM text (the first of each).
    pub fn from_pem(cert: &str, key: &str) -> ServerCert {
        ServerCert {
            cert: CertificateDer::from_pem_slice(cert.as_bytes()).unwrap(),
            key: PrivatePkcs8KeyDer::from_pem_slice(key.as_bytes())
                .unwrap()
                .secret_pkcs8_der()
                .to_vec(),
        }
    }
}

impl TestCa {
    pub fn generate(dir: &Path, name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let pem_path = dir.join(format!("{name}.pem"));
        std::fs::write(&pem_path, issuer.pem()).unwrap();
        TestCa { issuer, pem_path }
    }

    /// A certificate for 127.0.0.1 signed by this CA.
    pub fn server_cert(&self) -> ServerCert {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &*self.issuer).unwrap();
        ServerCert {
            cert: cert.der().clone(),
            key: key.serialize_der(),
        }
    }

    /// A server certificate for `names` (IP addresses or DNS names) signed
    /// by this CA, and its key, both PEM: for servers that read files.
    pub fn server_pem(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, &names[0]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &*self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Terminates TLS on a free port of 127.0.0.1 and forwards the plaintext
/// of each connection to `upstream`. Counts handshakes both ways.
pub struct TlsProxy {
    pub port: u16,
    handshakes: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    _rt: tokio::runtime::Runtime,
}

impl TlsProxy {
    pub fn start(upstream: String, server: ServerCert) -> TlsProxy {
        let provider = Arc::new(crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![server.cert],
                PrivatePkcs8KeyDer::from(server.key).into(),
            )
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (handshakes, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (ok, bad) = (handshakes.clone(), refused.clone());
        rt.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, upstream, ok, bad) =
                    (acceptor.clone(), upstream.clone(), ok.clone(), bad.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        bad.fetch_add(1, Ordering::SeqCst);
                        return;
                    };
                    ok.fetch_add(1, Ordering::SeqCst);
                    if let Ok(mut plain) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
        TlsProxy {
            port,
            handshakes,
            refused,
            _rt: rt,
        }
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> u64 {
        self.handshakes.load(Ordering::SeqCst)
    }

    /// Handshakes that failed (a client that did not trust the certificate).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::SeqCst)
    }
}
