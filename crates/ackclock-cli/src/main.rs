//! The `ackclock` command-line tool. One module per subcommand.

mod chargen;
mod decode;
#[cfg(target_os = "linux")]
mod fetch;
#[cfg(target_os = "linux")]
#[cfg(target_os = "linux")]
mod link;
mod progress;
#[cfg(target_os = "linux")]
mod relay;
mod scenario;
#[cfg(target_os = "linux")]
mod serve;
#[cfg(target_os = "linux")]
mod serve_rt;
mod ttcp;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ackclock", version, about = "A user-space TCP/IPv4 stack, its simulator and tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode an Ethernet frame (hex) with ackclock's own parsers.
    Decode(decode::DecodeArgs),
    /// Download a URL over a TAP or TUN device, with the stack as the TCP client.
    #[cfg(target_os = "linux")]
    Fetch(fetch::FetchArgs),
    /// Relay TCP connections arriving on a TAP or TUN device to a host socket (tun2socks-style).
    #[cfg(target_os = "linux")]
    Relay(relay::RelayArgs),
    /// Run a built-in scenario on the simulator and plot it (slow start, fast recovery, ...).
    Sim(scenario::SimArgs),
    /// Serve discard, echo, chargen and HTTP (GET /bytes/N) on a TAP or TUN device.
    #[cfg(target_os = "linux")]
    Serve(serve::ServeArgs),
    /// Chargen-to-discard transfer over a simulated link (VJ's 1988 throughput test).
    Ttcp(Box<ttcp::TtcpArgs>),
}

fn main() -> ExitCode {
    let command = Cli::parse().command;
    // The tools that print (decode, sim, ttcp) die quietly on a closed pipe (`ackclock
    // ... | head`), as Unix tools do, instead of panicking on the failed write. The ones
    // that move bytes over sockets keep SIGPIPE ignored (Rust's default): a vectored
    // write (`writev(2)`, which takes no MSG_NOSIGNAL) to a host socket its peer has
    // reset must be an EPIPE error for that connection, not the end of the process.
    if matches!(command, Command::Decode(_) | Command::Sim(_) | Command::Ttcp(_)) {
        // SAFETY: restoring the default disposition of a signal before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match command {
        Command::Decode(args) => decode::run(args),
        #[cfg(target_os = "linux")]
        Command::Fetch(args) => fetch::run(args),
        #[cfg(target_os = "linux")]
        Command::Relay(args) => relay::run(args),
        Command::Sim(args) => scenario::run(args),
        #[cfg(target_os = "linux")]
        Command::Serve(args) => serve::run(args),
        Command::Ttcp(args) => ttcp::run(*args),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn max_connections(args: &[&str]) -> Result<Option<usize>, clap::Error> {
        let base = ["ackclock", args[0], "--tap", "t0", "--addr", "10.0.0.2/24"];
        let extra = if args[0] == "relay" { &["--to", "127.0.0.1:8000"][..] } else { &[] };
        let cli = Cli::try_parse_from(base.iter().chain(extra).chain(&args[1..]))?;
        Ok(match cli.command {
            Command::Serve(a) => a.max_connections,
            Command::Relay(a) => a.max_connections,
            _ => unreachable!("parsed {}", args[0]),
        })
    }

    /// `--max-connections N` on serve and relay: absent leaves the library's default, zero
    /// and non-numbers are refused by the parser.
    #[test]
    fn max_connections_parses_on_serve_and_relay() {
        for cmd in ["serve", "relay"] {
            assert_eq!(max_connections(&[cmd]).unwrap(), None);
            assert_eq!(max_connections(&[cmd, "--max-connections", "100000"]).unwrap(), Some(100_000));
            assert!(max_connections(&[cmd, "--max-connections", "0"]).is_err());
            assert!(max_connections(&[cmd, "--max-connections", "many"]).is_err());
            assert!(max_connections(&[cmd, "--max-connections"]).is_err());
        }
    }
}
