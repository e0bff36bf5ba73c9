//! GC.

use crate::{config, state};
use cni_skel::{CmdArgs, CmdResult, Output};

/// GC: removes the saved values of this network's attachments that are
/// not in `cni.dev/valid-attachments` (and temporary files a killed ADD
/// left for them). A file belongs to this network when it says so; files
/// the reference wrote do not say, and are left to their DEL.
pub fn gc(args: &CmdArgs) -> CmdResult {
    let parsed = config::parse(args)?;
    let valid = cni_skel::conf::valid_attachments(&args.stdin)?;
    cni_skel::state::gc(&parsed.data_dir, &valid, |path| {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| state::parse(&bytes).ok())
            .is_some_and(|s| s.network == parsed.network)
    })?;
    Ok(Output::Nothing)
}
