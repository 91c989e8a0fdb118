//! serve's HTTP/1.1 service on port 80: `GET /bytes/N` (or `HEAD`) answers `N` bytes of a
//! fixed pattern with a `Content-Length`; byte `i` of the body is `(i % 251) as u8` (251 is
//! prime, so the pattern does not line up with any power-of-two buffer or segment size, and
//! a misplaced chunk shows in a hash). Any other path is 404. Connections are kept alive
//! (HTTP/1.1 default; HTTP/1.0 with `Connection: keep-alive`); requests may be pipelined.
//! Request bodies are refused (413), and a request head over 8 KiB gets 431 and a close.

use super::{Served, CHUNK};
use ackclock::runtime::tokio::TcpStream;
use std::io::{self, ErrorKind, Write};
use tokio::io::AsyncWriteExt;

/// The longest request head read before answering 431.
const HEAD_LIMIT: usize = 8 * 1024;
/// Body byte `i` is `(i % PATTERN_PERIOD) as u8`.
pub(super) const PATTERN_PERIOD: usize = 251;

/// The body pattern, laid out so that [`CHUNK`] bytes from any offset are contiguous.
pub(super) fn pattern() -> Vec<u8> {
    (0..PATTERN_PERIOD + CHUNK).map(|i| (i % PATTERN_PERIOD) as u8).collect()
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

impl Response {
    /// The status line and headers, with a short text body if there is one, into `head`;
    /// returns the pattern bytes to send after it.
    fn head(&self, head: &mut Vec<u8>) -> u64 {
        let body_len = self.text.map_or(self.body_len, |t| t.len() as u64);
        let content_type = if self.text.is_some() { "text/plain" } else { "application/octet-stream" };
        let connection = if self.close {
            "Connection: close\r\n"
        } else if self.keep_alive_header {
            "Connection: keep-alive\r\n"
        } else {
            ""
        };
        head.clear();
        let _ = write!(
            head,
            "HTTP/1.1 {}\r\nServer: ackclock\r\nContent-Type: {content_type}\r\nContent-Length: {body_len}\r\n{connection}\r\n",
            self.status
        );
        if let (Some(t), true) = (self.text, self.send_body) {
            head.extend_from_slice(t.as_bytes());
        }
        if self.text.is_none() && self.send_body {
            self.body_len
        } else {
            0
        }
    }
}

/// One HTTP connection, until the client closes it, a response says close, or an error.
/// The request head buffer is allocated at the first byte read and kept with the connection.
pub(super) async fn serve(s: &TcpStream, served: &Served) -> io::Result<()> {
    let mut req: Box<[u8]> = Box::default();
    let mut len = 0;
    let mut eof = false;
    let mut head = Vec::new();
    loop {
        // The next request, if its head is complete (pipelined requests wait here).
        let r = if let Some(end) = req[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            let r = parse_request(&req[..end]);
            req.copy_within(end + 4..len, 0);
            len -= end + 4;
            r
        } else if eof {
            return Ok(());
        } else if len >= HEAD_LIMIT {
            len = 0;
            Response {
                status: "431 Request Header Fields Too Large",
                body_len: 0,
                text: Some("request head too large\n"),
                send_body: true,
                close: true,
                keep_alive_header: false,
            }
        } else {
            if req.is_empty() {
                s.readable().await?;
                req = vec![0; HEAD_LIMIT].into_boxed_slice();
            }
            match s.try_read(&mut req[len..]) {
                Ok(0) => eof = true,
                Ok(n) => len += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => s.readable().await?,
                Err(e) => return Err(e),
            }
            continue;
        };
        let body = r.head(&mut head);
        let mut w = s;
        w.write_all(&head).await?;
        let (mut left, mut pos) = (body, 0u64);
        while left > 0 {
            let at = (pos % PATTERN_PERIOD as u64) as usize;
            let n = left.min(CHUNK as u64) as usize;
            let sent = w.write(&served.pattern[at..at + n]).await?;
            if sent == 0 {
                return Err(ErrorKind::WriteZero.into());
            }
            left -= sent as u64;
            pos += sent as u64;
        }
        served.add(super::Service::Http, head.len() as u64 + body);
        if r.close {
            return Ok(());
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

    #[test]
    fn response_heads() {
        let mut head = Vec::new();
        let body = parse_request(b"GET /bytes/7 HTTP/1.0\r\nConnection: keep-alive").head(&mut head);
        assert_eq!(body, 7);
        let text = String::from_utf8(head.clone()).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n")
                && text.ends_with("Content-Length: 7\r\nConnection: keep-alive\r\n\r\n"),
            "{text}"
        );
        let body = parse_request(b"HEAD /nope HTTP/1.1").head(&mut head);
        assert_eq!(body, 0);
        assert!(String::from_utf8(head).unwrap().ends_with("Content-Length: 10\r\n\r\n"), "HEAD: the length, no body");
    }
}
