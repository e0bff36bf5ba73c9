//! STATUS: whether the backend this config resolves to can be used.

use crate::{backend, parse};
use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

pub fn status(args: &CmdArgs) -> CmdResult {
    let conf = parse(args)?;
    if backend::resolve(&conf).is_ok_and(|mut b| b.usable()) {
        return Ok(Output::Nothing);
    }
    Err(CniError::new(
        code::PLUGIN_NOT_AVAILABLE,
        "firewall: no usable backend (iptables tools not working, firewalld not reachable)",
        "",
    ))
}
