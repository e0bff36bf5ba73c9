//! GC: best effort, every step runs, errors are reported together.

use crate::config;
use cni_fw::masq;
use cni_skel::teardown::Teardown;
use cni_skel::{CmdArgs, CmdResult, Command, Output, delegate};

/// GC: forwarded to IPAM, then the masquerade rules of this network's
/// attachments that are not valid any more are removed (both backends).
pub fn gc(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    Teardown::of([
        delegate::ipam_run(Command::Gc, args),
        masq::gc(&conf.name, &valid),
    ])
    .finish()?;
    Ok(Output::Nothing)
}
