//! `ackclock serve`: discard (9), echo (7), chargen (19) and a small HTTP/1.1 server (80)
//! on the stack, over a Linux TAP or TUN device (`--tap NAME` or `--tun NAME`).
//!
//! HTTP: `GET /bytes/N` (or `HEAD`) answers `N` bytes of a fixed pattern with a
//! `Content-Length`; byte `i` of the body is `(i % 251) as u8` (251 is prime, so the pattern
//! does not line up with any power-of-two buffer or segment size, and a misplaced chunk
//! shows in a hash). Any other path is 404. Connections are kept alive (HTTP/1.1 default;
//! HTTP/1.0 with `Connection: keep-alive`); requests may be pipelined.
//!
//! The loop is the sans-IO one: `stack.receive`, serve the sockets, `stack.transmit`, then
//! sleep in `Tap::wait` (`Tun::wait`) until a frame arrives or the stack's next timer. Every connection
//! has a bounded application buffer (64 KiB for echo, 8 KiB of request head for HTTP);
//! chargen and HTTP bodies are generated, not buffered. SIGINT/SIGTERM end it: connections
//! are reset, listeners closed, and the device goes away with its descriptor if serve
//! created it.
//!
//! Output: a start-up line on stdout once the services listen, and a summary on exit (to
//! stderr); with `--json`, both are one JSON object per line on stdout instead, with
//! `"event": "ready"` and `"event": "exit"`; the ready object names the device as `"tap"`
//! or `"tun"`. SIGUSR1 prints the counters while serving (`"event": "stats"`).

use crate::chargen::{self, Chargen};
use crate::link::{impair_report, install_signals, report_requested, stopping, Link, LinkArgs};
use ackclock::phy::Device;
use ackclock::{Error, Event, ListenerHandle, Stack, TcpHandle};
use clap::Args;
use core::net::Ipv4Addr;
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddrV4;
use std::process::ExitCode;

/// Serve discard (9), echo (7), chargen (19) and HTTP (80, `GET /bytes/N`) on a TAP or TUN device.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// Connections the stack holds at most (default 4096).
    #[arg(long, value_name = "N", value_parser = crate::link::parse_max_connections)]
    pub(crate) max_connections: Option<usize>,
    /// Print the start-up line and the exit summary as JSON objects on stdout, one a line.
    #[arg(long)]
    json: bool,
    /// Serve discard, echo and chargen on the library's threaded runtime, a thread per
    /// connection (for measuring it against this loop; no HTTP).
    #[arg(long, hide = true)]
    runtime: bool,
    /// With --runtime: who runs the protocol rounds (`RuntimeConfig::tap_rounds`): `proto`
    /// (the protocol thread only), `app` (application threads too) or `watch` (the default:
    /// a blocked application thread watches the device).
    #[arg(long, hide = true, requires = "runtime", value_name = "WHO", default_value = "watch",
          value_parser = ["proto", "app", "watch"])]
    runtime_rounds: String,
    /// With --runtime: synchronous window updates (`RuntimeConfig::sync_window_updates`: the
    /// reader hands its request to the protocol thread and waits for the reply, as before
    /// DragonFly BSD commit 96c6eb29), for measuring the coalesced messages against them.
    #[arg(long, hide = true, requires = "runtime")]
    runtime_sync_window_updates: bool,
}

/// The scratch buffer, one for all connections, that discard, chargen and echo read into.
const ECHO_BUFFER: usize = 64 * 1024;
const HTTP_HEAD_LIMIT: usize = 8 * 1024;
/// Largest single `tcp_send` of generated data.
const CHUNK: usize = 16 * 1024;
/// Body byte `i` is `(i % PATTERN_PERIOD) as u8`.
const PATTERN_PERIOD: usize = 251;

