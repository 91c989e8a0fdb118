//! The runtime's streams against what a std::net / tokio::net user on Linux relies on. Two
//! runtimes over the in-memory pipe; every test body runs under a deadline so that a hang
//! fails instead of blocking the suite.
#![cfg(target_os = "linux")]

mod runtime_support;

use ackclock::runtime::{TcpListener, TcpStream, UdpSocket};
use runtime_support::{b_at, pair, pattern, A, B};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// Run `f` on a thread; fail if it has not finished within `secs`.
fn deadline<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => h.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(_) => unreachable!(),
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("hung: not finished within {secs} s"),
    }
}

fn eventually(mut cond: impl FnMut() -> bool) {
    for _ in 0..20_000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the condition never held");
}

fn connected(port: u16) -> (ackclock::runtime::Runtime, ackclock::runtime::Runtime, TcpStream, TcpStream, TcpListener) {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(port)).unwrap();
    let client = TcpStream::connect(&a, b_at(port)).unwrap();
    let (server, _) = listener.accept().unwrap();
    (a, b, client, server, listener)
}

// ---------------------------------------------------------------- EOF

/// after the peer's close, read gives the data,
/// then Ok(0) on every later call; read_to_end completes; addresses mirror each other.
#[test]
fn std_eof_is_sticky_after_peer_close() {
    deadline(30, || {
        let (_a, _b, mut client, mut server, _l) = connected(100);
        assert_eq!(client.local_addr().unwrap(), server.peer_addr().unwrap());
        assert_eq!(client.peer_addr().unwrap(), server.local_addr().unwrap());
        server.write_all(b"abc").unwrap();
        drop(server);
        let mut got = Vec::new();
        client.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"abc");
        for _ in 0..3 {
            assert_eq!(client.read(&mut [0; 16]).unwrap(), 0);
        }
        // After EOF our write side still works until the peer's RST (Linux: the first write
        // after the peer's close succeeds).
        client.write_all(b"x").unwrap();
    });
}

// ---------------------------------------------------------------- shutdown

/// Linux: shutdown(SHUT_RD) on an ESTABLISHED TCP socket does not touch the receive path
/// (tcp_shutdown only acts on SEND_SHUTDOWN; tcp_rcv_state_process resets on data only in
/// FIN-WAIT-1/2). The peer may keep sending and our write half keeps working: the reply we
/// write after shutdown(Read) reaches the peer and the connection is not reset.
#[test]
fn shutdown_read_keeps_the_write_half_working() {
    deadline(30, || {
        let (_a, _b, mut client, mut server, _l) = connected(101);
        server.shutdown(Shutdown::Read).unwrap();
        assert_eq!(server.read(&mut [0; 4]).unwrap(), 0);
        // The peer still sends (it does not know we stopped reading).
        client.write_all(b"more request").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // Our reply.
        let r = server.write_all(b"reply");
        assert!(r.is_ok(), "write after our own shutdown(Read) failed: {r:?}");
        server.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        let r = client.read_to_end(&mut got);
        assert!(r.is_ok(), "the peer's read failed: {r:?} (Linux: the reply and EOF)");
        assert_eq!(got, b"reply");
    });
}

