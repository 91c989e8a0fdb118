//! `ackclock fetch URL`: one HTTP/1.1 GET with the stack as the client, over a TAP or a TUN.
//!
//! The stack opens the connection (`tcp_connect`), sends `GET PATH` with
//! `Connection: close`, reads the response head (status line and `Content-Length`), and
//! then the body: until `Content-Length` bytes, or the server's FIN when there is none. The
//! body goes to `--output` (`-` for stdout) or is counted and dropped. Chunked responses are
//! not decoded. The host is an IPv4 address (no DNS): on the TAP's subnet, or beyond `--gateway`
//! (on a TUN, any address: the link is point to point).
//!
//! The client is blocking code on the library's threaded runtime ([`client`]), as
//! it would be written with `std::net`: the runtime's protocol thread runs the stack over
//! the device, and this thread connects, writes and reads. Exit status 0 for a `2xx` answer
//! whose body arrived whole.

mod client;

use crate::link::{install_signals, Link, LinkArgs};
use ackclock::tcp::TcpInfo;
use clap::Args;
use core::net::Ipv4Addr;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::process::ExitCode;

/// Download a URL (http://A.B.C.D[:PORT]/PATH) with the stack as the TCP client, over a TAP or TUN.
#[derive(Args)]
pub struct FetchArgs {
    /// http://A.B.C.D[:PORT]/PATH; the address is on the TAP's subnet or reached through --gateway (any, on a TUN).
    url: String,
    #[command(flatten)]
    link: LinkArgs,
    /// Write the body here (`-`: stdout); without it the body is counted and dropped.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    timeout: u64,
    /// Print the result as JSON on stdout (not with `--output -`).
    #[arg(long)]
    json: bool,
}

/// Longest response head accepted.
const HEAD_LIMIT: usize = 16 * 1024;

pub fn run(args: FetchArgs) -> ExitCode {
    match fetch(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ackclock fetch: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `http://A.B.C.D[:PORT][/PATH]` as (address, port, path).
fn parse_url(url: &str) -> Result<(Ipv4Addr, u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| format!("{p}: bad port"))?),
        None => (authority, 80),
    };
    let addr = host.parse().map_err(|_| format!("{host}: expected an IPv4 address (no DNS here)"))?;
    Ok((addr, port, path.to_string()))
}

/// The status code and `Content-Length` of a response head (without the blank line).
fn parse_head(head: &[u8]) -> Result<(u16, Option<u64>), String> {
    let head = std::str::from_utf8(head).map_err(|_| "response head is not UTF-8".to_string())?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let mut parts = status.splitn(3, ' ');
    let code = match (parts.next(), parts.next()) {
        (Some(v), Some(c)) if v.starts_with("HTTP/1.") => c.parse::<u16>().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("bad status line {status:?}"))?;
    let mut length = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(value.trim().parse().map_err(|_| format!("bad Content-Length {value:?}"))?);
            } else if name.trim().eq_ignore_ascii_case("transfer-encoding") {
                return Err("chunked (or other) transfer encodings are not supported".into());
            }
        }
    }
    Ok((code, length))
}

/// The response as it arrives: the head until its blank line, then the
/// body, to `out` (or counted and dropped).
pub(crate) struct Response {
    head: Vec<u8>,
    pub status: Option<u16>,
    pub length: Option<u64>,
    pub body: u64,
    out: Option<Box<dyn Write>>,
}

impl Response {
    pub fn new(out: Option<Box<dyn Write>>) -> Response {
        Response { head: Vec::new(), status: None, length: None, body: 0, out }
    }

    /// Whether the body announced by `Content-Length` has arrived whole.
    pub fn complete(&self) -> bool {
        self.status.is_some() && self.length.is_some_and(|l| self.body >= l)
    }

    /// Bytes just read.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        let rest;
        let mut data = data;
        if self.status.is_none() {
            self.head.extend_from_slice(data);
            let Some(end) = self.head.windows(4).position(|w| w == b"\r\n\r\n") else {
                if self.head.len() > HEAD_LIMIT {
                    return Err("response head too long".into());
                }
                return Ok(());
            };
            let (code, length) = parse_head(&self.head[..end])?;
            self.status = Some(code);
            self.length = length;
            rest = self.head.split_off(end + 4);
            data = &rest;
        }
        let take = match self.length {
            Some(l) => data.len().min((l - self.body) as usize),
            None => data.len(),
        };
        if let Some(out) = &mut self.out {
            out.write_all(&data[..take]).map_err(|e| format!("output: {e}"))?;
        }
        self.body += take as u64;
        Ok(())
    }

    /// The server closed: whether the response was whole.
    pub fn end_of_stream(&self) -> Result<(), String> {
        match (self.status, self.length) {
            (None, _) => Err("connection closed before the response head".into()),
            (Some(_), Some(l)) if self.body < l => {
                Err(format!("connection closed after {} of {l} body bytes", self.body))
            }
            _ => Ok(()),
        }
    }

    /// Flush and close the output; `result` with an output error added.
    pub fn close_output(&mut self, result: Result<(), String>) -> Result<(), String> {
        let flushed = self.out.take().map_or(Ok(()), |mut out| out.flush());
        result.and(flushed.map_err(|e| format!("output: {e}")))
    }
}

