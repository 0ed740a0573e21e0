//! A TCP proxy the tests place between a daemon and NATS or Redis, with faults set at runtime:
//! [`FaultProxy::delay`] (every chunk forwarded late), [`FaultProxy::drop_traffic`] (nothing
//! forwarded either way, bytes held in the kernel's buffers as a partition holds packets; new
//! connections are accepted but not forwarded), [`FaultProxy::reset`] (every open connection
//! closed with a RST), [`FaultProxy::blackhole_for`] (drop for a given time, then heal) and
//! [`FaultProxy::heal`]. The upstream can be moved ([`FaultProxy::set_upstream`]). Everything
//! stops when the proxy is dropped.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::errors::SupportError;

/// Bounds connecting to the upstream.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const CHUNK: usize = 16 * 1024;

/// What the proxy does to the traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyFault {
    /// Forward as soon as read.
    Pass,
    /// Forward every chunk this much later (both directions).
    Delay(Duration),
    /// Forward nothing (a partition): reads stop, new connections wait.
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Control {
    fault: ProxyFault,
    /// Bumped by [`FaultProxy::reset`]: connections opened before close with a RST.
    resets: u64,
}

struct Shared {
    control: watch::Sender<Control>,
    upstream: Mutex<SocketAddr>,
    /// Bumped by every fault change, so a timed heal only undoes its own blackhole.
    epoch: AtomicU64,
    open: AtomicUsize,
    accepted: AtomicUsize,
}

/// A running proxy on a free loopback port; stops (closing every connection) on drop.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    heal_timer: Mutex<Option<JoinHandle<()>>>,
}

impl FaultProxy {
    /// Listen on 127.0.0.1 (a free port) and forward every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| SupportError::io("binding the fault proxy", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| SupportError::io("reading the fault proxy's address", e))?;
        let (control, _) = watch::channel(Control {
            fault: ProxyFault::Pass,
            resets: 0,
        });
        let shared = Arc::new(Shared {
            control,
            upstream: Mutex::new(upstream),
            epoch: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(FaultProxy {
            addr,
            shared,
            accept,
            heal_timer: Mutex::new(None),
        })
    }

    /// Like [`FaultProxy::start`] for an upstream on 127.0.0.1:`port`.
    pub async fn to_port(port: u16) -> anyhow::Result<FaultProxy> {
        FaultProxy::start(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far, and those open now.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// The fault in force now.
    pub fn fault(&self) -> ProxyFault {
        self.shared.control.borrow().fault
    }

    /// New connections go to `upstream` (open ones stay where they are).
    pub fn set_upstream(&self, upstream: SocketAddr) {
        if let Ok(mut up) = self.shared.upstream.lock() {
            *up = upstream;
        }
    }

    /// Forward every chunk `by` late.
    pub fn delay(&self, by: Duration) {
        self.set(ProxyFault::Delay(by));
    }

    /// Stop forwarding, both ways, until [`FaultProxy::heal`].
    pub fn drop_traffic(&self) {
        self.set(ProxyFault::Drop);
    }

    /// Forward again, at once.
    pub fn heal(&self) {
        self.set(ProxyFault::Pass);
    }

    /// Close every open connection with a RST (the fault in force stays).
    pub fn reset(&self) {
        self.shared.control.send_modify(|c| c.resets += 1);
    }

    /// Stop forwarding for `duration`, then heal (unless another fault was set meanwhile).
    pub fn blackhole_for(&self, duration: Duration) {
        let epoch = self.set(ProxyFault::Drop);
        let shared = Arc::clone(&self.shared);
        let timer = tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            if shared.epoch.load(Ordering::SeqCst) == epoch {
                shared.control.send_modify(|c| c.fault = ProxyFault::Pass);
            }
        });
        if let Ok(mut slot) = self.heal_timer.lock() {
            if let Some(old) = slot.replace(timer) {
                old.abort();
            }
        }
    }

    fn set(&self, fault: ProxyFault) -> u64 {
        let epoch = self.shared.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.shared.control.send_modify(|c| c.fault = fault);
        epoch
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut slot) = self.heal_timer.lock() {
            if let Some(timer) = slot.take() {
                timer.abort();
            }
        }
    }
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("fault", &self.fault())
            .finish()
    }
}

