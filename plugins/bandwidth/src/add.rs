//! ADD: the ingress tbf on the host veth; for egress, the ifb, the ingress
//! qdisc and redirecting filter on the host veth, and the ifb's tbf. A
//! step that fails undoes the ones before it.

use crate::config::{self, Conf};
use crate::{host, ifb};
use cni_net::{Link, Netlink, tc};
use cni_plugin::NetResult;
use cni_plugin::rollback::Rollback;
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Interface, Output};

pub fn add(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let prev = args
        .prev_result()
        .map_err(|e| CniError::internal(format!("could not parse prevResult: {}", e.msg)))?;
    if conf.is_unlimited() {
        // Nothing to shape: the result goes on unchanged. Without one the
        // reference panics; here the chain gets an empty result.
        return Ok(Output::Result(prev.unwrap_or_else(|| CniResult {
            cni_version: args.cni_version().to_string(),
            ..CniResult::default()
        })));
    }
    let mut result = prev.ok_or_else(|| CniError::internal("must be called as chained plugin"))?;
    let ns = host::open_netns(args.netns.as_deref())?;
    let nl = Netlink::host().cni()?;
    let veth = host::find(&result, &args.ifname, &ns, &nl)?;
    let mut undo = Rollback::default();
    match shape(&conf, args, &nl, &veth, &mut undo, &mut result) {
        Ok(()) => {
            undo.disarm();
            Ok(Output::Result(result))
        }
        Err(e) => {
            undo.run();
            Err(e)
        }
    }
}

fn shape<'a>(
    conf: &Conf,
    args: &CmdArgs,
    nl: &'a Netlink,
    veth: &'a Link,
    undo: &mut Rollback<'a>,
    result: &mut CniResult,
) -> Result<(), CniError> {
    if let Some(t) = conf.ingress {
        nl.add_tbf(veth, &t.into())
            .map_err(|e| CniError::internal(format!("create qdisc: {e}")))?;
        undo.push("ingress tbf", || nl.del_root_qdisc(veth).cni());
    }
    let Some(t) = conf.egress else {
        return Ok(());
    };
    let name = ifb::name(&conf.network, &args.container_id);
    let alias = ifb::alias(&conf.network, &args.container_id, &args.ifname);
    let dev = nl
        .create_ifb(&name, veth.mtu, alias.as_deref())
        .map_err(|e| CniError::internal(format!("adding link: {e}")))?;
    undo.push("ifb", move || nl.del_link_by_name(&name).map(|_| ()).cni());
    result.interfaces.push(Interface {
        name: dev.name.clone(),
        mac: dev.mac.clone(),
        ..Interface::default()
    });
    nl.add_ingress_qdisc(veth)
        .map_err(|e| CniError::internal(format!("create ingress qdisc: {e}")))?;
    undo.push("ingress qdisc", || nl.del_ingress_qdisc(veth).cni());
    nl.add_redirect_filter(veth, &dev)
        .map_err(|e| CniError::internal(format!("add filter: {e}")))?;
    nl.add_tbf(&dev, &t.into())
        .map_err(|e| CniError::internal(format!("create ifb qdisc: create qdisc: {e}")))?;
    Ok(())
}

impl From<crate::shaping::Tbf> for tc::Tbf {
    fn from(t: crate::shaping::Tbf) -> tc::Tbf {
        tc::Tbf {
            rate: t.rate,
            buffer: t.buffer,
            limit: t.limit,
        }
    }
}
