//! `Stack::poll_event`: which connections and listeners need a look, without polling every
//! handle.

mod common;

use ackclock::time::Duration;
use ackclock::{Event, Shutdown, Stack};
use common::{Pair, B};
use std::net::SocketAddrV4;

fn drain(s: &mut Stack) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn a_listener_reports_an_accept_and_a_connection_its_data_once_per_look() {
    let mut p = Pair::new();
    let l = p.b.tcp_listen(SocketAddrV4::new(B, 80), 16).unwrap();
    let c = p.a.tcp_connect(SocketAddrV4::new(B, 80)).unwrap();
    // The handshake: the client's connection changes state (an event for the handle it
    // holds); the server's listener gains a connection to accept. The server's own
    // connection is not reported before it is accepted.
    assert!(p.run_until(Duration::from_secs(1), |p| p.a.tcp_readiness(c).unwrap().writable));
    for _ in 0..10 {
        p.step();
    }
    assert!(drain(&mut p.a).contains(&Event::Tcp(c)));
    assert_eq!(drain(&mut p.b), vec![Event::Accept(l)]);
    let s = p.b.tcp_accept(l).unwrap();
    assert_eq!(drain(&mut p.b), vec![], "nothing new since the last look");

    // Three segments of data (Nagle off, so none waits for an ACK): one event for the
    // receiving connection, however many arrived.
    let opts = p.a.tcp_options(c).unwrap();
    p.a.tcp_set_options(c, ackclock::socket::SocketOptions { nodelay: true, ..opts }).unwrap();
    for chunk in [&b"one"[..], b"two", b"three"] {
        p.a.tcp_send(c, chunk).unwrap();
        p.step();
    }
    for _ in 0..10 {
        p.step();
    }
    assert_eq!(drain(&mut p.b), vec![Event::Tcp(s)]);
    assert!(p.b.tcp_readiness(s).unwrap().readable);
    let mut buf = [0u8; 64];
    assert_eq!(p.b.tcp_recv(s, &mut buf).unwrap(), 11);

    // The peer's FIN is an event too; after close, the handle is no longer reported.
    p.a.tcp_shutdown(c, Shutdown::Write).unwrap();
    for _ in 0..10 {
        p.step();
    }
    assert_eq!(drain(&mut p.b), vec![Event::Tcp(s)]);
    assert!(p.b.tcp_readiness(s).unwrap().read_closed);
    p.b.tcp_close(s).unwrap();
    for _ in 0..10 {
        p.step();
    }
    assert_eq!(drain(&mut p.b), vec![], "a closed handle is never reported");
}

#[test]
fn an_idle_stack_reports_nothing_and_a_reset_is_reported() {
    let mut p = Pair::new();
    let (c, s) = p.connect(7);
    drain(&mut p.a);
    drain(&mut p.b);
    for _ in 0..100 {
        p.step();
    }
    assert_eq!(drain(&mut p.a), vec![]);
    assert_eq!(drain(&mut p.b), vec![]);
    p.b.tcp_abort(s).unwrap();
    for _ in 0..10 {
        p.step();
    }
    assert_eq!(drain(&mut p.a), vec![Event::Tcp(c)]);
    assert!(p.a.tcp_readiness(c).unwrap().error.is_some());
}