pub fn run(args: ServeArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ackclock serve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    install_signals();
    // Without --impair the link is a clean pass-through; the loop wakes for its held frames too.
    let mut link = Link::open(&args.link)?;
    let mut stack = link.stack(args.link.addr, false, args.max_connections)?;
    if args.runtime {
        return crate::serve_rt::serve(link, stack, args.json, &args.runtime_rounds, args.runtime_sync_window_updates);
    }
    let any = Ipv4Addr::UNSPECIFIED;
    let listeners: Vec<(ListenerHandle, Service)> =
        [(9, Service::Discard), (7, Service::Echo), (19, Service::Chargen), (80, Service::Http)]
            .into_iter()
            .map(|(port, svc)| {
                stack
                    .tcp_listen(SocketAddrV4::new(any, port), 128)
                    .map(|l| (l, svc))
                    .map_err(|e| format!("listen {port}: {e}"))
            })
            .collect::<Result<_, _>>()?;
    let (kind, name, tap_mode, netns) = (link.kind(), &link.name, link.mode(), args.link.netns.as_deref());
    if args.json {
        let mut ready = serde_json::json!({
            "event": "ready", "mode": tap_mode, "addr": args.link.addr.to_string(),
            "host_addr": args.link.host_addr.map(|h| h.to_string()), "netns": netns,
            "services": { "discard": 9, "echo": 7, "chargen": 19, "http": 80 },
        });
        ready[kind] = name.as_str().into();
        println!("{ready}");
    } else {
        println!(
            "ackclock serve: {kind} {name} ({tap_mode}), stack {}{}{}; discard:9 echo:7 chargen:19 http:80; ready",
            args.link.addr,
            args.link.host_addr.map_or(String::new(), |h| format!(", host {h}")),
            netns.map_or(String::new(), |n| format!(", netns {n}")),
        );
    }
    let _ = std::io::stdout().flush();

    let mut conns: HashMap<TcpHandle, Conn> = HashMap::new();
    let mut scratch = vec![0u8; ECHO_BUFFER];
    let pattern: Vec<u8> = (0..PATTERN_PERIOD + CHUNK).map(|i| (i % PATTERN_PERIOD) as u8).collect();
    let chargen = Chargen::new(CHUNK);
    let gen = Generated { pattern: &pattern, chargen: &chargen };
    let mut accepted = 0u64;
    let mut result = Ok(());
    while !stopping() {
        let now = link.now();
        stack.receive(now, &mut link.dev);
        let mut ctx = Services { listeners: &listeners, conns: &mut conns, scratch: &mut scratch, gen: &gen };
        accepted += ctx.on_events(&mut stack).1;
        stack.transmit(now, &mut link.dev);
        // Timers run in transmit (a retransmission limit, a keepalive): their events too.
        let (any, n) = ctx.on_events(&mut stack);
        accepted += n;
        if any {
            stack.transmit(now, &mut link.dev);
        }
        if report_requested() {
            print_stats(&stack, &link, args.json);
        }
        link.report_errors("ackclock serve");
        link.trim_memory(&stack);
        if let Err(e) = link.device().wait(Some(link.timeout(&stack))) {
            result = Err(e.to_string());
            break;
        }
    }

    // Shut down: reset what is open, stop listening, and let the resets out.
    let open = conns.len();
    for (h, _) in conns.drain() {
        let _ = stack.tcp_abort(h);
    }
    for (l, _) in listeners {
        let _ = stack.tcp_unlisten(l);
    }
    link.flush_at_exit(&mut stack);
    let (d, c) = (link.dev.stats(), *link.device().counters());
    let impair_stats = args.link.impair.is_some().then(|| link.impair_stats());
    if args.json {
        let impairment = impair_stats.map(|(tx, rx)| {
            let one = |s: ackclock::phy::ImpairStats| {
                serde_json::json!({
                    "passed": s.passed, "lost": s.lost, "reordered": s.reordered,
                    "duplicated": s.duplicated, "overflow": s.overflow,
                })
            };
            serde_json::json!({ "tx": one(tx), "rx": one(rx) })
        });
        let tcp = counters_json(&stack);
        let exit = serde_json::json!({
            "event": "exit",
            "tcp": tcp,
            "connections": accepted,
            "reset_at_exit": open,
            "rx": { "frames": d.rx_frames, "bytes": d.rx_bytes, "gso": c.rx_gso, "mtu_buffers": c.rx_small, "csum_partial": c.rx_csum_partial },
            "tx": { "frames": d.tx_frames, "bytes": d.tx_bytes, "tso": c.tx_gso },
            "dropped": d.tx_dropped + d.rx_dropped,
            "impairment": impairment,
            "error": result.as_ref().err(),
        });
        println!("{exit}");
    } else {
        if let Some((tx, rx)) = impair_stats {
            eprintln!("ackclock serve: {}", impair_report(tx, rx));
        }
        eprintln!(
            "ackclock serve: {accepted} connections ({open} reset at exit); rx {} frames {} bytes ({} GSO, {} in MTU buffers, {} partial csum), tx {} frames {} bytes ({} TSO), {} dropped",
            d.rx_frames, d.rx_bytes, c.rx_gso, c.rx_small, c.rx_csum_partial, d.tx_frames, d.tx_bytes, c.tx_gso, d.tx_dropped + d.rx_dropped
        );
    }
    // The pcap (--pcap), if any, is complete only once flushed.
    let flushed = link.finish();
    result.and(flushed)
}

