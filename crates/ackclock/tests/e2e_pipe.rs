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
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes differ");
    p.b.tcp_close(s).unwrap();
    p.a.tcp_close(c).unwrap();
    assert!(p.run_until(Duration::from_secs(120), |p| p.a.tcp().connections() == 0 && p.b.tcp().connections() == 0));
    assert_eq!(p.a.pool().available(), p.a.pool().capacity());
    assert_eq!(p.b.pool().available(), p.b.pool().capacity());
}

/// Seed 000 / issue 4: in a steady bulk transfer over the pipe, at least 95% of data
/// segments take the receiver's header-prediction fast path and at least 95% of ACKs take
/// the sender's. (Counted over every segment each side received, handshake and FIN
/// included, so the ratio is conservative.)
#[test]
fn bulk_transfer_runs_on_the_fast_path() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(B, 80, 16).unwrap();
    let c = p.a.tcp_connect(B, 80).unwrap();
    let mut server = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        server = server.or_else(|| p.b.tcp_accept(l).ok());
        server.is_some() && p.a.tcp_readiness(c).unwrap().writable
    }));
    let s = server.unwrap();
    let total = 20_000_000usize;
    let chunk = vec![0x5au8; 65536];
    let (mut sent, mut received) = (0usize, 0usize);
    let mut buf = vec![0u8; 65536];
    assert!(p.run_until(Duration::from_secs(600), |p| {
        while sent < total {
            match p.a.tcp_send(c, &chunk[..chunk.len().min(total - sent)]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        while let Ok(n) = p.b.tcp_recv(s, &mut buf) {
            if n == 0 {
                break;
            }
            received += n;
        }
        received == total
    }));
    let (a, b) = (p.a.counters(), p.b.counters());
    let data_share = b.fast_path_data as f64 / b.segs_in as f64;
    let ack_share = a.fast_path_acks as f64 / a.segs_in as f64;
    assert!(data_share >= 0.95, "receiver fast path: {} of {} segments", b.fast_path_data, b.segs_in);
    assert!(ack_share >= 0.95, "sender fast path: {} of {} ACKs", a.fast_path_acks, a.segs_in);
}

/// `tcp_send_with` / `tcp_recv_with`: the caller's bytes go straight into send-queue pbufs
/// and come out of receive-queue pbufs in place. Fills and drains of odd sizes (a short one
/// ends the call) move 4 MB byte-exact, and every pbuf returns to its pool.
#[test]
fn send_with_and_recv_with_move_a_stream_in_place() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(B, 80, 16).unwrap();
    let c = p.a.tcp_connect(B, 80).unwrap();
    let mut server = None;
    assert!(p.run_until(Duration::from_secs(5), |p| {
        server = server.or_else(|| p.b.tcp_accept(l).ok());
        server.is_some() && p.a.tcp_readiness(c).unwrap().writable
    }));
    let s = server.unwrap();
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i.wrapping_mul(2654435761) >> 11) as u8).collect();
    let (mut sent, mut closed, mut calls) = (0, false, 0u32);
    let mut got = Vec::new();
    assert!(p.run_until(Duration::from_secs(60), |p| {
        while sent < data.len() && !closed {
            // Fill at most 1000..1999 bytes a call, varying.
            let r = p.a.tcp_send_with(c, |dst| {
                calls += 1;
                let n = dst.len().min(1000 + (calls as usize * 37) % 1000).min(data.len() - sent);
                dst[..n].copy_from_slice(&data[sent..sent + n]);
                sent += n;
                n
            });
            match r {
                Ok(0) | Err(Error::WouldBlock) => break,
                Ok(_) => {}
                Err(e) => panic!("send_with: {e}"),
            }
        }
        if sent == data.len() && !closed {
            p.a.tcp_shutdown(c, Shutdown::Write).unwrap();
            closed = true;
        }
        loop {
            let r = p.b.tcp_recv_with(s, |b| {
                let n = b.len().min(777);
                got.extend_from_slice(&b[..n]);
                n
            });
            match r {
                Ok(0) => return true,
                Ok(_) => {}
                Err(Error::WouldBlock) => return false,
                Err(e) => panic!("recv_with: {e}"),
            }
        }
    }));
    assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
    p.b.tcp_close(s).unwrap();
    p.a.tcp_close(c).unwrap();
    assert!(p.run_until(Duration::from_secs(120), |p| p.a.tcp().connections() == 0 && p.b.tcp().connections() == 0));
    assert_eq!(p.a.pool().available(), p.a.pool().capacity());
    assert_eq!(p.b.pool().available(), p.b.pool().capacity());
}
