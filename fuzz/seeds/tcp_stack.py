#!/usr/bin/env python3
"""Seed programs for the `tcp_stack` fuzz target, written to the directory given (its corpus).

libFuzzer starting from nothing spends its first minutes on programs of a few operations,
nearly all of whose frames are the scripted handshake and teardown around them. These seeds
are programs of the target's own encoding (see fuzz_targets/tcp_stack.rs, `fuzz_target!`)
that move data on the established connection: the applications write and read the main
stream, frames are delivered, and some are lost, duplicated, reordered or corrupted, with
time advancing (delayed ACKs, retransmission timers). A fixed random seed per file: the
same seeds every run.
"""
import random
import sys
from pathlib import Path


def program(rng: random.Random, lossy: bool) -> bytes:
    out = bytearray()
    ops = 0
    while ops < 250:
        ops += 1
        x = rng.random()
        side = rng.randrange(2)
        if x < 0.20:  # application send on the main connection: op 6, sub = side, handle 0
            n = rng.choice([1448, 4096, 9000, 19999])
            out += bytes([6, side, 0, n & 0xFF, n >> 8])
        elif x < 0.40:  # application recv on the main connection: sub = 2 | side
            out += bytes([6, 2 | side, 0, 0x20, 0x4E])
        elif x < 0.60:  # deliver up to 16 frames from one side: op 9, from = bit 4
            out += bytes([9 | side << 4, rng.randrange(16)])
        elif x < 0.75:  # rounds: everything in flight both ways, 10 us apart
            out += bytes([15, rng.randrange(8)])
        elif x < 0.82:  # time: microseconds (op 5) or milliseconds (op 0x45)
            out += bytes([rng.choice([0x05, 0x45]), rng.randrange(256)])
        elif lossy and x < 0.87:  # drop the frame at the head of the link
            out += bytes([11 | side << 4])
        elif lossy and x < 0.91:  # duplicate it
            out += bytes([12 | side << 4])
        elif lossy and x < 0.95:  # move it back in the queue
            out += bytes([13 | side << 4, rng.randrange(256)])
        elif lossy and x < 0.97:  # flip a byte of it
            out += bytes([14 | side << 4, rng.randrange(256), rng.randrange(256), rng.randrange(256)])
        elif x < 0.99:  # a crafted ACK near the live sequence numbers: op 1, ctl 0, opt 0
            out += bytes([1 | side << 4, 0x08, rng.randrange(256), 0x00, 0x00, 0x00])
        else:  # shutdown of the writing half
            out += bytes([6, 4 | side, 0, 1])
    return bytes(out)


def main() -> None:
    d = Path(sys.argv[1])
    d.mkdir(parents=True, exist_ok=True)
    for i in range(8):
        rng = random.Random(i)
        (d / f"seed-{i}").write_bytes(program(rng, lossy=i % 2 == 1))


if __name__ == "__main__":
    main()