/// shutdown(Both): the peer reads EOF; our read gives 0; our write BrokenPipe.
#[test]
fn shutdown_both() {
    deadline(30, || {
        let (_a, _b, mut client, mut server, _l) = connected(102);
        server.shutdown(Shutdown::Both).unwrap();
        assert_eq!(client.read(&mut [0; 4]).unwrap(), 0);
        assert_eq!(server.read(&mut [0; 4]).unwrap(), 0);
        assert_eq!(server.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
        // A second shutdown is fine on Linux while the connection is not CLOSED.
        server.shutdown(Shutdown::Write).unwrap();
    });
}

/// Linux: a thread blocked in read is woken by another thread's shutdown(Read) and gets 0.
#[test]
fn blocked_read_is_woken_by_own_shutdown_read() {
    deadline(30, || {
        let (_a, _b, _client, server, _l) = connected(103);
        std::thread::scope(|s| {
            let r = s.spawn(|| (&server).read(&mut [0; 16]));
            std::thread::sleep(Duration::from_millis(50));
            server.shutdown(Shutdown::Read).unwrap();
            assert_eq!(r.join().unwrap().unwrap(), 0);
        });
    });
}

/// Linux: a thread blocked in write (peer not reading) is woken by shutdown(Write) from
/// another thread and gets EPIPE (BrokenPipe).
#[test]
fn blocked_write_is_woken_by_own_shutdown_write() {
    deadline(30, || {
        let (_a, _b, client, server, _l) = connected(104);
        std::thread::scope(|s| {
            let w = s.spawn(|| {
                let chunk = [7u8; 65536];
                loop {
                    if let Err(e) = (&server).write(&chunk) {
                        return e.kind();
                    }
                }
            });
            eventually(|| client.tcp_info().unwrap().rcv_wnd == 0);
            std::thread::sleep(Duration::from_millis(50));
            server.shutdown(Shutdown::Write).unwrap();
            assert_eq!(w.join().unwrap(), ErrorKind::BrokenPipe);
        });
    });
}

// ---------------------------------------------------------------- reset

/// Linux: after the peer's RST the first read gives ECONNRESET, later ones 0.
#[test]
fn read_after_reset_is_reset_then_eof() {
    deadline(30, || {
        let (_a, _b, mut client, server, _l) = connected(105);
        server.set_zero_linger().unwrap();
        drop(server);
        assert_eq!(client.read(&mut [0; 8]).unwrap_err().kind(), ErrorKind::ConnectionReset);
        assert_eq!(client.read(&mut [0; 8]).unwrap(), 0);
        assert_eq!(client.write(b"x").unwrap_err().kind(), ErrorKind::BrokenPipe);
    });
}

/// Linux: writing to a peer that closed (its FIN came, it is an orphan) succeeds once, draws
/// an RST, and a later write fails (ECONNRESET, then EPIPE): a writer loop ends with an
/// error and never hangs.
#[test]
fn writing_to_a_closed_peer_ends_in_an_error() {
    deadline(30, || {
        let (_a, _b, mut client, server, _l) = connected(106);
        drop(server);
        assert_eq!(client.read(&mut [0; 8]).unwrap(), 0);
        let mut errs = Vec::new();
        for _ in 0..2000 {
            match client.write(b"hello") {
                Ok(n) => {
                    assert_eq!(n, 5, "a short write of five bytes");
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(e) => {
                    errs.push(e.kind());
                    if errs.len() == 2 {
                        break;
                    }
                }
            }
        }
        assert_eq!(errs, [ErrorKind::ConnectionReset, ErrorKind::BrokenPipe]);
    });
}

// ---------------------------------------------------------------- drop with unsent data

/// Linux close() without SO_LINGER: queued data still goes out, then the FIN; close does
/// not block. 3 MB queued (well past the send buffer: write_all returns once it is queued),
/// then drop.
#[test]
fn drop_with_unsent_data_delivers_it_then_fin() {
    deadline(60, || {
        let (_a, _b, client, mut server, _l) = connected(107);
        let mut data = vec![0u8; 3 << 20];
        pattern(5, &mut data);
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            server.read_to_end(&mut got).map(|_| got)
        });
        let mut c = client;
        c.write_all(&data).unwrap();
        drop(c);
        let got = reader.join().unwrap().expect("EOF, not an error");
        assert!(got == data, "{} of {} bytes", got.len(), data.len());
    });
}

// ---------------------------------------------------------------- timeouts, nonblocking

/// std: a write with a write timeout and no room fails with WouldBlock (EAGAIN on Linux);
/// in non-blocking mode at once. The stream stays usable.
#[test]
fn write_timeout_and_nonblocking_write() {
    deadline(30, || {
        let (_a, _b, mut client, server, _l) = connected(108);
        server.set_write_timeout(Some(Duration::from_millis(50))).unwrap();
        let chunk = [1u8; 65536];
        let mut written = 0usize;
        let kind = loop {
            match (&server).write(&chunk) {
                Ok(n) => written += n,
                Err(e) => break e.kind(),
            }
        };
        assert!(matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut), "{kind:?}");
        server.set_write_timeout(None).unwrap();
        server.set_nonblocking(true).unwrap();
        assert_eq!((&server).write(&chunk).unwrap_err().kind(), ErrorKind::WouldBlock);
        server.set_nonblocking(false).unwrap();
        let mut buf = vec![0u8; written];
        client.read_exact(&mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 1));
    });
}

