//! The runtime's sockets behave as `std::net`'s do on Linux: two runtimes over the
//! in-memory pipe, application code on ordinary threads.

mod runtime_support;

use ackclock::runtime::{TcpListener, TcpStream};
use runtime_support::{b_at, pair, pattern, A};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// Wait (by polling, with a generous bound) until `cond` holds: only to line up a test's
/// steps with the other runtime's progress, never as an assertion about time.
fn eventually(mut cond: impl FnMut() -> bool) {
    for _ in 0..20_000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the condition never held");
}

#[test]
fn echo() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(7)).unwrap();
    let stream = TcpStream::connect(&a, b_at(7)).unwrap();
    let server = std::thread::scope(|s| {
        let server = s.spawn(|| {
            let (stream, peer) = listener.accept().unwrap();
            assert_eq!(peer.ip(), core::net::IpAddr::V4(A));
            std::io::copy(&mut &stream, &mut &stream).unwrap()
        });
        assert_eq!(stream.peer_addr().unwrap(), SocketAddr::V4(b_at(7)));
        assert_eq!(stream.local_addr().unwrap().ip(), core::net::IpAddr::V4(A));
        let mut sent = vec![0u8; 300_000];
        pattern(0, &mut sent);
        let stream = &stream;
        s.spawn(move || {
            let mut w = stream;
            w.write_all(&sent).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        let mut r = stream;
        r.read_to_end(&mut got).unwrap();
        let mut want = vec![0u8; 300_000];
        pattern(0, &mut want);
        assert!(got == want, "echoed {} bytes, not byte-exact", got.len());
        server.join().unwrap()
    });
    assert_eq!(server, 300_000);
}

/// The blocking `read_bufs`: segments moved out with their buffers, a thread writing 4 MB
/// on the other runtime; byte-exact, then end of stream after the writer's shutdown.
#[test]
fn read_bufs_moves_the_segments_byte_exact() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    let mut data = vec![0u8; 4 << 20];
    pattern(0, &mut data);
    let mut stream = TcpStream::connect(&a, b_at(9)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            stream.write_all(&data).unwrap();
            stream.shutdown(Shutdown::Write).unwrap();
        });
        let (server, _) = listener.accept().unwrap();
        let (mut got, mut segs) = (Vec::new(), Vec::new());
        while server.read_bufs(64 * 1024, &mut segs).unwrap() > 0 {
            for seg in segs.drain(..) {
                got.extend_from_slice(seg.data());
            }
        }
        assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
    });
}

/// The blocking `write_with`: a reader (here a cursor over 4 MB, as a file or a socket
/// would be) read straight into the send queue, waiting for room as `write` does;
/// byte-exact at the other runtime, and a fill that writes nothing queues nothing.
#[test]
fn write_with_reads_a_source_into_the_send_queue() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    let mut data = vec![0u8; 4 << 20];
    pattern(0, &mut data);
    let stream = TcpStream::connect(&a, b_at(9)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(stream.write_with(|_| 0).unwrap(), 0);
            let mut source = std::io::Cursor::new(&data[..]);
            let mut total = 0;
            loop {
                let n = stream.write_with(|space| source.read(space).unwrap()).unwrap();
                if n == 0 {
                    break;
                }
                total += n;
            }
            assert_eq!(total, data.len());
            stream.shutdown(Shutdown::Write).unwrap();
        });
        let (mut server, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
    });
}

/// RFC 9293 §3.6: after a half-close the other direction still carries data; read returns
/// 0 after the peer's FIN (std's end of stream).
#[test]
fn half_close() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let (mut stream, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            stream.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"request");
            assert_eq!(stream.read(&mut [0; 8]).unwrap(), 0, "end of stream stays");
            stream.write_all(b"reply after the FIN").unwrap();
        });
        let mut stream = TcpStream::connect(&a, b_at(9)).unwrap();
        stream.write_all(b"request").unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"reply after the FIN");
    });
}

