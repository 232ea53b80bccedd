//! A TCP proxy a test controls, to cut, partition or slow a service's connection to RabbitMQ or
//! PostgreSQL without touching the shared server.
//!
//! - [`Proxy::cut`] closes every connection and drops new ones once accepted (a server that went
//!   away);
//! - [`Proxy::refuse`] closes every connection and its port (new ones are refused, as by a
//!   firewall REJECT or a proxy restarting while the server serves everyone else);
//! - [`Proxy::blackhole`] stops forwarding without closing anything, and lets new connections
//!   hang (a network partition: packets dropped, nobody told);
//! - [`Proxy::delay`] holds every chunk for a while before forwarding it (a slow network);
//! - [`Proxy::restore`] forwards again; what a partition held is delivered then, as TCP would;
//! - [`Proxy::retarget`] sends new connections to another server (a proxy that follows a
//!   failover, as HAProxy does on Patroni's `/primary`).
//!
//! Otherwise it is transparent, refusals included: while the server refuses connections, the
//! proxy's own port is closed.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Forwards.
    Up,
    /// Refuses new connections (open ones were closed when it was cut).
    Cut,
    /// Forwards nothing and closes nothing.
    Blackhole,
    /// Forwards each chunk after this long.
    Delay(Duration),
    /// Its port closed: connections are refused (open ones were closed).
    Refuse,
}

/// Forwards a local port to `upstream` as told.
pub struct Proxy {
    port: u16,
    mode: watch::Sender<Mode>,
    cuts: watch::Sender<u64>,
    upstream: watch::Sender<String>,
}

impl Proxy {
    /// Starts forwarding a free local port to `upstream` (host:port).
    pub async fn start(upstream: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (mode, _) = watch::channel(Mode::Up);
        let (cuts, _) = watch::channel(0u64);
        let (upstreams, _) = watch::channel(upstream.to_string());
        let (modes, cut_counts, target) = (mode.clone(), cuts.clone(), upstreams.clone());
        tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                let upstream = target.borrow().clone();
                let Some(open) = listener.as_ref() else {
                    // The server refused: so does the proxy (its port closed) until the server
                    // listens again, as a client connecting directly would see it.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    if TcpStream::connect(&upstream).await.is_ok() {
                        listener = TcpListener::bind(("127.0.0.1", port)).await.ok();
                    }
                    continue;
                };
                let mut watching = modes.subscribe();
                let refused = async {
                    let _ = watching.wait_for(|m| *m == Mode::Refuse).await.map(|_| ());
                };
                let accepted = tokio::select! {
                    accepted = open.accept() => Some(accepted),
                    () = refused => None,
                };
                let Some(accepted) = accepted else {
                    // Refused until told otherwise, then listening on the same port again.
                    drop(listener.take());
                    let mut watching = modes.subscribe();
                    let _ = watching.wait_for(|m| *m != Mode::Refuse).await.map(|_| ());
                    listener = TcpListener::bind(("127.0.0.1", port)).await.ok();
                    continue;
                };
                let Ok((client, _)) = accepted else {
                    return;
                };
                if *modes.borrow() == Mode::Cut {
                    drop(client);
                    continue;
                }
                let (mut mode, cuts) = (modes.subscribe(), cut_counts.subscribe());
                // A partition lets the connection hang rather than reach the server.
                if *mode.borrow() == Mode::Blackhole {
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        if pass(&mut mode).await
                            && let Ok(server) = TcpStream::connect(&upstream).await
                        {
                            forward(client, server, mode, cuts).await;
                        }
                    });
                    continue;
                }
                match TcpStream::connect(&upstream).await {
                    Ok(server) => {
                        tokio::spawn(forward(client, server, mode, cuts));
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
                        drop(client);
                        listener = None;
                    }
                    Err(_) => drop(client),
                }
            }
        });
        Ok(Self {
            port,
            mode,
            cuts,
            upstream: upstreams,
        })
    }

    /// The local port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Drops every open connection and refuses new ones.
    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Drops every open connection and closes its port: new connections are refused until it
    /// is restored.
    pub fn refuse(&self) {
        self.mode.send_replace(Mode::Refuse);
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Forwards nothing and closes nothing, until restored.
    pub fn blackhole(&self) {
        self.mode.send_replace(Mode::Blackhole);
    }

    /// Holds each chunk `by` before forwarding it, until restored.
    pub fn delay(&self, by: Duration) {
        self.mode.send_replace(Mode::Delay(by));
    }

    /// Forwards again.
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Up);
    }

    /// Sends new connections to `upstream` (host:port) from now on; open ones stay where they
    /// are (cut them first, as a proxy that marks a server down does).
    pub fn retarget(&self, upstream: &str) {
        self.upstream.send_replace(upstream.to_string());
    }
}

/// Forwards both ways until either side closes or the proxy is cut.
async fn forward(
    client: TcpStream,
    server: TcpStream,
    mode: watch::Receiver<Mode>,
    mut cuts: watch::Receiver<u64>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::select! {
        _ = pump(client_read, server_write, mode.clone()) => {}
        _ = pump(server_read, client_write, mode) => {}
        _ = cuts.changed() => {}
    }
}

/// Waits while the proxy is a black hole; false once it is gone or cut.
async fn pass(mode: &mut watch::Receiver<Mode>) -> bool {
    loop {
        match *mode.borrow_and_update() {
            Mode::Blackhole => {}
            Mode::Cut | Mode::Refuse => return false,
            Mode::Up | Mode::Delay(_) => return true,
        }
        if mode.changed().await.is_err() {
            return false;
        }
    }
}

/// Copies one direction, as the mode says, until either side closes.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if !pass(&mut mode).await {
            return;
        }
        let delay = match *mode.borrow() {
            Mode::Delay(by) => Some(by),
            _ => None,
        };
        if let Some(by) = delay {
            tokio::time::sleep(by).await;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
