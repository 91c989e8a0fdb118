//! UDP sockets on the runtime, blocking and async, between two runtimes over the in-memory
//! pipe.
#![cfg(target_os = "linux")]

mod runtime_support;

use ackclock::runtime::UdpSocket;
use runtime_support::{b_at, pair, pattern, A, B};
use std::io::ErrorKind;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

fn datagram(i: u32) -> Vec<u8> {
    let mut v = vec![0u8; (i as usize * 131) % 1400 + 1];
    pattern(i as u64, &mut v);
    v
}

/// A blocking echo server thread: 2,000 request/response pairs, each byte-exact, with both
/// addresses as sent.
#[test]
fn blocking_echo_of_two_thousand_datagrams() {
    let (a, b) = pair();
    let server = UdpSocket::bind(&b, b_at(7)).unwrap();
    let client = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
    let client_addr = match client.local_addr().unwrap() {
        SocketAddr::V4(v) => v,
        _ => unreachable!(),
    };
    assert!(client_addr.port() >= 49152);
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        for _ in 0..2000 {
            let (n, from, to) = server.recv_from_to(&mut buf).unwrap();
            assert_eq!(to, b_at(7));
            server.send_to(&buf[..n], from).unwrap();
        }
        server
    });
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 2048];
    for i in 0..2000 {
        let d = datagram(i);
        assert_eq!(client.send_to(&d, b_at(7)).unwrap(), d.len());
        let (n, from) = client.recv_from(&mut buf).unwrap();
        assert_eq!(from, SocketAddr::V4(b_at(7)));
        assert!(buf[..n] == d[..], "datagram {i}");
    }
    let server = echo.join().unwrap();
    assert_eq!(server.local_addr().unwrap(), SocketAddr::V4(b_at(7)));
    let c = b.with_stack(|s| *s.counters());
    assert_eq!((c.udp_delivered, c.udp_out), (2000, 2000));
}

/// A receive with a timeout fails with WouldBlock when nothing comes, as std's does on
/// Linux; in non-blocking mode at once. A taken port is AddrInUse.
#[test]
fn timeouts_nonblocking_and_taken_ports() {
    let (_a, b) = pair();
    let s = UdpSocket::bind(&b, b_at(9)).unwrap();
    assert_eq!(UdpSocket::bind(&b, b_at(9)).unwrap_err().kind(), ErrorKind::AddrInUse);
    s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    assert_eq!(s.recv_from(&mut [0u8; 8]).unwrap_err().kind(), ErrorKind::WouldBlock);
    s.set_nonblocking(true).unwrap();
    assert_eq!(s.recv_from(&mut [0u8; 8]).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(s.send_to(&[0; 2000], SocketAddrV4::new(A, 9)).unwrap_err().kind(), ErrorKind::InvalidInput);
    drop(s);
    UdpSocket::bind(&b, b_at(9)).expect("closing frees the port");
}

/// Async: tokio tasks exchange 10,000 datagrams with at most 32 in flight, none lost on the
/// unimpaired pipe, each checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_ten_thousand_datagrams() {
    use ackclock::runtime::tokio::UdpSocket;
    let (a, b) = pair();
    let server = UdpSocket::bind(&b, b_at(7)).unwrap();
    let client = UdpSocket::bind(&a, SocketAddrV4::new(A, 4000)).unwrap();
    let echo = tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        for _ in 0..10_001 {
            let (n, from, _) = server.recv_from_to(&mut buf).await.unwrap();
            server.send_to(&buf[..n], from).await.unwrap();
        }
    });
    let mut buf = vec![0u8; 2048];
    // One round trip first resolves the neighbour, so that the window below starts with a
    // known one (frames parked while ARP runs are bounded: 64 per neighbour).
    client.send_to(b"hello", b_at(7)).await.unwrap();
    assert_eq!(client.recv_from(&mut buf).await.unwrap().0, 5);
    let (mut sent, mut got) = (0u32, 0u32);
    while got < 10_000 {
        while sent < 10_000 && sent - got < 32 {
            client.send_to(&datagram(sent), b_at(7)).await.unwrap();
            sent += 1;
        }
        let (n, from) = client.recv_from(&mut buf).await.unwrap();
        assert_eq!(from, SocketAddr::V4(SocketAddrV4::new(B, 7)));
        assert!(buf[..n] == datagram(got)[..], "datagram {got}");
        got += 1;
    }
    echo.await.unwrap();
}
