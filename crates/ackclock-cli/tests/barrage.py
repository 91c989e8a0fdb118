"""A crafted-frame barrage against a live echo connection, from the Linux side of a TAP.

Run inside the test's network namespace: python3 barrage.py STACK_ADDR IFACE

1. Connects to echo (7) on the stack, echoes 64 KB byte-exact, and learns the connection's
   sequence state from a sniffer on IFACE (the stack's MAC, its next sequence number and
   window, the next sequence number it expects).
2. Prints "ready" and waits for a line on stdin (the test takes the stack's counters).
3. Sends the barrage, frame by frame, from an AF_PACKET socket on IFACE (so Linux's own TCP
   never sees it): blind RSTs, SYNs and data with guessed numbers (RFC 5961 §3-5), fuzzed
   TCP headers and options, malformed IPv4, ICMP (forged errors among it), truncated and
   garbage Ethernet. Each category
   says which of the stack's counters each of its frames must move (`expect`), and whether
   the stack answers it with an RST.
4. Waits a second, prints "sent " and a JSON object (the categories, their frame counts and
   expectations, the RSTs and ACKs the sniffer saw from the stack, the frames it saw going to
   the stack), and waits for a line on stdin (the test takes the counters again).
5. Echoes 64 KB more on the same connection, byte-exact, and prints "echo ok".
"""

import json
import random
import socket
import struct
import sys
import time

from scapy.all import IP, TCP, AsyncSniffer, Ether, Raw, conf

conf.verb = 0
STACK, IFACE = sys.argv[1], sys.argv[2]
CLOSED = 9999  # a port nobody listens on
rng = random.Random(5961)


def echo(s, n):
    data = bytes(rng.getrandbits(8) for _ in range(n))
    s.sendall(data)
    got = bytearray()
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            raise SystemExit("echo: connection closed")
        got += chunk
    return bytes(got) == data


frames = []  # every frame the sniffer saw, with its arrival time
sniffer = AsyncSniffer(iface=IFACE, store=False, prn=lambda p: frames.append((time.time(), p)))
sniffer.start()
time.sleep(1.0)

