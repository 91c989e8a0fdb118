//! End to end: two stacks over the in-memory pipe.

mod common;

use ackclock::time::Duration;
use ackclock::{Error, Shutdown};
use common::{Pair, B};

#[test]
fn handshake_transfer_and_orderly_close() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(B, 80, 16).unwrap();
    let c = p.a.tcp_connect(B, 80).unwrap();
    let mut server = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        if server.is_none() {
            server = p.b.tcp_accept(l).ok();
        }
        server.is_some() && p.a.tcp_readiness(c).unwrap().writable
    }));
    let s = server.unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut closed = false;
    assert!(p.run_until(Duration::from_secs(60), |p| {
        while sent < data.len() {
            match p.a.tcp_send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(Error::WouldBlock) | Err(Error::NoBufferSpace) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if sent == data.len() && !closed {
            p.a.tcp_shutdown(c, Shutdown::Write).unwrap();
            closed = true;
        }
        loop {
            match p.b.tcp_recv(s, &mut buf) {
                Ok(0) => return true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }));
    eprintln!("A {:?}\nB {:?}", p.a.tcp_info(c).unwrap(), p.b.tcp_info(s).unwrap());
    eprintln!("A counters {:?}\nB counters {:?}", p.a.counters(), p.b.counters());
    eprintln!("now {:?}", p.now);
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    p.b.tcp_close(s).unwrap();
    p.a.tcp_close(c).unwrap();
    assert!(p.run_until(Duration::from_secs(120), |p| p.a.tcp().connections() == 0 && p.b.tcp().connections() == 0));
    assert_eq!(p.a.pool().available(), p.a.pool().capacity());
    assert_eq!(p.b.pool().available(), p.b.pool().capacity());
}
