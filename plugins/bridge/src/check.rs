//! CHECK: what the reference verifies (bridge, veth pair, sandbox, MACs,
//! addresses, routes, IPAM CHECK), but IPAM CHECK only when there is an
//! IPAM (so L2 networks pass) and routes without a gateway match any.

use crate::config;
use cni_net::{Link, Netlink};
use cni_plugin::NetResult;
use cni_plugin::iface;
use cni_skel::delegate;
use cni_skel::{CmdArgs, CmdResult, CniError, Command, Interface, Output};

fn err(msg: String) -> CniError {
    CniError::internal(msg)
}

/// CHECK.
pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let netns = args.netns.as_deref().unwrap_or(std::path::Path::new(""));
    let netns_str = netns.display().to_string();
    let ns = cni_plugin::netns::open(netns)?;
    if conf.layer3 {
        delegate::ipam_run(Command::Check, args)?;
    }
    let prev = args
        .prev_result()?
        .ok_or_else(|| err("Required prevResult missing".into()))?;

    let empty = Interface::default();
    let br_map = prev
        .interfaces
        .iter()
        .find(|i| i.name == conf.bridge)
        .unwrap_or(&empty);
    let cont_map = prev
        .interfaces
        .iter()
        .find(|i| i.name == args.ifname && i.sandbox == netns_str)
        .unwrap_or(&empty);

    let host = Netlink::host().cni()?;
    let br = check_bridge(&host, br_map, conf.promisc)?;
    if cont_map.sandbox != netns_str {
        return Err(err(format!(
            "Sandbox in prevResult {} doesn't match configured netns: {netns_str}",
            cont_map.sandbox
        )));
    }
    let ns_nl = Netlink::for_ns(&ns).cni()?;
    let cont = check_container(&ns_nl, cont_map)?;

    let mut veth_found = false;
    for intf in &prev.interfaces {
        if intf.name == br_map.name || intf.name == cont_map.name {
            continue;
        }
        if check_host_veth(&host, intf, &br, &cont)? {
            veth_found = true;
            break;
        }
    }
    if !veth_found {
        return Err(err(format!(
            "CNI veth created for bridge {} was not found",
            conf.bridge
        )));
    }

    iface::check_addresses(&ns_nl, &args.ifname, &prev)?;
    iface::check_routes(&ns_nl, &prev)?;
    Ok(Output::Nothing)
}

fn lookup(nl: &Netlink, intf: &Interface, in_sandbox: bool) -> Result<Link, CniError> {
    if intf.name.is_empty() {
        return Err(err("Interface name missing ".into()));
    }
    let link = nl
        .link_by_name(&intf.name)
        .cni()?
        .ok_or_else(|| err(format!("Interface name {} not found", intf.name)))?;
    if in_sandbox && intf.sandbox.is_empty() {
        return Err(err(format!(
            "Interface {} is expected to be in a sandbox",
            intf.name
        )));
    }
    if !in_sandbox && !intf.sandbox.is_empty() {
        return Err(err(format!(
            "Interface {} should not be in sandbox",
            intf.name
        )));
    }
    Ok(link)
}

fn check_bridge(host: &Netlink, intf: &Interface, promisc: bool) -> Result<Link, CniError> {
    let link = lookup(host, intf, false)?;
    if link.kind != "bridge" {
        return Err(err(format!(
            "Interface {} does not have link type of bridge",
            intf.name
        )));
    }
    if !intf.mac.is_empty() && intf.mac != link.mac {
        return Err(err(format!(
            "Bridge interface {} Mac doesn't match: {}",
            intf.name, intf.mac
        )));
    }
    if link.promisc != promisc {
        return Err(err(format!(
            "Bridge interface {} configured Promisc Mode {promisc} doesn't match current state: {} ",
            intf.name, link.promisc
        )));
    }
    Ok(link)
}

fn check_container(nl: &Netlink, intf: &Interface) -> Result<Link, CniError> {
    let link = lookup(nl, intf, true)?;
    if link.kind != "veth" {
        return Err(err(format!(
            "Error: Container interface {} not of type veth",
            link.name
        )));
    }
    if !intf.mac.is_empty() && intf.mac != link.mac {
        return Err(err(format!(
            "Interface {} Mac {} doesn't match container Mac: {}",
            intf.name, intf.mac, link.mac
        )));
    }
    Ok(link)
}

/// True when `intf` is the host end of the container's veth on the bridge.
fn check_host_veth(
    host: &Netlink,
    intf: &Interface,
    br: &Link,
    cont: &Link,
) -> Result<bool, CniError> {
    let link = lookup(host, intf, false)?;
    if link.kind != "veth" {
        return Ok(false);
    }
    let pair = link.peer_index == Some(cont.index) && cont.peer_index == Some(link.index);
    if !pair || link.master != Some(br.index) {
        return Ok(false);
    }
    if !intf.mac.is_empty() && intf.mac != link.mac {
        return Err(err(format!(
            "Interface {} Mac doesn't match: {} not found",
            intf.name, intf.mac
        )));
    }
    Ok(true)
}