s = socket.create_connection((STACK, 7), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
cport = s.getsockname()[1]
assert echo(s, 65536), "echo before the barrage differs"
time.sleep(0.5)


def live(p, from_stack):
    if TCP not in p:
        return False
    t = p[TCP]
    return (t.sport, t.dport) == ((7, cport) if from_stack else (cport, 7))


def stack_frames():
    return [p for _, p in list(frames) if live(p, True)]


# After the echo the stack has sent and acknowledged exactly 64 KB: its next sequence number
# and the one it expects (RCV.NXT) follow from the SYN-ACK. The sniffer may still be working
# through its backlog on a loaded machine, so wait until it has seen the stack's segment that
# says so, and take the window from that one (not from whatever it saw last).
ours = []
for _ in range(200):
    ours = stack_frames()
    if any(p[TCP].flags.S for p in ours):
        break
    time.sleep(0.1)
synack = next(p for p in ours if p[TCP].flags.S)
wscale = dict((k, v) for k, v in synack[TCP].options if k == "WScale").get("WScale", 0)
snd_nxt = (synack[TCP].seq + 1 + 65536) & 0xFFFFFFFF
rcv_nxt = (synack[TCP].ack + 65536) & 0xFFFFFFFF


def settled(p):
    return p[TCP].ack == rcv_nxt


# The sniffer can also miss frames of the bulk echo (seen on a loaded machine), so the state
# comes from the arithmetic above and only the window from a frame: the latest one that
# acknowledges the whole echo, or failing that the latest one seen (the window only grows
# once the application has read everything).
last = None
for _ in range(30):
    last = next((p for p in reversed(stack_frames()) if settled(p)), None)
    if last is not None:
        break
    time.sleep(0.1)
if last is None:
    last = stack_frames()[-1]
theirs = [p for _, p in list(frames) if live(p, False)]
assert theirs, "the sniffer saw the echo connection"
stack_mac, host_mac = last[Ether].src, last[Ether].dst
host_ip = last[IP].dst
rcv_wnd = last[TCP].window << wscale
peer_win = theirs[-1][TCP].window
assert rcv_wnd > 4096, f"the stack's window: {rcv_wnd}"

print("ready", flush=True)
sys.stdin.readline()

raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
raw.bind((IFACE, 0))
eth = Ether(src=host_mac, dst=stack_mac)
ip = IP(src=host_ip, dst=STACK)


def live_tcp(**kw):
    return TCP(sport=cport, dport=7, window=peer_win, **kw)


def closed_tcp(**kw):
    return TCP(sport=40000 + rng.randrange(10000), dport=CLOSED, **kw)


def seq(x):
    return x & 0xFFFFFFFF


categories = []


def category(name, packets, per_frame, resets=0, totals=None):
    """Frames of one kind. `per_frame`: counter -> how much each frame moves it (`a|b`: the
    sum of two counters), or `totals`: counter -> how much the whole category moves it.
    `resets`: RSTs the stack answers each frame with."""
    frames = [bytes(p) for p in packets]
    expect = totals or {k: v * len(frames) for k, v in per_frame.items()}
    categories.append({"name": name, "frames": frames, "expect": expect, "resets": resets * len(frames)})


def tcp_bytes(t):
    """A TCP segment from scapy, as bytes with its checksum computed (over `ip`'s addresses)."""
    return bytes(ip / t)[20:]


def ipv4(payload, ihl=5, total=None, csum_xor=0, flags=0, frag=0, proto=6, dst=STACK, options=b"", version=4):
    hl = 20 + len(options)
    total = hl + len(payload) if total is None else total
    h = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, 0, total, 1, (flags << 13) | frag, 64, proto, 0,
                    socket.inet_aton(host_ip), socket.inet_aton(dst)) + options
    c = sum(struct.unpack(f"!{len(h) // 2}H", h))
    while c >> 16:
        c = (c & 0xFFFF) + (c >> 16)
    csum = (~c & 0xFFFF) ^ csum_xor
    h = h[:10] + struct.pack("!H", csum) + h[12:]
    return bytes(eth)[:12] + b"\x08\x00" + h + payload


def with_raw_options(t, opts):
    """`t` (a scapy TCP header without options) with `opts` appended verbatim, data offset
    set to cover them, checksum recomputed."""
    t = t.copy()
    pad = (-len(opts)) % 4
    t.dataofs = 5 + (len(opts) + pad) // 4
    b = bytearray(bytes(ip / t)[20:40]) + opts + b"\0" * pad + bytes(t.payload)
    return checksum_tcp(b)


def checksum_tcp(b):
    b = bytearray(b)
    b[16:18] = b"\0\0"
    pseudo = socket.inet_aton(host_ip) + socket.inet_aton(STACK) + struct.pack("!BBH", 0, 6, len(b))
    data = pseudo + bytes(b) + (b"\0" if len(b) % 2 else b"")
    c = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while c >> 16:
        c = (c & 0xFFFF) + (c >> 16)
    b[16:18] = struct.pack("!H", ~c & 0xFFFF)
    return bytes(b)


def tcp_frame(segment):
    return ipv4(segment)


# --- RFC 5961 §3: blind RSTs. Outside the window: dropped without a word. Inside it but not
# exactly RCV.NXT: a challenge ACK (§3.2), and dropped.
far = rcv_nxt + (1 << 31)
category("rst outside the window", [eth / ip / live_tcp(flags="R", seq=seq(far + i * 7919)) for i in range(20)],
         {"drops_out_of_window": 1})