/// Accepts until aborted; the connections are tasks of this one's set, so aborting it (the
/// proxy dropped) drops them all.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                connections.spawn(serve(client, Arc::clone(&shared)));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Counts an open connection for as long as it lives.
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(client: TcpStream, shared: Arc<Shared>) {
    shared.open.fetch_add(1, Ordering::SeqCst);
    let _open = OpenGuard(Arc::clone(&shared));
    let mut control = shared.control.subscribe();
    let resets = control.borrow().resets;
    // A partition holds new connections too: wait for it to heal before reaching upstream.
    if !passing(&mut control, resets).await {
        let _ = client.set_zero_linger();
        return;
    }
    let upstream_addr = match shared.upstream.lock() {
        Ok(up) => *up,
        Err(_) => return,
    };
    let upstream =
        match tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(upstream_addr))
            .await
        {
            Ok(Ok(s)) => s,
            _ => {
                // The upstream is down: the client sees its connection refused, as it would.
                let _ = client.set_zero_linger();
                return;
            }
        };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (upstream_read, upstream_write) = upstream.into_split();
    let there = pump(
        client_read,
        upstream_write,
        shared.control.subscribe(),
        resets,
    );
    let back = pump(
        upstream_read,
        client_write,
        shared.control.subscribe(),
        resets,
    );
    // Each direction runs to its EOF (half-closes pass through) or to a reset.
    tokio::join!(there, back);
}

/// Waits until the fault lets traffic through; false when a reset came first.
async fn passing(control: &mut watch::Receiver<Control>, resets: u64) -> bool {
    let seen = control
        .wait_for(|c| c.resets != resets || c.fault != ProxyFault::Drop)
        .await
        .map(|c| c.resets == resets);
    matches!(seen, Ok(true))
}

/// Copies `from` to `to` under the faults, until EOF or an error (the write side is shut
/// down) or a reset (both sockets get zero linger, so closing them sends a RST).
async fn pump(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    control: watch::Receiver<Control>,
    resets: u64,
) {
    let (from, to) = copy(from, to, control, resets).await;
    if let (Some(from), Some(to)) = (from, to) {
        let _ = from.as_ref().set_zero_linger();
        let _ = to.as_ref().set_zero_linger();
    }
}

/// The halves back when a reset ended the copy (None after EOF or an error).
async fn copy(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut control: watch::Receiver<Control>,
    resets: u64,
) -> (Option<OwnedReadHalf>, Option<OwnedWriteHalf>) {
    let reset = |from, to| (Some(from), Some(to));
    let mut buf = vec![0u8; CHUNK];
    loop {
        if !passing(&mut control, resets).await {
            return reset(from, to);
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return (None, None);
                }
                Ok(n) => n,
            },
            // A fault or reset changed: look again before reading more.
            changed = control.changed() => {
                if changed.is_err() { return (None, None); }
                continue;
            }
        };
        let fault = control.borrow().fault;
        if let ProxyFault::Delay(by) = fault {
            tokio::select! {
                _ = tokio::time::sleep(by) => {}
                _ = control.wait_for(|c| c.resets != resets) => return reset(from, to),
            }
        }
        // Bytes read before a partition are held until it heals.
        if !passing(&mut control, resets).await {
            return reset(from, to);
        }
        let written = tokio::select! {
            written = to.write_all(&buf[..n]) => Some(written.is_ok()),
            _ = control.wait_for(|c| c.resets != resets) => None,
        };
        match written {
            Some(true) => {}
            Some(false) => return (None, None),
            None => return reset(from, to),
        }
    }
}

#[cfg(test)]
#[path = "fault_proxy_tests.rs"]
mod tests;
