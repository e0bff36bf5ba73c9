//! DEL.

use crate::state::{self, Saved, StateFile};
use crate::{config, tune};
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// DEL: puts back what the file saved and removes it. Nothing saved,
/// nothing to do. When the netns is gone there is nothing to put back,
/// and the file goes (the reference leaks it); so does a file that cannot
/// be parsed, which no DEL could ever use.
pub fn del(args: &CmdArgs) -> CmdResult {
    let parsed = config::parse(args)?;
    let file = StateFile::new(&parsed.data_dir, &args.container_id, &args.ifname);
    let saved: Saved = match state::load(&file)? {
        None => {
            file.remove()?;
            return Ok(Output::Nothing);
        }
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            log::warn!(
                "{}: cannot be parsed ({e}); nothing to restore from it",
                file.path().display()
            );
            file.remove()?;
            return Ok(Output::Nothing);
        }
    };
    let ns = match args.netns.as_deref() {
        None => None,
        Some(path) => cni_plugin::netns::open_if_present(path)?,
    };
    if let Some(ns) = ns {
        let errors = ns
            .run(|| -> Result<Vec<String>, CniError> {
                let nl = Netlink::host().cni()?;
                Ok(tune::restore(&nl, &args.ifname, &saved))
            })
            .cni()??;
        if !errors.is_empty() {
            // The file stays, so a retried DEL can still restore.
            return Err(CniError::internal(errors.join("; ")));
        }
    }
    file.remove()?;
    Ok(Output::Nothing)
}