fn fetch(args: FetchArgs) -> Result<bool, String> {
    install_signals();
    let (addr, port, path) = parse_url(&args.url)?;
    let me = args.link.addr;
    let mask = if me.prefix == 0 { 0 } else { u32::MAX << (32 - me.prefix as u32) };
    // A TUN is point to point: every address is through it.
    let on_link = (addr.to_bits() ^ me.addr.to_bits()) & mask == 0 || args.link.tun.is_some();
    if !on_link && args.link.gateway.is_none() {
        return Err(format!("{addr} is not on {me}, and there is no --gateway"));
    }
    if args.json && args.output.as_deref() == Some(std::path::Path::new("-")) {
        return Err("--json and --output - both write to stdout".into());
    }
    let out: Option<Box<dyn Write>> = match args.output.as_deref() {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(BufWriter::with_capacity(1 << 20, io::stdout()))),
        Some(p) => Some(Box::new(BufWriter::with_capacity(
            1 << 20,
            File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        ))),
    };
    let link = Link::open(&args.link)?;
    let stack = link.stack(me, false, None)?;
    let host = if port == 80 { addr.to_string() } else { format!("{addr}:{port}") };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ackclock\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    let to = SocketAddrV4::new(addr, port);
    let timeout = std::time::Duration::from_secs(args.timeout);
    let (link, got) = client::fetch(link, stack, to, request.as_bytes(), out, timeout)?;
    report(&args, link, got)
}

/// How a GET ended.
pub(crate) struct Got {
    pub result: Result<(), String>,
    pub status: Option<u16>,
    pub length: Option<u64>,
    pub body: u64,
    pub elapsed: std::time::Duration,
    /// When the connection was established, from the start.
    pub connected: Option<std::time::Duration>,
    pub info: Option<TcpInfo>,
    /// The runtime's counters.
    pub runtime: serde_json::Value,
}

/// Print what the GET did (stderr, and JSON on stdout with `--json`); flush the capture.
fn report(args: &FetchArgs, link: Link, got: Got) -> Result<bool, String> {
    let Got { result, status, length, body, elapsed, connected, info, runtime } = got;
    let secs = elapsed.as_secs_f64();
    let mbps = body as f64 * 8.0 / secs.max(1e-9) / 1e6;
    let status_text = status.map_or("-".to_string(), |s| s.to_string());
    let retransmits = info.map_or(0, |i| i.stats.retransmits);
    let ok = result.is_ok() && status.is_some_and(|s| (200..300).contains(&s));
    eprintln!(
        "ackclock fetch: GET {}: status {status_text}, {body} body bytes in {secs:.3} s ({mbps:.1} Mbit/s), {retransmits} retransmits{}; {}",
        args.url,
        result.as_ref().err().map_or(String::new(), |e| format!("; error: {e}")),
        link.summary()
    );
    if args.json {
        let opts = info.map(|i| {
            serde_json::json!({
                "mss": i.smss, "snd_wscale": i.snd_wscale, "rcv_wscale": i.rcv_wscale,
                "sack": i.sack, "timestamps": i.timestamps,
            })
        });
        let mut out = serde_json::json!({
            "url": args.url,
            "status": status,
            "content_length": length,
            "bytes": body,
            "complete": result.is_ok(),
            "error": result.as_ref().err(),
            "secs": secs,
            "connect_secs": connected.map(|d| d.as_secs_f64()),
            "retransmits": retransmits,
            "rtos": info.map_or(0, |i| i.stats.rtos),
            "options": opts,
        });
        out["runtime"] = runtime;
        println!("{out}");
    }
    link.finish()?;
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        assert_eq!(parse_url("http://10.0.0.1/x/y").unwrap(), (Ipv4Addr::new(10, 0, 0, 1), 80, "/x/y".into()));
        assert_eq!(parse_url("http://10.0.0.1:8000").unwrap(), (Ipv4Addr::new(10, 0, 0, 1), 8000, "/".into()));
        assert!(parse_url("https://10.0.0.1/").is_err());
        assert!(parse_url("http://example.com/").is_err());
        assert!(parse_url("http://10.0.0.1:x/").is_err());
    }

    #[test]
    fn heads_parse() {
        assert_eq!(parse_head(b"HTTP/1.0 200 OK\r\nServer: x\r\nContent-Length: 12").unwrap(), (200, Some(12)));
        assert_eq!(parse_head(b"HTTP/1.1 404 Not Found").unwrap(), (404, None));
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked").is_err());
        assert!(parse_head(b"SSH-2.0").is_err());
    }
}
