//! A TLS front for a loopback server that speaks only plain HTTP (pypiserver, verdaccio), so
//! the registry tests reach it over HTTPS as installers reach a real index: the proxy
//! inspects the tunnel and verifies this front's certificate against the test CA it is given
//! with `--upstream-ca`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, TcpStream};

use super::{Pki, pki};

/// A running front: `port` on 127.0.0.1 ends TLS for the names it was made for and relays to
/// the backend; `ca_file` holds the PEM of the CA that signed its certificate.
pub struct TlsFront {
    pub port: u16,
    pub ca_file: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts a front for `names` relaying to `127.0.0.1:backend_port`, writing its CA into
/// `dir`. It runs on its own thread and runtime, so a test that blocks on an installer
/// process does not starve it.
pub fn tls_front(names: &[&str], backend_port: u16, dir: &Path) -> TlsFront {
    let pki: Pki = pki(names);
    let ca_file = dir.join("front-ca.pem");
    std::fs::write(&ca_file, pki.ca_pem()).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
    let backend: SocketAddr = ([127, 0, 0, 1], backend_port).into();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            let serve = async {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Ok(mut tls) = acceptor.accept(client).await else {
                            return;
                        };
                        let Ok(mut up) = TcpStream::connect(backend).await else {
                            return;
                        };
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                    });
                }
            };
            tokio::select! {
                () = serve => {}
                _ = stopped => {}
            }
        });
    });
    TlsFront {
        port,
        ca_file,
        stop: Some(stop),
    }
}