// ---------------------------------------------------------------- accept

/// A connection whose peer sent data and its FIN before accept: accept hands it out, the
/// data reads, then EOF. The listener reports the address it was bound to.
#[test]
fn accept_after_peer_sent_data_and_fin() {
    deadline(30, || {
        let (a, b) = pair();
        let listener = TcpListener::bind(&b, b_at(109)).unwrap();
        assert_eq!(listener.local_addr().unwrap(), SocketAddr::V4(b_at(109)));
        let mut c = TcpStream::connect(&a, b_at(109)).unwrap();
        c.write_all(b"early").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let (mut s, peer) = listener.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"early");
        drop(s);
        assert_eq!(c.read(&mut [0; 4]).unwrap(), 0);
    });
}

/// A non-blocking listener: WouldBlock with nothing queued.
#[test]
fn nonblocking_accept() {
    deadline(30, || {
        let (_a, b) = pair();
        let listener = TcpListener::bind(&b, b_at(110)).unwrap();
        listener.set_nonblocking(true).unwrap();
        assert_eq!(listener.accept().unwrap_err().kind(), ErrorKind::WouldBlock);
    });
}

// ---------------------------------------------------------------- UDP

/// std on Linux: a datagram longer than the buffer is cut to it, the rest discarded; the
/// next recv gets the next datagram. An empty datagram is a datagram (Ok(0)).
#[test]
fn udp_truncation_and_empty_datagrams() {
    deadline(30, || {
        let (a, b) = pair();
        let server = UdpSocket::bind(&b, b_at(111)).unwrap();
        let client = UdpSocket::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
        server.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        client.send_to(&[9u8; 100], b_at(111)).unwrap();
        client.send_to(b"", b_at(111)).unwrap();
        client.send_to(b"tail", b_at(111)).unwrap();
        let mut buf = [0u8; 10];
        let (n, from) = server.recv_from(&mut buf).unwrap();
        assert_eq!((n, from), (10, client.local_addr().unwrap()));
        assert_eq!(buf, [9u8; 10]);
        assert_eq!(server.recv_from(&mut buf).unwrap().0, 0);
        let (n, _) = server.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"tail");
        let _ = B;
    });
}

// ---------------------------------------------------------------- tokio

