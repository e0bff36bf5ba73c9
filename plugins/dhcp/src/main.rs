//! The CNI `dhcp` IPAM plugin and its daemon, in one binary as the Go
//! reference ships them: `dhcp daemon [flags]` runs the daemon that holds one
//! DHCP client per attachment; any other invocation is the CNI plugin, which
//! asks the daemon over a unix socket (Go net/rpc with gob, see `rpc`).

mod daemon;
mod plugin;
mod rpc;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(first) if first == "daemon" => daemon::main(args.collect()),
        _ => plugin::main(),
    }
}