/// The stack's counters, as `netstat -s` (SYN cookies, TIME-WAIT, drops by reason).
fn counters_json(stack: &Stack) -> serde_json::Map<String, serde_json::Value> {
    stack.counters().named().map(|(k, v)| (k.to_string(), v.into())).collect()
}

/// The report SIGUSR1 asks for while serving: the stack's counters and the device's frame
/// counts, as the exit summary has them (a JSON object with `"event": "stats"` on stdout with
/// `--json`; otherwise a line on stderr with the counters that are not zero).
fn print_stats(stack: &Stack, link: &Link, json: bool) {
    let d = link.dev.stats();
    if json {
        let stats = serde_json::json!({
            "event": "stats",
            "tcp": counters_json(stack),
            "rx": { "frames": d.rx_frames, "bytes": d.rx_bytes },
            "tx": { "frames": d.tx_frames, "bytes": d.tx_bytes },
        });
        println!("{stats}");
        let _ = std::io::stdout().flush();
    } else {
        let named: Vec<String> =
            stack.counters().named().filter(|&(_, v)| v > 0).map(|(k, v)| format!("{k}={v}")).collect();
        eprintln!("ackclock serve: rx {} frames, tx {} frames; {}", d.rx_frames, d.tx_frames, named.join(" "));
    }
}

/// The services and their open connections.
struct Services<'a, 'g> {
    listeners: &'a [(ListenerHandle, Service)],
    conns: &'a mut HashMap<TcpHandle, Conn>,
    scratch: &'a mut [u8],
    gen: &'a Generated<'g>,
}

impl Services<'_, '_> {
    /// Accept and serve what the stack's events name (`Stack::poll_event`): a wake costs
    /// the connections that something happened to, not every open one. Returns whether
    /// there was any event, and how many connections were accepted.
    fn on_events(&mut self, stack: &mut Stack) -> (bool, u64) {
        let (mut any, mut accepted) = (false, 0);
        while let Some(ev) = stack.poll_event() {
            any = true;
            match ev {
                Event::Accept(_) => {
                    for &(l, svc) in self.listeners {
                        while let Ok(h) = stack.tcp_accept(l) {
                            accepted += 1;
                            // Data may have come with the handshake: its event went to the
                            // listener's queue, not to us, so look now.
                            self.conns.insert(h, Conn::new(h, svc));
                            self.step(stack, h);
                        }
                    }
                }
                Event::Tcp(h) => self.step(stack, h),
            }
        }
        (any, accepted)
    }

    fn step(&mut self, stack: &mut Stack, h: TcpHandle) {
        let Some(c) = self.conns.get_mut(&h) else { return };
        if let Step::Close = c.step(stack, self.scratch, self.gen) {
            self.conns.remove(&h);
            let _ = stack.tcp_close(h);
        }
    }
}

struct Generated<'a> {
    pattern: &'a [u8],
    chargen: &'a Chargen,
}

#[derive(Clone, Copy)]
enum Service {
    Discard,
    Echo,
    Chargen,
    Http,
}

enum State {
    Discard,
    /// `pending`: what was read and not yet taken by the send buffer, held (and allocated)
    /// only while the peer does not read; nothing more is read meanwhile, so the receive
    /// window closes. An idle echo connection holds no buffer of its own.
    Echo {
        pending: Vec<u8>,
        eof: bool,
    },
    Chargen {
        pos: usize,
    },
    Http(Http),
}

struct Conn {
    handle: TcpHandle,
    state: State,
}

enum Step {
    Keep,
    /// Release the handle: FIN after queued data (or RST if the peer's data is unread, or
    /// nothing if the connection is already gone).
    Close,
}

/// What a socket call's error means for the service.
fn gone(e: Error) -> bool {
    !matches!(e, Error::WouldBlock | Error::NoBufferSpace)
}

impl Conn {
    fn new(handle: TcpHandle, svc: Service) -> Conn {
        let state = match svc {
            Service::Discard => State::Discard,
            Service::Echo => State::Echo { pending: Vec::new(), eof: false },
            Service::Chargen => State::Chargen { pos: 0 },
            Service::Http => State::Http(Http::default()),
        };
        Conn { handle, state }
    }

