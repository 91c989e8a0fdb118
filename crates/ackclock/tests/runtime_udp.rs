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

fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(v) => v,
        _ => unreachable!(),
    }
}

fn no_port_drops(rt: &ackclock::runtime::Runtime) -> u64 {
    rt.with_stack(|s| s.counters().dropped(ackclock::stats::DropReason::UdpNoPort))
}

/// std's connected sockets: `connect`, then `send` and `recv` without addresses, each end
/// connected to the other. A third socket's datagram to the connected port is not
/// received (the stack answers it as a closed port's); the peer's, sent after it, is. No
/// peer: `send` and `peer_addr` are NotConnected; a bad target is InvalidInput.
#[test]
fn blocking_connect_send_recv_and_a_third_party_filtered() {
    let (a, b) = pair();
    let server = UdpSocket::bind(&b, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 7)).unwrap();
    let client = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
    let third = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
    assert_eq!(client.send(b"x").unwrap_err().kind(), ErrorKind::NotConnected);
    assert_eq!(client.peer_addr().unwrap_err().kind(), ErrorKind::NotConnected);
    assert_eq!(client.connect(b_at(0)).unwrap_err().kind(), ErrorKind::InvalidInput);
    let client_addr = v4(client.local_addr().unwrap());
    client.connect(b_at(7)).unwrap();
    server.connect(client_addr).unwrap();
    assert_eq!(client.peer_addr().unwrap(), SocketAddr::V4(b_at(7)));
    assert_eq!(server.peer_addr().unwrap(), SocketAddr::V4(client_addr));
    assert_eq!(server.local_addr().unwrap(), SocketAddr::V4(b_at(7)), "bound to the stack's address");
    server.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    for i in 0..100u32 {
        let d = datagram(i);
        assert_eq!(client.send(&d[..d.len().min(64)]).unwrap(), d.len().min(64));
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], &d[..d.len().min(64)], "request {i}");
        assert_eq!(server.send(&buf[..n]).unwrap(), n);
        assert_eq!(client.recv(&mut buf).unwrap(), n, "reply {i}");
    }
    // The pipe and the stack keep order: the third party's datagram reaches the server
    // first, and is refused before the peer's is queued.
    third.send_to(b"intruder", b_at(7)).unwrap();
    client.send(b"peer").unwrap();
    let (n, from) = server.recv_from(&mut buf).unwrap();
    assert_eq!((&buf[..n], from), (&b"peer"[..], SocketAddr::V4(client_addr)));
    server.set_nonblocking(true).unwrap();
    assert_eq!(server.recv(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert_eq!(no_port_drops(&b), 1);
}

/// tokio's connected sockets: `connect().await`, `send`/`recv`, `poll_recv` through a
/// `ReadBuf`, and a third party's datagram filtered out, as in the blocking test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_connect_send_recv_and_a_third_party_filtered() {
    use ackclock::runtime::tokio::UdpSocket;
    let (a, b) = pair();
    let server = UdpSocket::bind(&b, b_at(7)).unwrap();
    let client = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
    let third = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
    assert_eq!(client.send(b"x").await.unwrap_err().kind(), ErrorKind::NotConnected);
    assert_eq!(client.peer_addr().unwrap_err().kind(), ErrorKind::NotConnected);
    assert_eq!(
        client.connect(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 7)).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let client_addr = v4(client.local_addr().unwrap());
    client.connect(b_at(7)).await.unwrap();
    server.connect(client_addr).await.unwrap();
    assert_eq!(client.peer_addr().unwrap(), SocketAddr::V4(b_at(7)));
    let echo = tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        for _ in 0..1001 {
            let n = server.recv(&mut buf).await.unwrap();
            server.send(&buf[..n]).await.unwrap();
        }
        server
    });
    let mut buf = vec![0u8; 2048];
    for i in 0..1000 {
        let d = datagram(i);
        assert_eq!(client.send(&d).await.unwrap(), d.len());
        let mut rb = tokio::io::ReadBuf::new(&mut buf);
        std::future::poll_fn(|cx| client.poll_recv(cx, &mut rb)).await.unwrap();
        assert!(rb.filled() == &d[..], "datagram {i}");
    }
    third.send_to(b"intruder", b_at(7)).await.unwrap();
    client.send(b"peer").await.unwrap();
    let n = client.recv(&mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"peer", "the echo of the peer's datagram, not the intruder's");
    let server = echo.await.unwrap();
    assert_eq!(no_port_drops(&b), 1);
    drop(server);
}
