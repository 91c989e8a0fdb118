//! `ackclock fetch --runtime`: the same GET as `fetch`'s own loop, written as blocking code
//! on the library's threaded runtime (`ackclock::runtime`), as it would be with `std::net`:
//! the runtime runs the stack and the device, and this thread connects, writes and reads.
//! At the end the stream is dropped (a FIN), the runtime lingers up to a second for the
//! close to finish (`Runtime::shutdown_linger`), then gives the device back for its
//! counters and the capture (`Runtime::take_device`). `scripts/bench-fetch` measures it
//! against the loop in one run.

use crate::fetch::{parse_head, Got, HEAD_LIMIT};
use crate::link::{stopping, Link};
use ackclock::runtime::{Runtime, TcpStream};
use ackclock::tcp::TcpInfo;
use ackclock::Stack;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

/// What came back, however the GET ended.
#[derive(Default)]
struct Response {
    status: Option<u16>,
    length: Option<u64>,
    body: u64,
    /// When the connection was established, from the start.
    connected: Option<Duration>,
    info: Option<TcpInfo>,
}

/// How long a blocking call waits before the client looks at the deadline and at SIGINT
/// again (a signal does not interrupt it).
const SLICE: Duration = Duration::from_millis(100);

/// The GET itself, as blocking code on the runtime: connect, send the request, read the
/// head and the body. Dropping the stream at the end closes the connection (a FIN after
/// the request, or a reset if the server sent more than it announced).
fn get(
    rt: &Runtime,
    to: SocketAddrV4,
    request: &[u8],
    out: &mut Option<Box<dyn Write>>,
    start: Instant,
    deadline: Instant,
    resp: &mut Response,
) -> Result<(), String> {
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut s =
        TcpStream::connect_timeout(rt, to, left().max(Duration::from_millis(1))).map_err(|e| match e.kind() {
            ErrorKind::TimedOut => format!("connect {to}: timed out"),
            _ => format!("connect {to}: {e}"),
        })?;
    resp.connected = Some(start.elapsed());
    let result = exchange(&mut s, request, out, deadline, resp);
    resp.info = s.tcp_info().ok();
    result
}

fn exchange(
    s: &mut TcpStream,
    request: &[u8],
    out: &mut Option<Box<dyn Write>>,
    deadline: Instant,
    resp: &mut Response,
) -> Result<(), String> {
    // Wait in slices, so that the deadline and SIGINT are seen.
    let waited = |e: &io::Error| -> Result<(), String> {
        if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            return Err(e.to_string());
        }
        if stopping() {
            return Err("interrupted".into());
        }
        if Instant::now() >= deadline {
            return Err("timed out".into());
        }
        Ok(())
    };
    s.set_read_timeout(Some(SLICE)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(SLICE)).map_err(|e| e.to_string())?;
    let mut sent = 0;
    while sent < request.len() {
        match s.write(&request[sent..]) {
            Ok(n) => sent += n,
            Err(e) => waited(&e).map_err(|e| format!("send: {e}"))?,
        }
    }
    let mut head = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        if resp.status.is_some() && resp.length.is_some_and(|l| resp.body >= l) {
            return Ok(());
        }
        let n = match s.read(&mut buf) {
            Ok(0) => {
                return match (resp.status, resp.length) {
                    (None, _) => Err("connection closed before the response head".into()),
                    (Some(_), Some(l)) if resp.body < l => {
                        Err(format!("connection closed after {} of {l} body bytes", resp.body))
                    }
                    _ => Ok(()),
                };
            }
            Ok(n) => n,
            Err(e) => {
                waited(&e).map_err(|e| format!("receive: {e}"))?;
                continue;
            }
        };
        let mut data = &buf[..n];
        if resp.status.is_none() {
            head.extend_from_slice(data);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                if head.len() > HEAD_LIMIT {
                    return Err("response head too long".into());
                }
                continue;
            };
            let (code, length) = parse_head(&head[..end])?;
            resp.status = Some(code);
            resp.length = length;
            let rest = head.split_off(end + 4);
            buf[..rest.len()].copy_from_slice(&rest);
            data = &buf[..rest.len()];
        }
        let take = match resp.length {
            Some(l) => data.len().min((l - resp.body) as usize),
            None => data.len(),
        };
        if let Some(out) = out {
            out.write_all(&data[..take]).map_err(|e| format!("output: {e}"))?;
        }
        resp.body += take as u64;
    }
}

/// The GET on a runtime over the link's device; the link comes back with its device.
pub(crate) fn fetch(
    link: Link,
    stack: Stack,
    to: SocketAddrV4,
    request: &[u8],
    mut out: Option<Box<dyn Write>>,
    timeout: Duration,
) -> Result<(Link, Got), String> {
    let mut link = link;
    let mut rt = Runtime::new(stack, link.dev).map_err(|e| format!("runtime: {e}"))?;
    let start = Instant::now();
    let deadline = start + timeout;
    let mut resp = Response::default();
    let mut result = get(&rt, to, request, &mut out, start, deadline, &mut resp);
    let elapsed = start.elapsed();
    if let Some(out) = &mut out {
        if let Err(e) = out.flush() {
            result = result.and(Err(format!("output: {e}")));
        }
    }
    drop(out);
    // The stream was dropped (closed): give its FIN and the last ACK up to a second to go
    // out and be answered, then stop; after an error, stop at once (a reset).
    if result.is_ok() {
        rt.shutdown_linger(Duration::from_secs(1));
    } else {
        rt.shutdown();
    }
    let s = rt.stats();
    link.dev = rt.take_device().ok_or("the runtime did not give the device back")?;
    link.report_errors("ackclock fetch");
    let runtime = serde_json::json!({
        "rounds": s.rounds, "app_rounds": s.app_rounds, "sleeps": s.sleeps, "wakeups": s.wakeups,
        "watches": s.watches, "watch_rounds": s.watch_rounds, "handoffs": s.handoffs,
        "lock_contended": s.lock_contended,
        "window_update_requests": s.window_update_requests, "window_updates_sent": s.window_updates_sent,
    });
    let got = Got {
        result,
        status: resp.status,
        length: resp.length,
        body: resp.body,
        elapsed,
        connected: resp.connected,
        info: resp.info,
        runtime: Some(runtime),
    };
    Ok((link, got))
}