mod tokio_side {
    use super::*;
    use ackclock::runtime::tokio::{TcpListener as ATcpListener, TcpStream as ATcpStream};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    /// tokio::net::TcpListener::accept may be awaited by several tasks at once (each waits on
    /// the listener's readiness; every waiter is woken). Two tasks each accept one connection,
    /// two clients connect: both tasks get one.
    #[test]
    fn concurrent_accepts_from_two_tasks() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = std::sync::Arc::new(ATcpListener::bind(&b, b_at(200)).unwrap());
                let t1 = tokio::spawn({
                    let l = listener.clone();
                    async move { l.accept().await.map(|(_, p)| p) }
                });
                let t2 = tokio::spawn({
                    let l = listener.clone();
                    async move { l.accept().await.map(|(_, p)| p) }
                });
                // Both tasks are waiting before anyone connects.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let c1 = ATcpStream::connect(&a, b_at(200)).await.unwrap();
                let c2 = ATcpStream::connect(&a, b_at(200)).await.unwrap();
                let both = tokio::time::timeout(Duration::from_secs(5), async {
                    (t1.await.unwrap().unwrap(), t2.await.unwrap().unwrap())
                })
                .await;
                let (p1, p2) = both.expect("one accepting task was never woken (lost wake-up)");
                let mut want = [c1.local_addr().unwrap(), c2.local_addr().unwrap()];
                let mut got = [p1, p2];
                want.sort();
                got.sort();
                assert_eq!(got, want);
            });
        });
    }

    /// tokio::net::TcpStream::readable may be awaited by several tasks at once; data wakes all.
    #[test]
    fn concurrent_readable_from_two_tasks() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(201)).unwrap();
                let mut client = ATcpStream::connect(&a, b_at(201)).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                let server = std::sync::Arc::new(server);
                let t1 = tokio::spawn({
                    let s = server.clone();
                    async move { s.readable().await }
                });
                let t2 = tokio::spawn({
                    let s = server.clone();
                    async move { s.readable().await }
                });
                tokio::time::sleep(Duration::from_millis(100)).await;
                client.write_all(b"x").await.unwrap();
                let both = tokio::time::timeout(Duration::from_secs(5), async {
                    t1.await.unwrap().unwrap();
                    t2.await.unwrap().unwrap();
                })
                .await;
                both.expect("one task awaiting readable() was never woken (lost wake-up)");
            });
        });
    }

    /// tokio::net::UdpSocket::recv_from may be awaited by several tasks sharing the socket
    /// (an `Arc<UdpSocket>` served by a pool of tasks, tokio's own example): each datagram
    /// wakes a waiter. Two tasks each receive one datagram; two datagrams are sent.
    #[test]
    fn concurrent_udp_recv_from_two_tasks() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                use ackclock::runtime::tokio::UdpSocket as AUdp;
                let server = std::sync::Arc::new(AUdp::bind(&b, b_at(206)).unwrap());
                let client = AUdp::bind(&a, SocketAddrV4::new(A, 0)).unwrap();
                let task = |s: std::sync::Arc<AUdp>| async move {
                    let mut buf = [0u8; 64];
                    s.recv_from(&mut buf).await.map(|(n, _)| buf[..n].to_vec())
                };
                let t1 = tokio::spawn(task(server.clone()));
                let t2 = tokio::spawn(task(server.clone()));
                tokio::time::sleep(Duration::from_millis(100)).await;
                client.send_to(b"one", b_at(206)).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
                client.send_to(b"two", b_at(206)).await.unwrap();
                let both = tokio::time::timeout(Duration::from_secs(5), async {
                    (t1.await.unwrap().unwrap(), t2.await.unwrap().unwrap())
                })
                .await;
                let (g1, g2) = both.expect("a task in recv_from was never woken; a datagram sits unread");
                let mut got = [g1, g2];
                got.sort();
                assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);
            });
        });
    }

    /// EOF via AsyncRead is sticky; read_to_end completes; poll_shutdown twice is
    /// fine (as tokio's on Linux); AsyncWrite after shutdown gives BrokenPipe; our read half
    /// still works after our shutdown.
    #[test]
    fn async_eof_shutdown_and_write_after_shutdown() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(202)).unwrap();
                let mut client = ATcpStream::connect(&a, b_at(202)).await.unwrap();
                let (mut server, _) = listener.accept().await.unwrap();
                client.write_all(b"req").await.unwrap();
                client.shutdown().await.unwrap();
                client.shutdown().await.unwrap();
                assert_eq!(client.write(b"x").await.unwrap_err().kind(), ErrorKind::BrokenPipe);
                let mut got = Vec::new();
                server.read_to_end(&mut got).await.unwrap();
                assert_eq!(got, b"req");
                assert_eq!(server.read(&mut [0; 4]).await.unwrap(), 0);
                assert_eq!(server.read(&mut [0; 4]).await.unwrap(), 0);
                server.write_all(b"resp").await.unwrap();
                drop(server);
                let mut got = Vec::new();
                client.read_to_end(&mut got).await.unwrap();
                assert_eq!(got, b"resp");
            });
        });
    }

    /// Cancellation safety (tokio documents read and accept as cancel safe): a read or
    /// accept future dropped while pending loses nothing.
    #[test]
    fn cancelled_read_and_accept_lose_nothing() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(203)).unwrap();
                assert!(tokio::time::timeout(Duration::from_millis(30), listener.accept()).await.is_err());
                let mut client = ATcpStream::connect(&a, b_at(203)).await.unwrap();
                let (mut server, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 16];
                assert!(tokio::time::timeout(Duration::from_millis(30), server.read(&mut buf)).await.is_err());
                client.write_all(b"after").await.unwrap();
                let n = tokio::time::timeout(Duration::from_secs(5), server.read(&mut buf)).await.unwrap().unwrap();
                assert_eq!(&buf[..n], b"after");
            });
        });
    }

    /// A reset seen through AsyncRead: ConnectionReset, then EOF; AsyncWrite then BrokenPipe.
    #[test]
    fn async_reset() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(204)).unwrap();
                let mut client = ATcpStream::connect(&a, b_at(204)).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                server.set_zero_linger().unwrap();
                drop(server);
                assert_eq!(client.read(&mut [0; 4]).await.unwrap_err().kind(), ErrorKind::ConnectionReset);
                assert_eq!(client.read(&mut [0; 4]).await.unwrap(), 0);
                assert_eq!(client.write(b"x").await.unwrap_err().kind(), ErrorKind::BrokenPipe);
            });
        });
    }

    /// Concurrent read and write tasks on split halves, both directions flowing and both
    /// blocking at times (the peer reads slowly): everything arrives.
    #[test]
    fn split_halves_bidirectional() {
        deadline(60, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(205)).unwrap();
                let client = ATcpStream::connect(&a, b_at(205)).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                let mut data = vec![0u8; 2 << 20];
                pattern(1, &mut data);
                let data = std::sync::Arc::new(data);
                let side = |s: ATcpStream, data: std::sync::Arc<Vec<u8>>| async move {
                    let (mut r, mut w) = tokio::io::split(s);
                    let wr = tokio::spawn(async move {
                        w.write_all(&data).await.unwrap();
                        w.shutdown().await.unwrap();
                        w
                    });
                    let mut got = Vec::new();
                    let mut buf = [0u8; 3000];
                    loop {
                        let n = r.read(&mut buf).await.unwrap();
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    let _w = wr.await.unwrap();
                    got
                };
                let (g1, g2) =
                    tokio::join!(tokio::spawn(side(client, data.clone())), tokio::spawn(side(server, data.clone())));
                assert!(g1.unwrap() == *data);
                assert!(g2.unwrap() == *data);
            });
        });
    }

    /// tokio's `into_split`: the owned halves move into two tasks, 1 MB each way; dropping
    /// the write half half-closes the connection (the peer reads the end of the stream) while
    /// the read half still reads; `reunite` gives the stream back from its own halves only.
    #[test]
    fn owned_halves_and_the_write_half_dropped() {
        deadline(60, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(206)).unwrap();
                let client = ATcpStream::connect(&a, b_at(206)).await.unwrap();
                let (server, _) = listener.accept().await.unwrap();
                let mut data = vec![0u8; 1 << 20];
                pattern(2, &mut data);
                let data = std::sync::Arc::new(data);
                let side = |s: ATcpStream, data: std::sync::Arc<Vec<u8>>| async move {
                    let (mut r, mut w) = s.into_split();
                    assert_eq!(r.peer_addr().unwrap(), w.peer_addr().unwrap());
                    // Written, then dropped: the FIN follows the data.
                    let wr = tokio::spawn(async move { w.write_all(&data).await.unwrap() });
                    let mut got = Vec::new();
                    r.read_to_end(&mut got).await.unwrap();
                    wr.await.unwrap();
                    got
                };
                let (g1, g2) =
                    tokio::join!(tokio::spawn(side(client, data.clone())), tokio::spawn(side(server, data.clone())));
                assert!(g1.unwrap() == *data);
                assert!(g2.unwrap() == *data);

                // Reuniting: two streams' halves are refused and given back; one stream's
                // are the stream again (no half-close on the way).
                let c1 = ATcpStream::connect(&a, b_at(206)).await.unwrap();
                let (mut s1, _) = listener.accept().await.unwrap();
                let c2 = ATcpStream::connect(&a, b_at(206)).await.unwrap();
                let (r1, w1) = c1.into_split();
                let (r2, w2) = c2.into_split();
                let err = r1.reunite(w2).expect_err("halves of two streams");
                let (r1, w2) = (err.0, err.1);
                let mut c1 = r1.reunite(w1).expect("one stream's halves");
                c1.write_all(b"still open").await.unwrap();
                let mut buf = [0u8; 10];
                s1.read_exact(&mut buf).await.unwrap();
                assert_eq!(&buf, b"still open");
                // `forget`: no half-close.
                w2.forget();
                drop(r2);
            });
        });
    }

    /// tokio's borrowing `split`: one task body reads and writes through the two halves at
    /// once; shutting the write half down half-closes, and dropping the halves does not.
    #[test]
    fn borrowed_halves() {
        deadline(30, || {
            let (a, b) = pair();
            let rt = rt();
            rt.block_on(async {
                let listener = ATcpListener::bind(&b, b_at(207)).unwrap();
                let mut client = ATcpStream::connect(&a, b_at(207)).await.unwrap();
                let (mut server, _) = listener.accept().await.unwrap();
                {
                    let (mut r, mut w) = server.split();
                    let echo = async {
                        let mut buf = [0u8; 5];
                        r.read_exact(&mut buf).await.unwrap();
                        w.write_all(&buf).await.unwrap();
                    };
                    let ask = async {
                        client.write_all(b"hello").await.unwrap();
                        let mut buf = [0u8; 5];
                        client.read_exact(&mut buf).await.unwrap();
                        buf
                    };
                    let ((), got) = tokio::join!(echo, ask);
                    assert_eq!(&got, b"hello");
                }
                // The halves are gone and the stream is open both ways.
                server.write_all(b"!").await.unwrap();
                let mut one = [0u8; 1];
                client.read_exact(&mut one).await.unwrap();
                let (_r, mut w) = server.split();
                w.shutdown().await.unwrap();
                let mut rest = Vec::new();
                client.read_to_end(&mut rest).await.unwrap();
                assert!(rest.is_empty());
            });
        });
    }
}