/// RFC 9293 §3.10.7.4: a RST aborts the connection. As on Linux, the first write after it
/// fails with ConnectionReset (the socket's error, consumed) and the next with BrokenPipe.
#[test]
fn write_after_reset_gives_reset_then_broken_pipe() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(80)).unwrap();
    let mut client = TcpStream::connect(&a, b_at(80)).unwrap();
    let (server, _) = listener.accept().unwrap();
    client.write_all(b"never read").unwrap();
    // Unread data: closing resets (RFC 9293 §3.10.4, as Linux does).
    eventually(|| server.tcp_info().unwrap().stats.bytes_received == 10);
    drop(server);
    eventually(|| client.tcp_info().unwrap().state == ackclock::tcp::State::Closed);
    assert_eq!(client.write(b"x").unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(client.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
    assert_eq!(client.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
}

/// `SO_LINGER` with a zero timeout (`set_zero_linger`): dropping the stream aborts the
/// connection with an RST (RFC 9293 §3.10.4, ABORT) where a plain drop, with everything read,
/// closes it behind the queued data with a FIN. The peer's read tells the two apart: end of
/// stream, or ConnectionReset.
#[test]
fn zero_linger_resets_on_drop() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(81)).unwrap();
    let mut got = [0; 4];
    // A plain drop after reading everything: the client reads end of stream.
    let mut client = TcpStream::connect(&a, b_at(81)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    client.write_all(b"ping").unwrap();
    server.read_exact(&mut got).unwrap();
    drop(server);
    assert_eq!(client.read(&mut [0; 8]).unwrap(), 0);
    // The same with zero linger: the client's read fails with ConnectionReset.
    let mut client = TcpStream::connect(&a, b_at(81)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    client.write_all(b"ping").unwrap();
    server.read_exact(&mut got).unwrap();
    server.set_zero_linger().unwrap();
    drop(server);
    assert_eq!(client.read(&mut [0; 8]).unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(client.tcp_info().unwrap().state, ackclock::tcp::State::Closed);
}

/// RFC 9293 §3.10.7.1: a SYN to a port nobody listens on is answered with RST, which
/// std reports as ConnectionRefused.
#[test]
fn connect_to_closed_port_is_refused() {
    let (a, _b) = pair();
    let e = TcpStream::connect(&a, b_at(4242)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    // The failed attempt released its slot: a new connection works.
    let listener = TcpListener::bind(&_b, b_at(4242)).unwrap();
    let _c = TcpStream::connect(&a, b_at(4242)).unwrap();
    listener.accept().unwrap();
}

/// With a read timeout and nothing to read, read fails with WouldBlock (what Linux's
/// SO_RCVTIMEO gives; std documents WouldBlock or TimedOut), and the stream stays usable.
#[test]
fn read_timeout_gives_would_block() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(13)).unwrap();
    let mut client = TcpStream::connect(&a, b_at(13)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    client.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
    assert_eq!(client.read_timeout().unwrap(), Some(Duration::from_millis(30)));
    let e = client.read(&mut [0; 16]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{e:?}");
    server.write_all(b"late").unwrap();
    let mut got = [0; 4];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"late");
    // Non-blocking: WouldBlock at once.
    client.set_read_timeout(None).unwrap();
    client.set_nonblocking(true).unwrap();
    assert_eq!(client.read(&mut [0; 16]).unwrap_err().kind(), ErrorKind::WouldBlock);
}

/// Dropping a runtime while threads are blocked in read and in write wakes each with an
/// error (never a hang), and the sockets fail the same way afterwards.
#[test]
fn dropping_the_runtime_wakes_blocked_threads() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(19)).unwrap();
    let client = TcpStream::connect(&a, b_at(19)).unwrap();
    let (server, _) = listener.accept().unwrap();
    let (reader_err, writer_err) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut buf = [0u8; 64];
            loop {
                match (&server).read(&mut buf) {
                    Ok(0) => return None,
                    Ok(_) => continue,
                    Err(e) => return Some(e.kind()),
                }
            }
        });
        let writer = s.spawn(|| {
            // The client never reads: its window closes and this write blocks.
            let chunk = [7u8; 65536];
            loop {
                if let Err(e) = (&server).write(&chunk) {
                    return e.kind();
                }
            }
        });
        // Until the writer is blocked (the client's window is full).
        eventually(|| client.tcp_info().unwrap().rcv_wnd == 0);
        std::thread::sleep(Duration::from_millis(20));
        drop(b);
        (reader.join().unwrap(), writer.join().unwrap())
    });
    assert_eq!(reader_err, Some(ErrorKind::ConnectionAborted));
    assert_eq!(writer_err, ErrorKind::ConnectionAborted);
    assert_eq!((&server).write(b"x").unwrap_err().kind(), ErrorKind::ConnectionAborted);
    assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::ConnectionAborted);
    drop(a);
}