    fn step(&mut self, stack: &mut Stack, scratch: &mut [u8], gen: &Generated) -> Step {
        let h = self.handle;
        match &mut self.state {
            State::Discard => drain(stack, h, scratch),
            State::Chargen { pos } => {
                if let Step::Close = drain(stack, h, scratch) {
                    return Step::Close;
                }
                loop {
                    let at = *pos % chargen::PERIOD;
                    match stack.tcp_send(h, gen.chargen.at(at as u64, CHUNK)) {
                        Ok(n) => *pos = at + n,
                        Err(e) if gone(e) => return Step::Close,
                        Err(_) => return Step::Keep,
                    }
                }
            }
            State::Echo { pending, eof } => loop {
                let mut progress = false;
                if !pending.is_empty() {
                    match stack.tcp_send(h, pending) {
                        Ok(n) => {
                            pending.drain(..n);
                            progress = n > 0;
                        }
                        Err(e) if gone(e) => return Step::Close,
                        Err(_) => {}
                    }
                    if pending.is_empty() {
                        // Give the memory back: the peer reads again.
                        *pending = Vec::new();
                    }
                }
                if pending.is_empty() && !*eof {
                    // Read through the shared scratch buffer and send at once; only what
                    // the send buffer did not take is kept.
                    match stack.tcp_recv(h, scratch) {
                        Ok(0) => {
                            *eof = true;
                            progress = true;
                        }
                        Ok(n) => {
                            let sent = match stack.tcp_send(h, &scratch[..n]) {
                                Ok(k) => k,
                                Err(e) if gone(e) => return Step::Close,
                                Err(_) => 0,
                            };
                            pending.extend_from_slice(&scratch[sent..n]);
                            progress = true;
                        }
                        Err(e) if gone(e) => return Step::Close,
                        Err(_) => {}
                    }
                }
                if *eof && pending.is_empty() {
                    return Step::Close;
                }
                if !progress {
                    return Step::Keep;
                }
            },
            State::Http(http) => http.step(stack, h, gen),
        }
    }
}

/// Read and throw away; `Close` at the end of the stream or on an error.
fn drain(stack: &mut Stack, h: TcpHandle, scratch: &mut [u8]) -> Step {
    loop {
        match stack.tcp_recv(h, scratch) {
            Ok(0) => return Step::Close,
            Ok(_) => {}
            Err(e) if gone(e) => return Step::Close,
            Err(_) => return Step::Keep,
        }
    }
}

/// One HTTP connection: the unparsed request head and the response being sent.
#[derive(Default)]
struct Http {
    /// The request head being read: `req[..req_len]`, allocated at the first read.
    req: Box<[u8]>,
    req_len: usize,
    /// Response head not yet queued, from `head_sent`.
    head: Vec<u8>,
    head_sent: usize,
    /// Body bytes still to send, and the pattern offset of the next one.
    body_left: u64,
    body_pos: u64,
    close_after: bool,
    responding: bool,
    eof: bool,
}

/// A parsed request head: what to answer and whether to keep the connection.
struct Response {
    status: &'static str,
    body_len: u64,
    /// Body from the pattern (`/bytes/N`) or a short text.
    text: Option<&'static str>,
    send_body: bool,
    close: bool,
    keep_alive_header: bool,
}

fn parse_request(head: &[u8]) -> Response {
    let bad = |status| Response {
        status,
        body_len: 0,
        text: Some("bad request\n"),
        send_body: true,
        close: true,
        keep_alive_header: false,
    };
    let Ok(head) = std::str::from_utf8(head) else { return bad("400 Bad Request") };
    let mut lines = head.split("\r\n");
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad("400 Bad Request");
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return bad("505 HTTP Version Not Supported"),
    };
    let mut close = !http11;
    let mut keep_alive_header = false;
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((name, value)) = line.split_once(':') else { return bad("400 Bad Request") };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    close = true;
                } else if token.eq_ignore_ascii_case("keep-alive") && !http11 {
                    close = false;
                    keep_alive_header = true;
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            // No request bodies here; refusing keeps the framing simple and bounded.
            return bad("413 Content Too Large");
        }
    }
    let send_body = match method {
        "GET" => true,
        "HEAD" => false,
        _ => {
            return Response {
                status: "405 Method Not Allowed",
                body_len: 0,
                text: Some("method not allowed\n"),
                send_body: true,
                close,
                keep_alive_header,
            }
        }
    };
    match target.strip_prefix("/bytes/").and_then(|n| n.parse::<u64>().ok()) {
        Some(n) => Response { status: "200 OK", body_len: n, text: None, send_body, close, keep_alive_header },
        None => Response {
            status: "404 Not Found",
            body_len: 0,
            text: Some("not found\n"),
            send_body,
            close,
            keep_alive_header,
        },
    }
}

