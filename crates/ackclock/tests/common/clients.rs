//! Python clients that Linux runs against the stack in interop tests (the library's and the
//! CLI's, which include this file).

/// An echo client: `python3 -c ECHO_CLIENT HOST PORT N [CLIENTS [TIMEOUT]]` opens CLIENTS
/// connections at once (default 1); each sends N pseudo-random bytes (seeded 7, 8, ...)
/// while reading, half-closes, and reads to EOF. It prints, one line per connection, the
/// count it read and whether the bytes that came back are the bytes sent ("N True"), and
/// fails unless every connection got its own bytes back.
///
/// TIMEOUT (seconds, default 60) is the socket timeout. Python applies it to a whole
/// `sendall`, not to each wait for buffer space, so it bounds the time the N bytes take to
/// leave: a lossy path that moves 10 MB at 150 KB/s needs more than the default.
pub const ECHO_CLIENT: &str = r#"
import random, socket, sys, threading
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
clients = int(sys.argv[4]) if len(sys.argv) > 4 else 1
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 60
results = [None] * clients
def one(i):
    data = random.Random(7 + i).randbytes(n)
    s = socket.create_connection((host, port), timeout=timeout)
    def send():
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    got = bytearray()
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        got += b
    t.join()
    s.close()
    results[i] = (len(got), bytes(got) == data)
threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for r in results:
    print(*(r or (0, False)))
sys.exit(0 if all(r and r[1] for r in results) else 1)
"#;
