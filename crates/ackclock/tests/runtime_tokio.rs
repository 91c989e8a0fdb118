//! The tokio adapter (`ackclock::runtime::tokio`): async streams and listeners on two
//! runtimes joined by the in-memory pipe, spliced to host sockets with
//! `tokio::io::copy_bidirectional` in both half-close orders.

#![cfg(target_os = "linux")]

mod runtime_support;

use ackclock::runtime::tokio::{TcpListener, TcpStream};
use runtime_support::{b_at, pair, pattern};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

fn patterned(offset: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    pattern(offset, &mut v);
    v
}

/// An echo server task on `b`, a client task on `a`: 4 MB written and shut down, 4 MB read
/// back byte-exact, then end of stream (the server's FIN after its echo).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_echo_round_trip_with_half_close() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(7)).unwrap();
    let server = async {
        let (stream, peer) = listener.accept().await.unwrap();
        assert_eq!(peer.ip(), std::net::IpAddr::V4(runtime_support::A));
        let (mut r, mut w) = tokio::io::split(stream);
        let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
        w.shutdown().await.unwrap();
        n
    };
    let data = patterned(0, 4 << 20);
    let client = async {
        let s = TcpStream::connect(&a, b_at(7)).await.unwrap();
        assert_eq!(s.peer_addr().unwrap(), std::net::SocketAddr::V4(b_at(7)));
        let (mut r, mut w) = tokio::io::split(s);
        let writer = async {
            w.write_all(&data).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let reader = async {
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            back
        };
        let ((), back) = tokio::join!(writer, reader);
        back
    };
    let (echoed, back) = tokio::join!(server, client);
    assert_eq!(echoed, data.len() as u64);
    assert!(back == data, "echo differs");
}

/// `read_bufs`: the received segments themselves, moved out with their buffers (no copy),
/// at most `max` bytes a call unless one segment is more: 4 MB arrive byte-exact and in
/// order, then end of stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_bufs_moves_the_segments_byte_exact() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    let data = patterned(0, 4 << 20);
    let server = async {
        let (s, _) = listener.accept().await.unwrap();
        let (mut got, mut segs, mut calls) = (Vec::with_capacity(data.len()), Vec::new(), 0);
        loop {
            let n = s.read_bufs(16 * 1024, &mut segs).await.unwrap();
            if n == 0 {
                assert!(segs.is_empty());
                return (got, calls);
            }
            calls += 1;
            assert_eq!(segs.iter().map(|s| s.len()).sum::<usize>(), n);
            assert!(n <= 16 * 1024 || segs.len() == 1, "{n} bytes in {} segments", segs.len());
            for seg in segs.drain(..) {
                got.extend_from_slice(seg.data());
            }
        }
    };
    let client = async {
        let mut s = TcpStream::connect(&a, b_at(9)).await.unwrap();
        s.write_all(&data).await.unwrap();
        s.shutdown().await.unwrap();
    };
    let ((got, calls), ()) = tokio::join!(server, client);
    assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
    assert!(calls >= data.len() / (16 * 1024), "{calls} calls");
}

/// `try_write_with`: bytes written straight into the send queue by a fill, in pieces of
/// whatever size the fill chooses: 4 MB arrive byte-exact; a fill that writes nothing
/// queues nothing; with the send buffer full, `WouldBlock` without calling the fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_write_with_queues_what_the_fill_writes() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(9)).unwrap();
    let data = patterned(0, 4 << 20);
    let server = async {
        let (mut s, _) = listener.accept().await.unwrap();
        // Stall until the client has seen a full send buffer, then read everything.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mut got = Vec::with_capacity(data.len());
        s.read_to_end(&mut got).await.unwrap();
        got
    };
    let client = async {
        let s = TcpStream::connect(&a, b_at(9)).await.unwrap();
        assert_eq!(s.try_write_with(|_| 0).unwrap(), 0, "a fill that writes nothing");
        let (mut at, mut would_block, mut largest) = (0, 0, 0);
        while at < data.len() {
            // At most 1000 bytes a call to the fill: it is called again while it fills
            // what it is given.
            let mut calls = 0;
            match s.try_write_with(|space| {
                calls += 1;
                let n = space.len().min(1000).min(data.len() - at);
                space[..n].copy_from_slice(&data[at..at + n]);
                at += n;
                n
            }) {
                Ok(n) => {
                    assert!(n > 0 && calls > 0);
                    largest = largest.max(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    assert_eq!(calls, 0, "no room: the fill is not called");
                    would_block += 1;
                    s.writable().await.unwrap();
                }
                Err(e) => panic!("try_write_with: {e}"),
            }
        }
        let mut s = s;
        s.shutdown().await.unwrap();
        assert!(would_block > 0, "the send buffer never filled");
        assert!(largest > 1000, "the fill was never called again within one call");
    };
    let (got, ()) = tokio::join!(server, client);
    assert!(got == data, "bytes differ ({} of {})", got.len(), data.len());
}