// ---------------------------------------------------------------- more std

/// A thread blocked in read, and one blocked in write (peer not reading), are woken by the
/// peer's RST with an error (one of them gets ConnectionReset, the other ConnectionReset or
/// BrokenPipe, as Linux's consumed socket error); neither hangs.
#[test]
fn blocked_reader_and_writer_woken_by_peer_reset() {
    deadline(30, || {
        let (_a, _b, client, server, _l) = connected(112);
        let (r, w) = std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut buf = [0u8; 64];
                loop {
                    match (&client).read(&mut buf) {
                        Ok(0) => return Ok(0),
                        Ok(_) => continue,
                        Err(e) => return Err(e.kind()),
                    }
                }
            });
            let w = s.spawn(|| {
                let chunk = [7u8; 65536];
                loop {
                    if let Err(e) = (&client).write(&chunk) {
                        return e.kind();
                    }
                }
            });
            eventually(|| server.tcp_info().unwrap().rcv_wnd == 0);
            std::thread::sleep(Duration::from_millis(50));
            server.set_zero_linger().unwrap();
            drop(server);
            (r.join().unwrap(), w.join().unwrap())
        });
        let kinds = [r.err(), Some(w)];
        assert!(kinds.contains(&Some(ErrorKind::ConnectionReset)), "{kinds:?}");
    });
}

