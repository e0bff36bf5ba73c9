//! GC.

use crate::config;
use crate::hostside::{self, HostSide};
use crate::sysfs::Sysfs;
use cni_plugin::link_plugin;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// GC: the saved host-side state of attachments that are gone, then what
/// IPAM holds for them.
pub fn gc(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    config::load(args, sys)?;
    gc_state(args)?;
    link_plugin::gc(args)?;
    Ok(Output::Nothing)
}

/// GC of the saved host-side state: this network's files whose
/// attachment is not valid any more.
fn gc_state(args: &CmdArgs) -> Result<(), CniError> {
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    let network = args.conf.name.clone().unwrap_or_default();
    cni_skel::state::gc(std::path::Path::new(hostside::STATE_DIR), &valid, |path| {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<HostSide>(&b).ok())
            .is_some_and(|s| s.network == network)
    })
}
