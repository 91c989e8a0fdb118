//! `ackclock fetch`'s client: the GET written as blocking code on the library's threaded
//! runtime (`ackclock::runtime`), as it would be with `std::net`: the runtime runs the stack
//! and the device, and this thread connects, writes and reads. At the end the stream is
//! dropped (a FIN), the runtime lingers up to a second for the close to finish
//! (`Runtime::shutdown_linger`), then gives the device back for its counters and the
//! capture (`Runtime::take_device`).

use super::{Got, Response};
use crate::link::{runtime_json, stopping, Link};
use ackclock::runtime::{Runtime, TcpStream};
use ackclock::tcp::TcpInfo;
use ackclock::Stack;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

/// How long a blocking call waits before the client looks at the deadline and at SIGINT
/// again (a signal does not interrupt it).
const SLICE: Duration = Duration::from_millis(100);

/// What the connection itself did, however the GET ended.
#[derive(Default)]
struct Conn {
    /// When the connection was established, from the start.
    connected: Option<Duration>,
    info: Option<TcpInfo>,
}

/// The GET itself, as blocking code on the runtime: connect, send the request, read the
/// head and the body. Dropping the stream at the end closes the connection (a FIN after
/// the request, or a reset if the server sent more than it announced).
fn get(
    rt: &Runtime,
    to: SocketAddrV4,
    request: &[u8],
    resp: &mut Response,
    start: Instant,
    deadline: Instant,
    conn: &mut Conn,
) -> Result<(), String> {
    let left = deadline.saturating_duration_since(Instant::now());
    let mut s = TcpStream::connect_timeout(rt, to, left.max(Duration::from_millis(1))).map_err(|e| match e.kind() {
        ErrorKind::TimedOut => format!("connect {to}: timed out"),
        _ => format!("connect {to}: {e}"),
    })?;
    conn.connected = Some(start.elapsed());
    let result = exchange(&mut s, request, resp, deadline);
    conn.info = s.tcp_info().ok();
    result
}

fn exchange(s: &mut TcpStream, request: &[u8], resp: &mut Response, deadline: Instant) -> Result<(), String> {
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
    let mut buf = vec![0u8; 256 * 1024];
    while !resp.complete() {
        match s.read(&mut buf) {
            Ok(0) => return resp.end_of_stream(),
            Ok(n) => resp.feed(&buf[..n])?,
            Err(e) => waited(&e).map_err(|e| format!("receive: {e}"))?,
        }
    }
    Ok(())
}

/// The GET on a runtime over the link's device; the link comes back with its device.
pub(crate) fn fetch(
    link: Link,
    stack: Stack,
    to: SocketAddrV4,
    request: &[u8],
    out: Option<Box<dyn Write>>,
    timeout: Duration,
) -> Result<(Link, Got), String> {
    let mut link = link;
    let mut rt = Runtime::new(stack, link.dev).map_err(|e| format!("runtime: {e}"))?;
    let start = Instant::now();
    let deadline = start + timeout;
    let mut resp = Response::new(out);
    let mut conn = Conn::default();
    let result = get(&rt, to, request, &mut resp, start, deadline, &mut conn);
    let elapsed = start.elapsed();
    let result = resp.close_output(result);
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
    let runtime = runtime_json(&s);
    let got = Got {
        result,
        status: resp.status,
        length: resp.length,
        body: resp.body,
        elapsed,
        connected: conn.connected,
        info: conn.info,
        runtime,
    };
    Ok((link, got))
}