impl Http {
    fn start(&mut self, r: Response) {
        let body_len = r.text.map_or(r.body_len, |t| t.len() as u64);
        let content_type = if r.text.is_some() { "text/plain" } else { "application/octet-stream" };
        let connection = if r.close {
            "Connection: close\r\n"
        } else if r.keep_alive_header {
            "Connection: keep-alive\r\n"
        } else {
            ""
        };
        self.head.clear();
        let _ = write!(
            self.head,
            "HTTP/1.1 {}\r\nServer: ackclock\r\nContent-Type: {content_type}\r\nContent-Length: {body_len}\r\n{connection}\r\n",
            r.status
        );
        if let (Some(t), true) = (r.text, r.send_body) {
            self.head.extend_from_slice(t.as_bytes());
        }
        self.head_sent = 0;
        self.body_left = if r.text.is_none() && r.send_body { r.body_len } else { 0 };
        self.body_pos = 0;
        self.close_after = r.close;
        self.responding = true;
    }

    fn step(&mut self, stack: &mut Stack, h: TcpHandle, gen: &Generated) -> Step {
        loop {
            if self.responding {
                while self.head_sent < self.head.len() {
                    match stack.tcp_send(h, &self.head[self.head_sent..]) {
                        Ok(n) => self.head_sent += n,
                        Err(e) if gone(e) => return Step::Close,
                        Err(_) => return Step::Keep,
                    }
                }
                while self.body_left > 0 {
                    let at = (self.body_pos % PATTERN_PERIOD as u64) as usize;
                    let n = (self.body_left.min(CHUNK as u64)) as usize;
                    match stack.tcp_send(h, &gen.pattern[at..at + n]) {
                        Ok(sent) => {
                            self.body_left -= sent as u64;
                            self.body_pos += sent as u64;
                        }
                        Err(e) if gone(e) => return Step::Close,
                        Err(_) => return Step::Keep,
                    }
                }
                self.responding = false;
                if self.close_after {
                    return Step::Close;
                }
            }
            // The next request, if its head is complete (pipelined requests wait here).
            if let Some(end) = self.req[..self.req_len].windows(4).position(|w| w == b"\r\n\r\n") {
                let r = parse_request(&self.req[..end]);
                self.req.copy_within(end + 4..self.req_len, 0);
                self.req_len -= end + 4;
                self.start(r);
                continue;
            }
            if self.eof {
                return Step::Close;
            }
            if self.req_len >= HTTP_HEAD_LIMIT {
                self.start(Response {
                    status: "431 Request Header Fields Too Large",
                    body_len: 0,
                    text: Some("request head too large\n"),
                    send_body: true,
                    close: true,
                    keep_alive_header: false,
                });
                self.req_len = 0;
                continue;
            }
            if self.req.is_empty() {
                self.req = vec![0; HTTP_HEAD_LIMIT].into_boxed_slice();
            }
            match stack.tcp_recv(h, &mut self.req[self.req_len..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.req_len += n,
                Err(e) if gone(e) => return Step::Close,
                Err(_) => return Step::Keep,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        let r = parse_request(b"GET /bytes/1000 HTTP/1.1\r\nHost: x\r\nAccept: */*");
        assert_eq!((r.status, r.body_len, r.close, r.send_body), ("200 OK", 1000, false, true));
        let r = parse_request(b"GET /bytes/5 HTTP/1.1\r\nConnection: close");
        assert!(r.close);
        let r = parse_request(b"HEAD /bytes/5 HTTP/1.0\r\nConnection: Keep-Alive");
        assert!(!r.close && r.keep_alive_header && !r.send_body);
        assert!(parse_request(b"GET / HTTP/1.0").close);
        assert_eq!(parse_request(b"GET /nope HTTP/1.1").status, "404 Not Found");
        assert_eq!(parse_request(b"GET /bytes/x HTTP/1.1").status, "404 Not Found");
        assert_eq!(parse_request(b"POST /bytes/1 HTTP/1.1").status, "405 Method Not Allowed");
        assert_eq!(parse_request(b"garbage").status, "400 Bad Request");
        assert_eq!(parse_request(b"GET / HTTP/2").status, "505 HTTP Version Not Supported");
        assert!(parse_request(b"POST /x HTTP/1.1\r\nContent-Length: 3").close);
    }
}
