//! STATUS: whether the backend this config resolves to can be used.

use crate::{Backend, ipt, parse, resolve};
use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

pub fn status(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    let iptables_works =
        || ipt::works(cni_fw::iptables::Family::V4) || ipt::works(cni_fw::iptables::Family::V6);
    let usable = match resolve(&conf) {
        Ok(Backend::Iptables) => iptables_works(),
        Ok(Backend::Firewalld(_)) => true,
        Err(_) => false,
    };
    if usable {
        return Ok(Output::Nothing);
    }
    Err(CniError::new(
        code::PLUGIN_NOT_AVAILABLE,
        "firewall: no usable backend (iptables tools not working, firewalld not reachable)",
        "",
    ))
}
