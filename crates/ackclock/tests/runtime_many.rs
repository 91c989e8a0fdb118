//! Many connections on ordinary threads: 1,000 accepted connections, then 1,000 server
//! threads each echoing 1 MB byte-exact to 1,000 client threads, over two runtimes joined
//! by the in-memory pipe.

mod runtime_support;

use ackclock::buf::PoolConfig;
use ackclock::runtime::{RuntimeConfig, TcpListener, TcpStream};
use runtime_support::{b_at, pair_with, pattern};
use std::io::{Read, Write};

const CONNECTIONS: usize = 1000;
/// 1 MB each.
const BYTES: usize = 1 << 20;
const CHUNK: usize = 16 * 1024;

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "1,000 threads each echoing 1 MB take minutes in a debug build; scripts/test runs it in --release"
)]
fn thousand_connections_thousand_threads_echo_one_megabyte_each() {
    let (a, b) = pair_with(
        |c| {
            c.tcp.max_connections = 2 * CONNECTIONS;
            c.tcp.recv_buffer = 32 * 1024;
            c.tcp.send_buffer = 32 * 1024;
            c.pool = PoolConfig { buffers: 64 * 1024, ..Default::default() };
        },
        RuntimeConfig::default(),
    );
    let listener = TcpListener::bind(&b, b_at(7)).unwrap();
    let clients: Vec<TcpStream> = (0..CONNECTIONS).map(|_| TcpStream::connect(&a, b_at(7)).unwrap()).collect();
    let servers: Vec<TcpStream> = (0..CONNECTIONS).map(|_| listener.accept().unwrap().0).collect();
    let thread = || std::thread::Builder::new().stack_size(256 * 1024);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for server in &servers {
            handles.push(
                thread()
                    .spawn_scoped(s, move || {
                        let mut buf = vec![0u8; CHUNK];
                        loop {
                            let n = (&*server).read(&mut buf).unwrap();
                            if n == 0 {
                                break;
                            }
                            (&*server).write_all(&buf[..n]).unwrap();
                        }
                        // The client's FIN: echo it.
                        server.shutdown(std::net::Shutdown::Write).unwrap();
                    })
                    .unwrap(),
            );
        }
        for (i, client) in clients.iter().enumerate() {
            handles.push(
                thread()
                    .spawn_scoped(s, move || {
                        // Chunk by chunk: write one, read its echo back, so neither side's
                        // buffers can fill up with nobody reading.
                        let (mut out, mut back, mut want) = (vec![0u8; CHUNK], vec![0u8; CHUNK], vec![0u8; CHUNK]);
                        let mut off = 0;
                        while off < BYTES {
                            let n = CHUNK.min(BYTES - off);
                            pattern((off + i) as u64, &mut out[..n]);
                            (&*client).write_all(&out[..n]).unwrap();
                            (&*client).read_exact(&mut back[..n]).unwrap();
                            pattern((off + i) as u64, &mut want[..n]);
                            assert!(back[..n] == want[..n], "connection {i}: bytes {off}.. differ");
                            off += n;
                        }
                        client.shutdown(std::net::Shutdown::Write).unwrap();
                        assert_eq!((&*client).read(&mut back).unwrap(), 0, "connection {i}: the echo ends with ours");
                    })
                    .unwrap(),
            );
        }
        for h in handles {
            h.join().unwrap();
        }
    });
    eprintln!(
        "client stack: {:?}\nserver stack: {:?}",
        a.with_stack(|s| *s.counters()),
        b.with_stack(|s| *s.counters())
    );
    let stats = b.with_stack(|s| *s.counters());
    assert_eq!(stats.passive_opens, CONNECTIONS as u64);
}
