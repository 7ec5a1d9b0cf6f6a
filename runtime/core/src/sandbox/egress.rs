//! Egress by allowlist: an HTTP proxy (CONNECT for TLS, absolute-form
//! requests for plain HTTP) that runs in the runtime's process, outside the
//! sandbox, on a Unix socket in the sandbox's private run directory. Inside,
//! the helper forwards `127.0.0.1:PROXY_PORT` of the sandbox's own network
//! namespace to that socket, so the sandbox reaches the proxy and nothing
//! else (it still has no route out). A sandbox without an allowlist has no
//! forwarder: nothing listens on the port.
//!
//! The proxy refuses by name: a host not on the list, an IP literal, and a
//! name that resolves to a loopback, link-local or unspecified address (a
//! listed name must not become a way to the host's own services or a cloud
//! metadata endpoint). Every connection, allowed or refused, is logged and
//! returned with the observation of the step that made it.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The port the proxy has inside every sandbox that has an allowlist.
pub const PROXY_PORT: u16 = 3128;

/// The proxy's URL inside the sandbox.
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}

/// One connection through the proxy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressEvent {
    /// `CONNECT`, or the plain-HTTP method.
    pub method: String,
    /// The host asked for, as given.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Whether it was let through.
    pub allowed: bool,
    /// Why it was refused (or why the upstream connection failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes from the sandbox to the host.
    pub bytes_out: u64,
    /// Bytes from the host to the sandbox.
    pub bytes_in: u64,
}

/// Check and normalise an allowlist entry (a DNS name, no IP literal).
pub fn check_host_name(name: &str) -> Result<String, String> {
    let n = name.trim().trim_end_matches('.').to_ascii_lowercase();
    if n.parse::<IpAddr>().is_ok() || n.trim_matches(['[', ']']).parse::<IpAddr>().is_ok() {
        return Err(format!(
            "{name:?} is an IP literal; the allowlist takes host names"
        ));
    }
    let ok = !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if ok {
        Ok(n)
    } else {
        Err(format!("{name:?} is not a host name"))
    }
}

type Log = Arc<Mutex<Vec<EgressEvent>>>;

