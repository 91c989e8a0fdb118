//! Two stacks joined by an in-memory pipe, driven on virtual time.
#![allow(dead_code)]

use ackclock::buf::PoolConfig;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Device, Impaired, PipeConfig, PipeEnd};
use ackclock::time::{Duration, Instant};
use ackclock::{ListenerHandle, Stack, StackConfig, TcpHandle};
use core::net::Ipv4Addr;
use std::net::SocketAddrV4;

/// Deterministic pseudo-random bytes (xorshift), so that misplaced data cannot compare equal.
pub fn stream(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.seed = seed;
    c.pool = PoolConfig { buffers: 4096, ..Default::default() };
    c
}

/// A device whose frames in flight the pair can see (to step time finely while they are).
pub trait Link: Device {
    fn in_flight(&self) -> usize;
}

impl Link for PipeEnd {
    fn in_flight(&self) -> usize {
        self.pending()
    }
}

impl<D: Link> Link for Impaired<D> {
    fn in_flight(&self) -> usize {
        self.inner().in_flight()
    }
}

/// Two stacks, `a` and `b`, joined by the two ends of a link (the in-memory pipe unless
/// said otherwise).
pub struct Pair<D = PipeEnd> {
    pub a: Stack,
    pub b: Stack,
    pub da: D,
    pub db: D,
    pub now: Instant,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with(config(A, 1), config(B, 2))
    }

    pub fn with(ca: StackConfig, cb: StackConfig) -> Pair {
        let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
        Pair::over(ca, cb, da, db)
    }
}

impl<D: Link> Pair<D> {
    /// Stacks with `ca` and `cb` on the two ends of a link, at 1 s of virtual time.
    pub fn over(ca: StackConfig, cb: StackConfig, da: D, db: D) -> Pair<D> {
        let now = Instant::from_secs(1);
        let caps = ackclock::phy::Capabilities::ethernet(1500);
        let a = Stack::new(ca, caps, now).unwrap();
        let b = Stack::new(cb, caps, now).unwrap();
        Pair { a, b, da, db, now }
    }

    /// One round: both stacks receive and transmit. Returns whether frames are in flight.
    pub fn step(&mut self) -> bool {
        self.a.receive(self.now, &mut self.da);
        self.b.receive(self.now, &mut self.db);
        self.a.transmit(self.now, &mut self.da);
        self.b.transmit(self.now, &mut self.db);
        self.da.in_flight() + self.db.in_flight() > 0
    }

    /// Advance: if frames are in flight, a microsecond; otherwise to the next event (a
    /// stack's timer, or a frame a device holds back).
    pub fn advance(&mut self) {
        if self.da.in_flight() + self.db.in_flight() > 0 {
            self.now += Duration::from_micros(1);
            return;
        }
        let next =
            [self.a.poll_at(), self.b.poll_at(), self.da.poll_at(), self.db.poll_at()].into_iter().flatten().min();
        match next {
            Some(t) if t > self.now => self.now = t,
            _ => self.now += Duration::from_micros(1),
        }
    }

    /// Run until `done` or `limit` of virtual time passes. Returns whether `done` held.
    /// `done` runs between receive and transmit, where an application reads and writes in
    /// the canonical sans-IO loop (so the ACKs that follow see the space it freed).
    /// Time never passes `limit`: a jump to the next event stops at the end, where `done` is
    /// asked once more.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        let end = self.now + limit;
        loop {
            self.a.receive(self.now, &mut self.da);
            self.b.receive(self.now, &mut self.db);
            let finished = done(self);
            self.a.transmit(self.now, &mut self.da);
            self.b.transmit(self.now, &mut self.db);
            if finished {
                return true;
            }
            if self.now >= end {
                return false;
            }
            self.advance();
            self.now = self.now.min(end);
        }
    }

    /// A connection from `a` to `b`'s `port` (a listener is opened there): the client's and
    /// the server's handles, once the server accepted and the client can write.
    pub fn connect(&mut self, port: u16) -> (TcpHandle, TcpHandle) {
        let (_, c, s) = self.listen_and_connect(port);
        (c, s)
    }

    /// [`connect`](Self::connect), also returning the listener's handle.
    pub fn listen_and_connect(&mut self, port: u16) -> (ListenerHandle, TcpHandle, TcpHandle) {
        let l = self.b.tcp_listen(SocketAddrV4::new(B, port), 16).unwrap();
        let c = self.a.tcp_connect(SocketAddrV4::new(B, port)).unwrap();
        let mut server = None;
        assert!(self.run_until(Duration::from_secs(5), |p| {
            server = server.or_else(|| p.b.tcp_accept(l).ok());
            server.is_some() && p.a.tcp_readiness(c).unwrap().writable
        }));
        (l, c, server.unwrap())
    }

    /// Close both ends of a connection, let every connection finish, and check that each
    /// stack's pool has every buffer back.
    pub fn close_and_drain(&mut self, c: TcpHandle, s: TcpHandle) {
        self.b.tcp_close(s).unwrap();
        self.a.tcp_close(c).unwrap();
        assert!(
            self.run_until(Duration::from_secs(120), |p| p.a.tcp().connections() == 0 && p.b.tcp().connections() == 0)
        );
        assert_eq!(self.a.pool().available(), self.a.pool().capacity());
        assert_eq!(self.b.pool().available(), self.b.pool().capacity());
    }
}

pub mod alloc;
pub mod capture;
pub mod clients;
#[cfg(target_os = "linux")]
pub mod link_runtime;
pub mod netns;
pub mod script;
