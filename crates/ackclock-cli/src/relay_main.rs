//! `ackclock-relay`: `ackclock relay` as a binary of its own, for data planes that ship only
//! the relay (a VPN app, a router). The same module and flags as the subcommand; without the
//! simulator, the plots and the other tools, its code is less than half of `ackclock`'s, and
//! so is the part of it the process keeps resident.

// The device plumbing is shared with serve and fetch, which this binary leaves out.
#[allow(dead_code)]
mod link;
mod relay;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ackclock-relay",
    version,
    about = "Relay TCP and UDP arriving on a TAP or TUN device to host sockets (tun2socks-style)"
)]
struct Cli {
    #[command(flatten)]
    args: relay::RelayArgs,
}

fn main() -> ExitCode {
    relay::run(Cli::parse().args)
}