/// A running proxy for one sandbox. Dropping it stops it.
#[derive(Debug)]
pub(crate) struct EgressProxy {
    socket: PathBuf,
    allow: Vec<String>,
    log: Log,
    stop: Arc<AtomicBool>,
    /// The listening socket (a second handle), shut down to end `accept`.
    listening: UnixListener,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EgressProxy {
    /// Listen on `socket` (created; any file there is replaced) for `allow`.
    pub(crate) fn start(socket: &Path, allow: Vec<String>) -> std::io::Result<Self> {
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        // The helper connects as the sandbox's root, another host uid when
        // Arbor runs as root; only the run directory's search bit leads here.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
        let log: Log = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let listening = listener.try_clone()?;
        let thread = {
            let (log, stop, allow) = (Arc::clone(&log), Arc::clone(&stop), allow.clone());
            std::thread::Builder::new()
                .name("arbor-egress".into())
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(conn) = conn else {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        };
                        let (log, allow) = (Arc::clone(&log), allow.clone());
                        let _ = std::thread::Builder::new()
                            .name("arbor-egress-conn".into())
                            .spawn(move || serve(conn, &allow, &log));
                    }
                })?
        };
        Ok(Self {
            socket: socket.to_owned(),
            allow,
            log,
            stop,
            listening,
            thread: Some(thread),
        })
    }

    /// The allowlist.
    pub(crate) fn allow(&self) -> &[String] {
        &self.allow
    }

    /// The connections logged since the last call.
    pub(crate) fn take_log(&self) -> Vec<EgressEvent> {
        // Connections still being spliced log when they end; give the ones
        // the step just closed a moment to finish.
        std::thread::sleep(Duration::from_millis(20));
        self.log
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Shutting a listening socket down wakes its `accept` (the socket's
        // file may already be gone with the run directory).
        let _ = rustix::net::shutdown(&self.listening, rustix::net::Shutdown::Both);
        let _ = UnixStream::connect(&self.socket);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Send a whole response in one write: `write!` on an unbuffered stream
/// writes each formatted piece separately, so a client's first `recv` could
/// see only `HTTP/1.1 ` (CI saw exactly that).
fn respond(conn: &mut UnixStream, status: &str, text: &str) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = conn.write_all(head.as_bytes());
}

/// Read the request head (up to a blank line, at most 16 KiB).
fn read_head(conn: &mut UnixStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((buf, rest));
        }
        if buf.len() > 16 << 10 {
            return None;
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Split `host:port` (with `[v6]:port`), with a default port.
fn host_port(s: &str, default: u16) -> Option<(String, u16)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((h.to_owned(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Some((h.to_owned(), p.parse().ok()?)),
        None => Some((s.to_owned(), default)),
    }
}

fn is_forbidden_ip(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => {
            v.is_loopback() || v.is_link_local() || v.is_unspecified() || v.is_broadcast()
        }
        IpAddr::V6(v) => {
            v.is_loopback()
                || v.is_unspecified()
                || (v.segments()[0] & 0xffc0) == 0xfe80
                || v.to_ipv4_mapped()
                    .is_some_and(|m| m.is_loopback() || m.is_link_local())
        }
    }
}

/// Decide on `host`: `Ok(addresses)` or the reason for refusing.
fn admit(host: &str, port: u16, allow: &[String]) -> Result<Vec<std::net::SocketAddr>, String> {
    if host.parse::<IpAddr>().is_ok() {
        return Err("IP literals are refused; ask for a host name on the allowlist".into());
    }
    let name = check_host_name(host)?;
    if !allow.contains(&name) {
        return Err(format!("{name} is not on this sandbox's allowlist"));
    }
    let addrs: Vec<_> = (name.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {name}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{name} has no address"));
    }
    if let Some(bad) = addrs.iter().find(|a| is_forbidden_ip(&a.ip())) {
        return Err(format!(
            "{name} resolves to {}, a loopback or link-local address",
            bad.ip()
        ));
    }
    Ok(addrs)
}

fn serve(mut conn: UnixStream, allow: &[String], log: &Log) {
    let Some((head, rest)) = read_head(&mut conn) else {
        return;
    };
    let text = String::from_utf8_lossy(&head).into_owned();
    let first = text.lines().next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let parsed = if method.eq_ignore_ascii_case("CONNECT") {
        host_port(target, 443).map(|(h, p)| (h, p, None))
    } else if let Some(after) = target.strip_prefix("http://") {
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, "/"),
        };
        host_port(authority, 80).map(|(h, p)| (h, p, Some(path.to_owned())))
    } else {
        None
    };
    let Some((host, port, path)) = parsed else {
        respond(
            &mut conn,
            "400 Bad Request",
            "arbor egress: send CONNECT host:port or an absolute http:// URL\n",
        );
        return;
    };
    let mut event = EgressEvent {
        method: method.to_owned(),
        host: host.clone(),
        port,
        allowed: false,
        reason: None,
        bytes_out: 0,
        bytes_in: 0,
    };
    let upstream = admit(&host, port, allow).and_then(|addrs| {
        event.allowed = true;
        addrs
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, Duration::from_secs(15)).ok())
            .ok_or_else(|| format!("cannot connect to {host}:{port}"))
    });
    let mut up = match upstream {
        Ok(up) => up,
        Err(reason) => {
            let status = if event.allowed {
                "502 Bad Gateway"
            } else {
                "403 Forbidden"
            };
            respond(&mut conn, status, &format!("arbor egress: {reason}\n"));
            event.reason = Some(reason);
            if let Ok(mut l) = log.lock() {
                l.push(event);
            }
            return;
        }
    };
    let sent = match path {
        None => conn
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_ok(),
        Some(path) => {
            // Origin-form request line, one request per connection, no proxy headers.
            let version = parts.next().unwrap_or("HTTP/1.1");
            let mut out = format!("{method} {path} {version}\r\n");
            for line in text.lines().skip(1) {
                let lower = line.to_ascii_lowercase();
                if line.is_empty()
                    || lower.starts_with("proxy-")
                    || lower.starts_with("connection:")
                    || lower.starts_with("keep-alive:")
                {
                    continue;
                }
                out.push_str(line);
                out.push_str("\r\n");
            }
            out.push_str("Connection: close\r\n\r\n");
            event.bytes_out += out.len() as u64;
            up.write_all(out.as_bytes()).is_ok()
        }
    };
    if sent && !rest.is_empty() {
        event.bytes_out += rest.len() as u64;
        let _ = up.write_all(&rest);
    }
    if sent {
        let (mut c2, mut u2) = match (conn.try_clone(), up.try_clone()) {
            (Ok(c), Ok(u)) => (c, u),
            _ => return,
        };
        let upward = std::thread::spawn(move || {
            let n = std::io::copy(&mut c2, &mut u2).unwrap_or(0);
            let _ = u2.shutdown(Shutdown::Write);
            n
        });
        event.bytes_in = std::io::copy(&mut up, &mut conn).unwrap_or(0);
        let _ = conn.shutdown(Shutdown::Write);
        event.bytes_out += upward.join().unwrap_or(0);
    }
    if let Ok(mut l) = log.lock() {
        l.push(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_ip_literals_refused() {
        assert_eq!(check_host_name("PyPI.org."), Ok("pypi.org".into()));
        assert!(check_host_name("10.0.0.1").is_err());
        assert!(check_host_name("[::1]").is_err());
        assert!(check_host_name("a..b").is_err());
        assert!(check_host_name("-a.b").is_err());
        let allow = vec!["example.invalid".to_owned()];
        assert!(
            admit("1.2.3.4", 443, &allow)
                .unwrap_err()
                .contains("IP literal")
        );
        assert!(
            admit("other.invalid", 443, &allow)
                .unwrap_err()
                .contains("not on this")
        );
        // Listed, but the name does not resolve.
        assert!(
            admit("example.invalid", 443, &allow)
                .unwrap_err()
                .contains("resolve")
        );
        assert_eq!(host_port("[::1]:8080", 1), Some(("::1".into(), 8080)));
        assert_eq!(host_port("a.b", 80), Some(("a.b".into(), 80)));
        assert!(is_forbidden_ip(&"127.0.0.2".parse().unwrap()));
        assert!(is_forbidden_ip(&"169.254.169.254".parse().unwrap()));
        assert!(!is_forbidden_ip(&"151.101.0.223".parse().unwrap()));
    }

    #[test]
    fn localhost_on_the_allowlist_is_still_refused() {
        let allow = vec!["localhost".to_owned()];
        let e = admit("localhost", 22, &allow).unwrap_err();
        assert!(e.contains("loopback"), "{e}");
    }
}