category("rst in the window, not exact",
         [eth / ip / live_tcp(flags="R", seq=seq(rcv_nxt + 1 + i * (rcv_wnd // 32))) for i in range(20)],
         {"drops_bad_rst": 1, "challenge_acks|challenge_acks_suppressed": 1})
category("rst+ack in the window, not exact",
         [eth / ip / live_tcp(flags="RA", seq=seq(rcv_nxt + 2 + i * 997), ack=snd_nxt) for i in range(10)],
         {"drops_bad_rst": 1, "challenge_acks|challenge_acks_suppressed": 1})

# --- RFC 5961 §4: a SYN on the live connection, whatever its sequence number, draws a
# challenge ACK and is dropped.
category("syn outside the window", [eth / ip / live_tcp(flags="S", seq=seq(far + i)) for i in range(10)],
         {"drops_out_of_window": 1, "challenge_acks|challenge_acks_suppressed": 1})
category("syn in the window", [eth / ip / live_tcp(flags="S", seq=seq(rcv_nxt + 1 + i * 100)) for i in range(10)],
         {"drops_discarded": 1, "challenge_acks|challenge_acks_suppressed": 1})

# --- RFC 5961 §5 and RFC 9293 §3.10.7.4: blind data. Outside the window: ACKed (rate
# limited) and dropped. At RCV.NXT with an ACK for data never sent, or older than the
# window: a challenge ACK, and the data is not taken. Without the ACK bit: dropped.
payload = Raw(b"\xee" * 100)
category("data outside the window",
         [eth / ip / live_tcp(flags="PA", seq=seq(far + i * 100), ack=snd_nxt) / payload for i in range(20)],
         {"drops_out_of_window": 1})
category("data acking the future",
         [eth / ip / live_tcp(flags="PA", seq=rcv_nxt, ack=seq(snd_nxt + (1 << 30) + i)) / payload for i in range(10)],
         {"drops_bad_ack": 1, "challenge_acks|challenge_acks_suppressed": 1})
category("data acking the distant past",
         [eth / ip / live_tcp(flags="PA", seq=rcv_nxt, ack=seq(snd_nxt - (1 << 30) - i)) / payload for i in range(10)],
         {"drops_bad_ack": 1, "challenge_acks|challenge_acks_suppressed": 1})
category("data without ack", [eth / ip / live_tcp(flags="P", seq=rcv_nxt) / payload for _ in range(5)],
         {"drops_discarded": 1})

# --- Fuzzed TCP headers and option lists.
base = TCP(sport=41000, dport=CLOSED, flags="S", seq=1234)
fuzz = []
for doff in range(0, 5):  # data offset below the minimum header
    b = bytearray(tcp_bytes(base))
    b[12] = (doff << 4) | (b[12] & 0x0F)
    fuzz.append(checksum_tcp(b))
b = bytearray(tcp_bytes(base))  # data offset past the end of the segment
b[12] = (15 << 4) | (b[12] & 0x0F)
fuzz.append(checksum_tcp(b))
for opts in [
    b"\x02\x00\x05\xb4",  # MSS with length 0
    b"\x02\x01\x05\xb4",  # MSS with length 1
    b"\x02\x03\x05\xb4",  # MSS with length 3
    b"\x02\x28\x05\xb4",  # MSS with a length past the header
    b"\x03\x02\x0e\x01",  # window scale with length 2
    b"\x08\x06\x00\x00\x00\x01",  # timestamps with length 6
    b"\x05\x09" + b"\x00" * 7,  # SACK with a length not 2 + 8n
    b"\x05\x02\x01\x01",  # SACK with no block
    b"\x05\x2a" + b"\x00" * 38,  # SACK with five blocks (past the 40 bytes of options)
    b"\xfe\x00\x01\x01",  # an unknown option with length 0
    b"\xfe\xff\x00\x00",  # an unknown option with length 255
    b"\x01" * 39 + b"\x02",  # NOPs, then an option cut off by the end of the header
]:
    fuzz.append(with_raw_options(base, opts))
category("fuzzed tcp header", [tcp_frame(t) for t in fuzz], {"drops_malformed": 1})

# Well-formed options with hostile values, on SYNs to a closed port: parsed (MSS 0 and a
# window scale above 14 are clamped, RFC 7323 §2.3), then answered with RST (RFC 9293
# §3.10.7.1).
odd = [
    closed_tcp(flags="S", seq=1, options=[("MSS", 0)]),
    closed_tcp(flags="S", seq=2, options=[("WScale", 15)]),
    closed_tcp(flags="S", seq=3, options=[("WScale", 255)]),
    closed_tcp(flags="S", seq=4, options=[("MSS", 0), ("WScale", 200), ("SAckOK", b""), ("Timestamp", (0, 0))]),
    closed_tcp(flags="S", seq=5, options=[("MSS", 65535)]),
]
category("hostile option values", [tcp_frame(tcp_bytes(t)) for t in odd],
         {"drops_no_connection": 1, "resets_sent": 1}, resets=1)

# SACK blocks out of range on the live connection: an acceptable ACK whose blocks are all
# ignored (RFC 6675 §5: only blocks inside [SND.UNA, SND.MAX] count).
bogus = [(seq(snd_nxt + 1000), seq(snd_nxt + 2000)), (seq(snd_nxt - 5000), seq(snd_nxt - 4000)),
         (seq(snd_nxt + 10), seq(snd_nxt + 5)), (seq(snd_nxt + (1 << 31)), seq(snd_nxt + (1 << 31) + 8))]
sacks = [live_tcp(flags="A", seq=rcv_nxt, ack=snd_nxt, options=[("SAck", tuple(v for b in bogus[:n] for v in b))])
         for n in (1, 2, 3, 4)]
category("sack blocks out of range", [eth / ip / t for t in sacks], None, totals={"sack_blocks_ignored": 10})

# --- Malformed IPv4.
seg_ok = tcp_bytes(closed_tcp(flags="S", seq=77))
category("ipv4 header length below 5", [ipv4(seg_ok, ihl=i) for i in range(0, 5)], {"drops_malformed": 1})
category("ipv4 header length past the packet", [ipv4(b"", ihl=15, total=60)], {"drops_malformed": 1})
category("ipv4 total length past the frame", [ipv4(seg_ok, total=t) for t in (100, 1500, 65535)],
         {"drops_malformed": 1})
category("ipv4 total length below the header", [ipv4(seg_ok, total=t) for t in (0, 10, 19)], {"drops_malformed": 1})
category("ipv4 version not 4", [ipv4(seg_ok, version=v) for v in (0, 6, 15)], {"drops_malformed": 1})
category("ipv4 bad header checksum", [ipv4(seg_ok, csum_xor=x) for x in (1, 0x0100, 0xFFFF)], {"drops_bad_checksum": 1})
category("ipv4 fragments", [ipv4(seg_ok, flags=1), ipv4(seg_ok, frag=1), ipv4(seg_ok, flags=1, frag=100),
                            ipv4(seg_ok, frag=0x1FFF)], {"drops_fragment": 1})
category("ipv4 unknown protocol", [ipv4(b"\0" * 20, proto=p) for p in (0, 41, 99, 253)],
         {"drops_unknown_protocol": 1})
category("ipv4 to another address", [ipv4(seg_ok, dst=d) for d in ("10.77.0.99", "192.0.2.1")],
         {"drops_not_for_us": 1})
# Options (RFC 791 §3.1) are legal: the segment inside is taken, and answered (closed port).
category("ipv4 with options",
         [ipv4(tcp_bytes(closed_tcp(flags="S", seq=88)), ihl=6, options=b"\x01\x01\x01\x00"),
          ipv4(tcp_bytes(closed_tcp(flags="S", seq=89)), ihl=8, options=b"\x07\x0b\x04" + b"\0" * 8 + b"\x00")],
         {"drops_no_connection": 1, "resets_sent": 1}, resets=1)

# --- ICMP (RFC 792). Destination unreachable quoting the live connection and unsolicited
# echo replies change nothing (RFC 5927: blind ICMP attacks on TCP) and are counted; so does
# a "fragmentation needed" with a tiny MTU quoting a sequence number the connection does not
# have in flight (RFC 5927 §4.1), counted as such; a bad checksum, a truncated message and a
# type the stack does not handle are dropped.
def icmp(typ, code, rest, body, csum_xor=0):
    h = struct.pack("!BBH", typ, code, 0) + rest + body
    h = h + (b"\0" if len(h) % 2 else b"")
    c = sum(struct.unpack(f"!{len(h) // 2}H", h))
    while c >> 16:
        c = (c & 0xFFFF) + (c >> 16)
    return h[:2] + struct.pack("!H", (~c & 0xFFFF) ^ csum_xor) + h[4 : 4 + len(rest) + len(body)]


quoted = bytes(IP(src=STACK, dst=host_ip) / TCP(sport=7, dport=cport, seq=snd_nxt, ack=rcv_nxt, flags="A"))[:28]
category("icmp the stack ignores",
         [ipv4(icmp(3, 3, b"\0" * 4, quoted), proto=1), ipv4(icmp(3, 1, b"\0" * 4, quoted), proto=1),
          ipv4(icmp(0, 0, b"\0\1\0\1", b"x" * 8), proto=1),
          ipv4(icmp(13, 0, b"\0" * 4, b"\0" * 12), proto=1), ipv4(icmp(11, 0, b"\0" * 4, quoted), proto=1)],
         {"icmp_ignored": 1})
category("icmp fragmentation needed, nothing in flight",
         [ipv4(icmp(3, 4, struct.pack("!HH", 0, 68), quoted), proto=1)], {"pmtu_ignored": 1})
category("icmp bad checksum", [ipv4(icmp(8, 0, b"\0\1\0\1", b"x" * 8, csum_xor=1), proto=1)], {"drops_bad_checksum": 1})
category("icmp malformed", [ipv4(b"\x08\x00\xf7", proto=1)],
         {"drops_malformed": 1})

# --- Truncated and garbage Ethernet. (A frame shorter than its 14-byte header cannot be sent
# through an AF_PACKET socket; the stack's own tests cover those.)
hdr = bytes(eth)[:12]
category("truncated frames", [hdr + b"\x08\x00", hdr + b"\x08\x00\x45", ipv4(seg_ok)[:14 + 19],
                              ipv4(seg_ok)[:14 + 30], hdr + b"\x08\x06" + b"\x00\x01\x08\x00",
                              hdr + b"\x81\x00\x00"],
         {"drops_malformed": 1})
category("garbage ethertypes", [hdr + struct.pack("!H", t) + bytes(rng.getrandbits(8) for _ in range(46))
                                for t in (0x0000, 0x05DC, 0x86DD, 0x88B5, 0xFFFF)], {"drops_unknown_protocol": 1})
category("to another mac", [bytes.fromhex("020000000099") + bytes(eth)[6:12] + ipv4(seg_ok)[12:] for _ in range(3)],
         {"drops_not_for_us": 1})

total = 0
t0 = time.time()
for c in categories:
    for f in c["frames"]:
        raw.send(f)
        total += 1
        time.sleep(0.001)  # well below the TAP's queue; nothing lost before the stack
time.sleep(1.0)
t1 = time.time()

# By the source address's bytes: scapy dissects some frames as other than Ethernet II.
mac = bytes.fromhex(stack_mac.replace(":", ""))
to_stack = [p for t, p in frames if t0 <= t <= t1 and bytes(p)[6:12] != mac]
from_stack = [p for t, p in frames if t0 <= t <= t1 and bytes(p)[6:12] == mac]
report = {
    "frames": total,
    "categories": [{"name": c["name"], "frames": len(c["frames"]), "expect": c["expect"], "resets": c["resets"]}
                   for c in categories],
    "seen_to_stack": len(to_stack),
    "seen_resets": sum(1 for p in from_stack if TCP in p and p[TCP].flags.R),
    "seen_acks": sum(1 for p in from_stack if TCP in p and not p[TCP].flags.R and live(p, True)),
}
print("sent " + json.dumps(report), flush=True)
sys.stdin.readline()
assert echo(s, 65536), "echo after the barrage differs"
print("echo ok", flush=True)
s.close()
sniffer.stop()
