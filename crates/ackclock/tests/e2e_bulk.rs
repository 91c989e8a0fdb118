//! End to end at scale: bulk transfer in both directions and many concurrent connections,
//! two stacks over the in-memory pipe on virtual time.

mod common;

use ackclock::buf::PoolConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig};
use ackclock::time::Duration;
use ackclock::{Error, Shutdown, Stack, StackConfig, TcpHandle};
use common::{config, Pair, A, B};
use sha2::{Digest, Sha256};
use std::net::SocketAddrV4;

/// A deterministic pseudo-random byte stream (xorshift64*), produced in blocks so that any
/// split into chunks concatenates to the same bytes.
struct Stream {
    state: u64,
    block: Box<[u8; BLOCK]>,
    pos: usize,
    /// Bytes not yet produced.
    left: u64,
}

const BLOCK: usize = 64 * 1024;

impl Stream {
    fn new(seed: u64, len: u64) -> Stream {
        let mut s = Stream { state: seed | 1, block: Box::new([0; BLOCK]), pos: 0, left: len };
        s.refill();
        s
    }

    fn refill(&mut self) {
        for chunk in self.block.chunks_exact_mut(8) {
            self.state ^= self.state >> 12;
            self.state ^= self.state << 25;
            self.state ^= self.state >> 27;
            chunk.copy_from_slice(&self.state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        self.pos = 0;
    }

    /// The next bytes of the stream (at most to the end of the current block).
    fn peek(&self) -> &[u8] {
        let n = (BLOCK - self.pos).min(self.left.min(BLOCK as u64) as usize);
        &self.block[self.pos..self.pos + n]
    }

    fn consume(&mut self, n: usize) {
        assert!(n as u64 <= self.left && self.pos + n <= BLOCK);
        self.pos += n;
        self.left -= n as u64;
        if self.pos == BLOCK && self.left > 0 {
            self.refill();
        }
    }

    fn is_done(&self) -> bool {
        self.left == 0
    }

    /// Compare `data` with the next bytes of the stream and consume them; returns the
    /// offset (within `data`) of the first difference.
    fn check(&mut self, mut data: &[u8]) -> Option<usize> {
        let mut off = 0;
        let mut first = None;
        while !data.is_empty() {
            if self.left == 0 {
                return first.or(Some(off)); // more bytes than were sent
            }
            let want = self.peek();
            let n = want.len().min(data.len());
            if first.is_none() && want[..n] != data[..n] {
                first = Some(off + want[..n].iter().zip(&data[..n]).position(|(a, b)| a != b).unwrap());
            }
            self.consume(n);
            data = &data[n..];
            off += n;
        }
        first
    }
}

/// One side of the bidirectional transfer.
struct Side {
    conn: TcpHandle,
    out: Stream,
    sent_hash: Sha256,
    shut: bool,
    /// The peer's stream, regenerated to locate a difference.
    expect: Stream,
    recv_hash: Sha256,
    received: u64,
    first_diff: Option<u64>,
    eof: bool,
}

impl Side {
    fn new(conn: TcpHandle, out_seed: u64, in_seed: u64, len: u64) -> Side {
        Side {
            conn,
            out: Stream::new(out_seed, len),
            sent_hash: Sha256::new(),
            shut: false,
            expect: Stream::new(in_seed, len),
            recv_hash: Sha256::new(),
            received: 0,
            first_diff: None,
            eof: false,
        }
    }

    /// Send what the stack takes, read what it has; true once both directions are done.
    fn work(&mut self, stack: &mut Stack, buf: &mut [u8]) -> bool {
        while !self.out.is_done() {
            let chunk = self.out.peek();
            match stack.tcp_send(self.conn, chunk) {
                Ok(n) => {
                    self.sent_hash.update(&chunk[..n]);
                    self.out.consume(n);
                }
                Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if self.out.is_done() && !self.shut {
            stack.tcp_shutdown(self.conn, Shutdown::Write).unwrap();
            self.shut = true;
        }
        while !self.eof {
            match stack.tcp_recv(self.conn, buf) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.recv_hash.update(&buf[..n]);
                    if let (None, Some(d)) = (self.first_diff, self.expect.check(&buf[..n])) {
                        self.first_diff = Some(self.received + d as u64);
                    }
                    self.received += n as u64;
                }
                Err(Error::WouldBlock) => break,
                Err(e) => panic!("recv after {} bytes: {e}", self.received),
            }
        }
        self.shut && self.eof
    }
}

#[test]
fn hundred_megabytes_both_directions_at_once_sha256_checked() {
    const LEN: u64 = 100 * 1024 * 1024;
    let mut p = Pair::new();
    let (c, s) = p.connect(80);
    let mut a = Side::new(c, 0xa11ce, 0xb0b, LEN);
    let mut b = Side::new(s, 0xb0b, 0xa11ce, LEN);
    let mut buf = vec![0u8; 64 * 1024];
    let start = p.now;
    let done = p.run_until(Duration::from_secs(600), |p| {
        let da = a.work(&mut p.a, &mut buf);
        let db = b.work(&mut p.b, &mut buf);
        da && db
    });
    eprintln!("virtual time {:?}", p.now - start);
    eprintln!("A {:?}\nB {:?}", p.a.tcp_info(c).unwrap(), p.b.tcp_info(s).unwrap());
    eprintln!("A counters {:?}\nB counters {:?}", p.a.counters(), p.b.counters());
    assert!(
        done,
        "transfer did not finish: A got {} (eof {}), B got {} (eof {})",
        a.received, a.eof, b.received, b.eof
    );
    assert_eq!(a.received, LEN, "bytes A received");
    assert_eq!(b.received, LEN, "bytes B received");
    assert_eq!(a.first_diff, None, "A's received stream differs from B's sent stream");
    assert_eq!(b.first_diff, None, "B's received stream differs from A's sent stream");
    let (a_sent, a_got) = (a.sent_hash.finalize(), a.recv_hash.finalize());
    let (b_sent, b_got) = (b.sent_hash.finalize(), b.recv_hash.finalize());
    assert_eq!(b_got, a_sent, "SHA-256 of A->B");
    assert_eq!(a_got, b_sent, "SHA-256 of B->A");

    p.a.tcp_close(c).unwrap();
    p.b.tcp_close(s).unwrap();
    // TIME-WAIT lasts 2 MSL (60 s by default).
    assert!(
        p.run_until(Duration::from_secs(300), |p| p.a.tcp().connections() == 0 && p.b.tcp().connections() == 0),
        "connections left: A {} B {}",
        p.a.tcp().connections(),
        p.b.tcp().connections()
    );
    assert_eq!(p.a.pool().available(), p.a.pool().capacity(), "A's pool");
    assert_eq!(p.b.pool().available(), p.b.pool().capacity(), "B's pool");
}

/// The message client `i` sends: its index, then a stream derived from it.
fn message(i: u32, len: usize) -> Vec<u8> {
    let mut s = Stream::new(0x5eed_0000 + u64::from(i), (len - 4) as u64);
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&i.to_be_bytes());
    while !s.is_done() {
        let n = s.peek().len();
        m.extend_from_slice(s.peek());
        s.consume(n);
    }
    m
}

struct Client {
    conn: TcpHandle,
    msg: Vec<u8>,
    sent: usize,
    shut: bool,
    got: Vec<u8>,
    eof: bool,
    closed: bool,
}

struct Server {
    conn: TcpHandle,
    got: Vec<u8>,
    echoed: usize,
    eof: bool,
    closed: bool,
}

fn send_some(stack: &mut Stack, conn: TcpHandle, data: &[u8]) -> usize {
    match stack.tcp_send(conn, data) {
        Ok(n) => n,
        Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => 0,
        Err(e) => panic!("send: {e}"),
    }
}

/// Read everything available into `got`; true at end of stream.
fn recv_all(stack: &mut Stack, conn: TcpHandle, buf: &mut [u8], got: &mut Vec<u8>) -> bool {
    loop {
        match stack.tcp_recv(conn, buf) {
            Ok(0) => return true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(Error::WouldBlock) => return false,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[test]
fn thousand_concurrent_connections_echo_and_close_cleanly() {
    const N: u32 = 1000;
    const LEN: usize = 10 * 1024;
    // Up to ~8 segments queued each way per connection on each side, plus handshakes.
    let cfg = |addr, seed| {
        let mut c: StackConfig = config(addr, seed);
        c.pool = PoolConfig { buffers: 32 * 1024, ..Default::default() };
        c
    };
    let (da, db) = pipe(PipeConfig { depth: 32 * 1024, ..Default::default() });
    let now = ackclock::time::Instant::from_secs(1);
    let caps = Capabilities::ethernet(1500);
    let mut p = Pair {
        a: Stack::new(cfg(A, 1), caps, now).unwrap(),
        b: Stack::new(cfg(B, 2), caps, now).unwrap(),
        da,
        db,
        now,
    };
    // Resolve the neighbours up front: the ARP queue parks only 4 frames per neighbour
    // (as Linux), so 996 of 1000 simultaneous SYNs would wait for a 1 s retransmission.
    let (mac_a, mac_b) = (p.a.iface().mac(), p.b.iface().mac());
    p.a.iface_mut().insert_static_neighbor(B, mac_b);
    p.b.iface_mut().insert_static_neighbor(A, mac_a);
    let l = p.b.tcp_listen(SocketAddrV4::new(B, 7), 1024).unwrap();
    let mut clients: Vec<Client> = (0..N)
        .map(|i| Client {
            conn: p.a.tcp_connect(SocketAddrV4::new(B, 7)).unwrap(),
            msg: message(i, LEN),
            sent: 0,
            shut: false,
            got: Vec::with_capacity(LEN),
            eof: false,
            closed: false,
        })
        .collect();
    assert_eq!(p.a.tcp().connections(), N as usize);
    let mut servers: Vec<Server> = Vec::with_capacity(N as usize);
    let mut buf = vec![0u8; 64 * 1024];
    let mut clients_done = 0;
    let mut servers_done = 0;
    let start = p.now;
    let done = p.run_until(Duration::from_secs(120), |p| {
        while let Ok(conn) = p.b.tcp_accept(l) {
            servers.push(Server { conn, got: Vec::with_capacity(LEN), echoed: 0, eof: false, closed: false });
        }
        for c in clients.iter_mut().filter(|c| !c.closed) {
            if c.sent < LEN {
                c.sent += send_some(&mut p.a, c.conn, &c.msg[c.sent..]);
            }
            if c.sent == LEN && !c.shut {
                p.a.tcp_shutdown(c.conn, Shutdown::Write).unwrap();
                c.shut = true;
            }
            if !c.eof {
                c.eof = recv_all(&mut p.a, c.conn, &mut buf, &mut c.got);
            }
            if c.eof && c.shut {
                p.a.tcp_close(c.conn).unwrap();
                c.closed = true;
                clients_done += 1;
            }
        }
        for s in servers.iter_mut().filter(|s| !s.closed) {
            if !s.eof {
                s.eof = recv_all(&mut p.b, s.conn, &mut buf, &mut s.got);
            }
            if s.echoed < s.got.len() {
                s.echoed += send_some(&mut p.b, s.conn, &s.got[s.echoed..]);
            }
            if s.eof && s.echoed == s.got.len() {
                p.b.tcp_close(s.conn).unwrap();
                s.closed = true;
                servers_done += 1;
            }
        }
        clients_done == N && servers_done == N
    });
    eprintln!("virtual time {:?}", p.now - start);
    eprintln!("A counters {:?}\nB counters {:?}", p.a.counters(), p.b.counters());
    assert!(done, "not finished: {clients_done} clients and {servers_done} of {} accepted servers done", servers.len());
    assert_eq!(servers.len(), N as usize);
    let mut seen = vec![false; N as usize];
    for s in &servers {
        assert!(s.got.len() >= 4, "server got {} bytes", s.got.len());
        let i = u32::from_be_bytes(s.got[..4].try_into().unwrap());
        assert!(i < N && !seen[i as usize], "server got the message of client {i} twice or out of range");
        seen[i as usize] = true;
        assert!(s.got == message(i, LEN), "server's copy of client {i}'s message differs");
    }
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.got.len(), LEN, "client {i} echo length");
        assert!(c.got == c.msg, "client {i}'s echo differs");
    }
    // Clients closed first and hold TIME-WAIT for 2 MSL.
    assert!(
        p.run_until(Duration::from_secs(300), |p| p.a.tcp().connections() == 0 && p.b.tcp().connections() == 0),
        "connections left: A {} B {}",
        p.a.tcp().connections(),
        p.b.tcp().connections()
    );
    assert_eq!(p.a.pool().available(), p.a.pool().capacity(), "A's pool");
    assert_eq!(p.b.pool().available(), p.b.pool().capacity(), "B's pool");
}
