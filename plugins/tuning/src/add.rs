//! ADD.

use crate::state::{self, StateFile};
use crate::{NO_PREV_RESULT, config, tune};
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// ADD: everything is validated first; then, in the container's netns,
/// the current values are read, saved (before any change, so a kill
/// leaves what DEL needs), and the new ones applied. A failure puts back
/// what this ADD changed and the saved file as it was.
pub fn add(args: &CmdArgs) -> CmdResult {
    let allowlist = config::read_allowlist()?;
    let conf = config::load(args, allowlist.as_deref())?;
    let mut result = args.required_prev_result(NO_PREV_RESULT)?;
    // Podman's chains end with an empty tuning: a pure pass-through.
    if conf.parsed.is_empty() {
        return Ok(Output::Result(result));
    }
    let ns = cni_plugin::netns::open_required(args)?;
    let file = StateFile::new(&conf.parsed.data_dir, &args.container_id, &args.ifname);
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host().cni()?;
        let link = tune::must_link(&nl, &args.ifname)?;
        let (before, mut held) = tune::current(&conf, &link)?;
        // A file from an earlier ADD holds the originals: keep them (an
        // unreadable one is replaced).
        let earlier = state::load(&file)?.and_then(Result::ok);
        let mut saved = earlier.clone().unwrap_or_default();
        saved.fill_from(&before);
        saved.network.clone_from(&conf.parsed.network);
        state::save(&file, &saved)?;
        if let Err(e) = tune::apply(&nl, &conf, &link, &mut held) {
            let undo = tune::restore(&nl, &args.ifname, &before);
            let file_undo = match &earlier {
                Some(s) => state::save(&file, s),
                None => file.remove(),
            };
            for problem in undo.into_iter().chain(file_undo.err().map(|e| e.msg)) {
                log::error!("undoing a failed ADD: {problem}");
            }
            return Err(e);
        }
        Ok(())
    })
    .cni()??;
    // The interface's MTU is a 1.1.0 field; older results stay as the
    // reference prints them.
    let reports_mtu = cni_skel::version::Version::parse(args.cni_version())
        .is_ok_and(|v| v >= cni_skel::version::Version(1, 1, 0));
    for i in result
        .interfaces
        .iter_mut()
        .filter(|i| i.name == args.ifname)
    {
        if let Some(mac) = conf.mac {
            i.mac = mac.to_string();
        }
        if let Some(mtu) = conf.mtu.filter(|_| reports_mtu) {
            i.mtu = mtu;
        }
    }
    Ok(Output::Result(result))
}
