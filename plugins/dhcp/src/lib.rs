//! The CNI `dhcp` IPAM plugin and its daemon, in one binary as the Go
//! reference ships them: `dhcp daemon [flags]` runs the daemon that holds one
//! DHCP client per attachment; any other invocation is the CNI plugin, which
//! asks the daemon over a unix socket (Go net/rpc with gob, see `rpc`).

pub mod daemon;
pub mod plugin;
mod rpc;

use std::process::ExitCode;

/// Runs the plugin as its binary does; `args` are the command-line
/// arguments after the program name: `daemon [flags]` runs the daemon,
/// anything else the CNI plugin.
pub fn main(args: cni_skel::ProgramArgs) -> ExitCode {
    let mut args = args.into_vec().into_iter();
    match args.next() {
        Some(first) if first == "daemon" => daemon::main(args.collect()),
        _ => plugin::main(),
    }
}