#[tokio::test(flavor = "current_thread")]
async fn connect_to_a_closed_port_is_refused() {
    let (a, _b) = pair();
    let e = TcpStream::connect(&a, b_at(9)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
}

/// What the host side of the splice does.
#[derive(Clone, Copy)]
enum Host {
    /// Read the request to end of stream, then answer and close (the client closes first).
    AnswerAfterEof,
    /// Answer at once and close its write side, then read the request to end of stream
    /// (an HTTP/1.0 response ended by close, while the client still sends).
    AnswerFirst,
}

const REQUEST: usize = 300_000;
const RESPONSE: usize = 700_000;

/// A client on runtime `a` talks to `b`, where a task splices each accepted stream to a host
/// socket on 127.0.0.1 with `copy_bidirectional`; the host echoes back what `host` says.
/// Both directions must arrive whole, each ended by its own FIN.
async fn splice(host: Host) {
    let (a, b) = pair();
    let host_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_addr = host_listener.local_addr().unwrap();
    let host_task = tokio::spawn(async move {
        let (mut s, _) = host_listener.accept().await.unwrap();
        let response = patterned(7, RESPONSE);
        let mut request = Vec::new();
        match host {
            Host::AnswerAfterEof => {
                s.read_to_end(&mut request).await.unwrap();
                s.write_all(&response).await.unwrap();
                s.shutdown().await.unwrap();
            }
            Host::AnswerFirst => {
                s.write_all(&response).await.unwrap();
                s.shutdown().await.unwrap();
                s.read_to_end(&mut request).await.unwrap();
            }
        }
        request
    });
    let listener = TcpListener::bind(&b, b_at(80)).unwrap();
    let proxy = tokio::spawn(async move {
        let (mut inside, _) = listener.accept().await.unwrap();
        let mut outside = tokio::net::TcpStream::connect(host_addr).await.unwrap();
        tokio::io::copy_bidirectional(&mut inside, &mut outside).await.unwrap()
    });

    let mut c = TcpStream::connect(&a, b_at(80)).await.unwrap();
    let request = patterned(3, REQUEST);
    let mut response = Vec::new();
    match host {
        Host::AnswerAfterEof => {
            c.write_all(&request).await.unwrap();
            c.shutdown().await.unwrap();
            c.read_to_end(&mut response).await.unwrap();
        }
        Host::AnswerFirst => {
            // The whole response and its end of stream arrive before we send a byte.
            c.read_to_end(&mut response).await.unwrap();
            c.write_all(&request).await.unwrap();
            c.shutdown().await.unwrap();
        }
    }
    assert!(response == patterned(7, RESPONSE), "response differs ({} bytes)", response.len());
    let got = host_task.await.unwrap();
    assert!(got == request, "request differs ({} bytes)", got.len());
    assert_eq!(proxy.await.unwrap(), (REQUEST as u64, RESPONSE as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_bidirectional_when_the_client_half_closes_first() {
    splice(Host::AnswerAfterEof).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_bidirectional_when_the_server_half_closes_first() {
    splice(Host::AnswerFirst).await;
}

struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The protocol thread wakes a waiting task only when its socket's readiness changes: a
/// read pending on an idle connection is not woken by the rounds another connection's
/// 8 MB transfer causes, and is woken once when its own data arrives.
#[test]
fn a_pending_read_is_woken_only_by_its_own_readiness() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(5)).unwrap();
    let (mut idle_client, mut idle, mut busy_client, mut busy) = rt.block_on(async {
        let ic = TcpStream::connect(&a, b_at(5)).await.unwrap();
        let (is, _) = listener.accept().await.unwrap();
        let bc = TcpStream::connect(&a, b_at(5)).await.unwrap();
        let (bs, _) = listener.accept().await.unwrap();
        (ic, is, bc, bs)
    });

    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    let mut cx = Context::from_waker(&waker);
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    assert!(std::pin::Pin::new(&mut idle).poll_read(&mut cx, &mut buf).is_pending());

    let rounds_before = b.stats().rounds;
    rt.block_on(async {
        let data = patterned(0, 8 << 20);
        let send = async {
            busy_client.write_all(&data).await.unwrap();
            busy_client.shutdown().await.unwrap();
        };
        let recv = async {
            let mut got = Vec::new();
            busy.read_to_end(&mut got).await.unwrap();
            got.len()
        };
        let ((), n) = tokio::join!(send, recv);
        assert_eq!(n, data.len());
    });
    let rounds = b.stats().rounds - rounds_before;
    assert!(rounds > 100, "the transfer took {rounds} rounds");
    assert_eq!(counter.0.load(Ordering::SeqCst), 0, "woken by {rounds} rounds of another connection");

    rt.block_on(async { idle_client.write_all(b"x").await.unwrap() });
    for _ in 0..10_000 {
        if counter.0.load(Ordering::SeqCst) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counter.0.load(Ordering::SeqCst), 1, "woken once by its own data");
    let mut buf = ReadBuf::new(&mut byte);
    assert!(matches!(std::pin::Pin::new(&mut idle).poll_read(&mut cx, &mut buf), Poll::Ready(Ok(()))));
    assert_eq!(buf.filled(), b"x");
    // More rounds (the other connection's teardown) do not wake it again.
    drop((busy, busy_client));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
}

/// Readiness without a buffer (`readable`/`writable`) and reads and writes that never wait
/// (`try_read`/`try_write`), as tokio's `TcpStream` has them: a read waits until data is
/// there, then end of stream after the peer's FIN; a writer that filled the send buffer
/// and the peer's window waits until the peer reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_and_try_calls() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(11)).unwrap();
    let client = TcpStream::connect(&a, b_at(11)).await.unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let mut buf = vec![0u8; 1 << 16];
    // Nothing to read: try_read would block, readable does not resolve.
    assert_eq!(server.try_read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert!(tokio::time::timeout(Duration::from_millis(50), server.readable()).await.is_err());
    // Data: readable resolves, try_read takes it.
    let readable = async {
        server.readable().await.unwrap();
        server.try_read(&mut buf).unwrap()
    };
    let (n, ()) = tokio::join!(readable, async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(client.try_write(b"hello").unwrap(), 5);
    });
    assert_eq!(&buf[..n], b"hello");
    // The client's FIN: readable resolves with end of stream to read.
    let mut client = client;
    client.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.readable()).await.unwrap().unwrap();
    assert_eq!(server.try_read(&mut buf).unwrap(), 0);
    // The server writes until nothing fits (the client does not read): WouldBlock, and
    // writable waits until the client reads.
    let chunk = patterned(0, 1 << 16);
    let mut written = 0usize;
    loop {
        match server.try_write(&chunk) {
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                // Nothing fits now; wait a moment in case frames are in flight.
                if tokio::time::timeout(Duration::from_millis(100), server.writable()).await.is_err() {
                    break;
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(written > 0);
    let mut got = 0usize;
    let reader = async {
        while got < written {
            client.readable().await.unwrap();
            match client.try_read(&mut buf) {
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
    };
    let (_, ready) = tokio::join!(reader, tokio::time::timeout(Duration::from_secs(10), server.writable()));
    ready.expect("writable once the peer reads").unwrap();
    assert_eq!(got, written);
    let mut server = server;
    server.shutdown().await.unwrap();
}

/// tokio's `TcpStream::peek`: a proxy task looks at a connection's first bytes, waiting
/// for them, and the read after gets the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_then_read_gets_the_same_bytes() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(12)).unwrap();
    let client = async {
        let mut s = TcpStream::connect(&a, b_at(12)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        s.write_all(b"\x16\x03\x01 hello").await.unwrap();
        s
    };
    let server = async {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 3];
        assert_eq!(s.peek(&mut head).await.unwrap(), 3);
        assert_eq!(&head, b"\x16\x03\x01", "a TLS record header");
        let mut all = [0u8; 9];
        s.read_exact(&mut all).await.unwrap();
        assert_eq!(&all, b"\x16\x03\x01 hello");
    };
    let (_client, ()) = tokio::join!(client, server);
}

/// Keep-alive and the user timeout on a tokio stream: set, read back, and the probes keep
/// an idle connection up (the peer answers them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_and_user_timeout_on_a_tokio_stream() {
    use ackclock::tcp::KeepAlive;
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, b_at(31)).unwrap();
    let (client, accepted) = tokio::join!(TcpStream::connect(&a, b_at(31)), listener.accept());
    let (client, (server, _)) = (client.unwrap(), accepted.unwrap());
    let ka = KeepAlive { idle: Duration::from_millis(30), interval: Duration::from_millis(30), count: 3 };
    client.set_keepalive(Some(ka)).unwrap();
    client.set_user_timeout(Some(Duration::from_secs(3))).unwrap();
    assert_eq!((client.keepalive().unwrap(), client.user_timeout().unwrap()), (Some(ka), Some(Duration::from_secs(3))));
    let before = server.tcp_info().unwrap().stats.segs_in;
    // Only waits for the other runtime's progress (bounded), never a timing assertion.
    for _ in 0..20_000 {
        if server.tcp_info().unwrap().stats.segs_in >= before + 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(server.tcp_info().unwrap().stats.segs_in >= before + 3, "no probes arrived");
    assert_eq!(client.tcp_info().unwrap().state, ackclock::tcp::State::Established);
}