/// Linux: listen(fd, 0) still accepts connections (the accept queue holds one: the full
/// test is `sk_ack_backlog > sk_max_ack_backlog`); std's TcpListener uses 128. A listener
/// made with backlog 0 must either refuse the argument or accept connections, not drop
/// every SYN for ever.
#[test]
fn backlog_zero_still_accepts_or_is_refused() {
    deadline(60, || {
        let (a, b) = pair();
        let listener = match TcpListener::bind_with_backlog(&b, b_at(113), 0) {
            Ok(l) => l,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::InvalidInput);
                return;
            }
        };
        let c = TcpStream::connect_timeout(&a, b_at(113), Duration::from_secs(10));
        assert!(c.is_ok(), "connect to a backlog-0 listener: {c:?}");
        listener.accept().unwrap();
    });
}

/// Backlog 1 and three clients at once, each sending a request: every connect completes
/// and every connection is accepted with its request (as on Linux, a client whose
/// handshake-completing ACK met a full accept queue gets in with its first data segment:
/// the SYN cookie is checked again on it, or the SYN-ACK is retransmitted).
#[test]
fn backlog_one_three_clients() {
    deadline(60, || {
        let (a, b) = pair();
        let listener = TcpListener::bind_with_backlog(&b, b_at(114), 1).unwrap();
        std::thread::scope(|s| {
            let clients: Vec<_> = (0..3)
                .map(|_| {
                    s.spawn(|| {
                        let mut c = TcpStream::connect(&a, b_at(114)).unwrap();
                        c.write_all(b"hi").unwrap();
                        let mut rest = Vec::new();
                        c.read_to_end(&mut rest).map(|_| rest)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_millis(100));
            for _ in 0..3 {
                let (mut st, _) = listener.accept().unwrap();
                let mut req = [0u8; 2];
                st.read_exact(&mut req).unwrap();
                assert_eq!(&req, b"hi");
            }
            for c in clients {
                assert_eq!(c.join().unwrap().unwrap(), b"");
            }
        });
    });
}