/// Bad input gets a typed error, never a panic.
#[test]
fn bad_input_gives_typed_errors() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(21)).unwrap();
    assert_eq!(TcpListener::bind(&b, b_at(21)).unwrap_err().kind(), ErrorKind::AddrInUse);
    assert_eq!(TcpListener::bind(&b, b_at(0)).unwrap_err().kind(), ErrorKind::InvalidInput);
    let unspecified = SocketAddrV4::new(core::net::Ipv4Addr::UNSPECIFIED, 21);
    assert_eq!(TcpStream::connect(&a, unspecified).unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(TcpStream::connect(&a, b_at(0)).unwrap_err().kind(), ErrorKind::InvalidInput);

    let mut client = TcpStream::connect(&a, b_at(21)).unwrap();
    let (_server, _) = listener.accept().unwrap();
    assert_eq!(client.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(client.set_write_timeout(Some(Duration::ZERO)).unwrap_err().kind(), ErrorKind::InvalidInput);
    client.set_nodelay(true).unwrap();
    assert!(client.nodelay().unwrap());
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(client.write(b"after shutdown").unwrap_err().kind(), ErrorKind::BrokenPipe);
    client.shutdown(Shutdown::Read).unwrap();
    assert_eq!(client.read(&mut [0; 4]).unwrap(), 0, "reads after shutdown(Read) see end of stream");

    // A handle whose runtime is gone.
    drop(a);
    assert_eq!(client.set_nodelay(false).unwrap_err().kind(), ErrorKind::ConnectionAborted);
    assert_eq!(client.peer_addr().unwrap_err().kind(), ErrorKind::ConnectionAborted);
}

/// Per-stream keep-alive and user timeout (`SO_KEEPALIVE` with `TCP_KEEPIDLE`/`INTVL`/`CNT`,
/// `TCP_USER_TIMEOUT`): set and read back, zero values refused, and the probes go out on an
/// idle connection (RFC 1122 §4.2.3.6) and are answered, so it stays up.
#[test]
fn keepalive_and_user_timeout_per_stream() {
    use ackclock::tcp::{KeepAlive, State};
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(29)).unwrap();
    let client = TcpStream::connect(&a, b_at(29)).unwrap();
    let (server, _) = listener.accept().unwrap();
    assert_eq!((client.keepalive().unwrap(), client.user_timeout().unwrap()), (None, None));
    let ka = KeepAlive { idle: Duration::from_millis(30), interval: Duration::from_millis(30), count: 3 };
    for bad in [KeepAlive { idle: Duration::ZERO, ..ka }, KeepAlive { count: 0, ..ka }] {
        assert_eq!(client.set_keepalive(Some(bad)).unwrap_err().kind(), ErrorKind::InvalidInput);
    }
    assert_eq!(client.set_user_timeout(Some(Duration::ZERO)).unwrap_err().kind(), ErrorKind::InvalidInput);
    client.set_user_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(client.user_timeout().unwrap(), Some(Duration::from_secs(5)));
    let before = server.tcp_info().unwrap().stats.segs_in;
    client.set_keepalive(Some(ka)).unwrap();
    assert_eq!(client.keepalive().unwrap(), Some(ka));
    // Nothing is written: what reaches the server now are probes, and it answers them.
    eventually(|| server.tcp_info().unwrap().stats.segs_in >= before + 3);
    assert_eq!(client.tcp_info().unwrap().state, State::Established);
    client.set_keepalive(None).unwrap();
    assert_eq!(client.keepalive().unwrap(), None);
}

