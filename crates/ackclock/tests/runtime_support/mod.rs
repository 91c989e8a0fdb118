//! Two runtimes joined by the in-memory pipe, in one process: `a` at 10.0.0.1, `b` at
//! 10.0.0.2.
#![allow(dead_code)]

use ackclock::buf::PoolConfig;
use ackclock::iface::InterfaceConfig;
use ackclock::phy::{pipe, Capabilities, PipeConfig};
use ackclock::runtime::{Runtime, RuntimeConfig};
use ackclock::time::Instant;
use ackclock::{Stack, StackConfig};
use core::net::{Ipv4Addr, SocketAddrV4};

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

pub fn b_at(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(B, port)
}

pub fn config(addr: Ipv4Addr, seed: u64) -> StackConfig {
    let mut c = StackConfig::new(InterfaceConfig::new(addr, 24));
    c.seed = seed;
    c.pool = PoolConfig { buffers: 4096, ..Default::default() };
    c
}

/// Runtimes on both ends of a pipe, with the stacks' configurations changed by `tune`.
pub fn pair_with(tune: impl Fn(&mut StackConfig), rt: RuntimeConfig) -> (Runtime, Runtime) {
    // Deeper than any pool: the pipe never drops, so no test depends on loss recovery
    // (with 1,000 connections a 4,096-frame pipe overflows, and the recovery from loss in
    // both directions at once is not what these tests are about).
    let (da, db) = pipe(PipeConfig { depth: 128 * 1024, ..Default::default() });
    let caps = Capabilities::ethernet(1500);
    let (mut ca, mut cb) = (config(A, 1), config(B, 2));
    tune(&mut ca);
    tune(&mut cb);
    let a = Stack::new(ca, caps, Instant::ZERO).unwrap();
    let b = Stack::new(cb, caps, Instant::ZERO).unwrap();
    (Runtime::with_config(a, da, rt).unwrap(), Runtime::with_config(b, db, rt).unwrap())
}

pub fn pair() -> (Runtime, Runtime) {
    pair_with(|_| {}, RuntimeConfig::default())
}

/// Byte `i` of a test stream: a pattern that shows reordering and loss (251 is prime).
pub fn pattern(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = ((offset + i as u64) % 251) as u8;
    }
}
