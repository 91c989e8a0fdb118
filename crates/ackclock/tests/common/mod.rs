//! Two stacks joined by an in-memory pipe, driven on virtual time.
#![allow(dead_code)]

use ackclock::buf::PoolConfig;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, PipeConfig, PipeEnd};
use ackclock::time::{Duration, Instant};
use ackclock::{Stack, StackConfig};
use core::net::Ipv4Addr;

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.seed = seed;
    c.pool = PoolConfig { buffers: 4096, ..Default::default() };
    c
}

pub struct Pair {
    pub a: Stack,
    pub b: Stack,
    pub da: PipeEnd,
    pub db: PipeEnd,
    pub now: Instant,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with(config(A, 1), config(B, 2))
    }

    pub fn with(ca: StackConfig, cb: StackConfig) -> Pair {
        let (da, db) = pipe(PipeConfig { depth: 4096, ..Default::default() });
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
        self.da.pending() + self.db.pending() > 0
    }

    /// Advance: if frames are in flight, a microsecond; otherwise to the next timer.
    pub fn advance(&mut self) {
        if self.da.pending() + self.db.pending() > 0 {
            self.now += Duration::from_micros(1);
            return;
        }
        let next = [self.a.poll_at(), self.b.poll_at()].into_iter().flatten().min();
        match next {
            Some(t) if t > self.now => self.now = t,
            _ => self.now += Duration::from_micros(1),
        }
    }

    /// Run until `done` or `limit` of virtual time passes. Returns whether `done` held.
    /// `done` runs between receive and transmit, where an application reads and writes in
    /// the canonical sans-IO loop (so the ACKs that follow see the space it freed).
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        let end = self.now + limit;
        while self.now < end {
            self.a.receive(self.now, &mut self.da);
            self.b.receive(self.now, &mut self.db);
            let finished = done(self);
            self.a.transmit(self.now, &mut self.da);
            self.b.transmit(self.now, &mut self.db);
            if finished {
                return true;
            }
            self.advance();
        }
        false
    }
}

pub mod netns;
pub mod script;