/// `shutdown_linger` lets a dropped stream's queued data and FIN arrive (RFC 9293 §3.6:
/// the close completes once the FIN is acknowledged), where `shutdown` would reset it; the
/// device comes back afterwards, of its own type only.
#[test]
fn shutdown_linger_lets_the_close_finish_and_gives_the_device_back() {
    let (mut a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(25)).unwrap();
    let mut client = TcpStream::connect(&a, b_at(25)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    assert!(a.take_device::<ackclock::phy::PipeEnd>().is_none(), "not while it runs");
    let mut sent = vec![0u8; 600_000];
    pattern(3, &mut sent);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        // Then the server closes too, which completes the client's close.
        server.read_to_end(&mut got).map(|_| got)
    });
    // More than the send buffer: part of it is still queued when the stream is dropped.
    client.write_all(&sent).unwrap();
    drop(client);
    assert!(a.shutdown_linger(Duration::from_secs(20)), "the close finished in time");
    let got = reader.join().unwrap().expect("end of stream, not a reset");
    assert!(got == sent, "{} bytes arrived, not byte-exact", got.len());
    assert!(a.take_device::<ackclock::phy::Tap>().is_none(), "another type");
    let dev = a.take_device::<ackclock::phy::PipeEnd>().expect("the pipe's end");
    assert!(ackclock::phy::Device::stats(&dev).tx_frames > 400, "{:?}", ackclock::phy::Device::stats(&dev));
    assert!(a.take_device::<ackclock::phy::PipeEnd>().is_none(), "taken once");
    assert!(!a.shutdown_linger(Duration::from_secs(1)), "stopped already");
}

/// A close the peer never completes (it does not close its side: FIN-WAIT-2) is waited for
/// only `linger`; then shutdown resets it.
#[test]
fn shutdown_linger_gives_up_after_the_linger() {
    let (mut a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(26)).unwrap();
    let client = TcpStream::connect(&a, b_at(26)).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    drop(client);
    assert_eq!(server.read(&mut [0; 4]).unwrap(), 0, "the FIN arrived");
    assert!(!a.shutdown_linger(Duration::from_millis(50)), "the server never closed");
    eventually(|| server.tcp_info().unwrap().state == ackclock::tcp::State::Closed);
    assert_eq!(server.write(b"x").unwrap_err().kind(), ErrorKind::ConnectionReset);
}

/// `connect_timeout` as std's: `TimedOut` when nothing answers in time (here nobody owns
/// the address, so ARP is never answered), and `InvalidInput` for a zero timeout.
#[test]
fn connect_timeout_times_out() {
    let (a, _b) = pair();
    let nobody = SocketAddrV4::new(core::net::Ipv4Addr::new(10, 0, 0, 99), 80);
    let e = TcpStream::connect_timeout(&a, nobody, Duration::from_millis(100)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert_eq!(TcpStream::connect_timeout(&a, nobody, Duration::ZERO).unwrap_err().kind(), ErrorKind::InvalidInput);
    // The attempt was closed: the stack holds no connection.
    eventually(|| a.with_stack(|s| s.tcp().connections()) == 0);
    let listener = TcpListener::bind(&_b, b_at(27)).unwrap();
    let _c = TcpStream::connect_timeout(&a, b_at(27), Duration::from_secs(10)).unwrap();
    listener.accept().unwrap();
}

/// std's `TcpStream::peek`: it waits for bytes as `read` does, returns them without taking
/// them (twice the same), and the read after gets them all; then the stream goes on.
#[test]
fn peek_waits_then_leaves_the_bytes_for_read() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(11)).unwrap();
    let client = TcpStream::connect(&a, b_at(11)).unwrap();
    let (server, _) = listener.accept().unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            (&client).write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        });
        let mut buf = [0u8; 3];
        assert_eq!(server.peek(&mut buf).unwrap(), 3, "waits for the first bytes");
        assert_eq!(&buf, b"GET");
        assert_eq!(server.peek(&mut buf).unwrap(), 3);
        assert_eq!(&buf, b"GET", "still there");
        writer.join().unwrap();
    });
    let mut line = [0u8; 18];
    (&server).read_exact(&mut line).unwrap();
    assert_eq!(&line, b"GET / HTTP/1.1\r\n\r\n");
    (&client).write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    (&server).read_exact(&mut one).unwrap();
    assert_eq!(&one, b"x");
}
