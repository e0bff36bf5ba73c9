//! Finding the host end of the container's veth, as the reference does:
//! the container interface's veth peer index, that link in the host
//! namespace, and a prevResult interface of that name outside any sandbox.

use cni_net::{Link, NetNs, Netlink};
use cni_plugin::NetResult;
use cni_skel::{CniError, CniResult};
use std::path::Path;

/// Opens the container's namespace; the error names the path.
pub fn open_netns(path: Option<&Path>) -> Result<NetNs, CniError> {
    let path =
        path.ok_or_else(|| CniError::internal("failed to open netns: CNI_NETNS is empty"))?;
    cni_plugin::netns::open(path)
}

/// The container interface `ifname`'s veth peer in the host namespace
/// (`host`), when it exists. `None`: the interface is not a veth, or its
/// peer is not in the host namespace; the text says which.
fn veth_peer(ns: &NetNs, host: &Netlink, ifname: &str) -> Result<Result<Link, String>, CniError> {
    let inside = Netlink::for_ns(ns).cni()?;
    let container = match inside.link_by_name(ifname).cni()? {
        Some(l) => l,
        None => {
            return Ok(Err(format!(
                "container interface {ifname} has no veth peer: Link not found"
            )));
        }
    };
    let peer = match (container.kind.as_str(), container.peer_index) {
        ("veth", Some(p)) if p > 0 => p,
        _ => {
            return Ok(Err(format!(
                "container interface {ifname} has no veth peer: interface \"{ifname}\" was not a veth interface"
            )));
        }
    };
    // The index is the peer's in its own namespace. Where that is not this
    // one, a host link with the same index is a stranger: it must be a
    // veth whose own peer is the container interface.
    match host.link_by_index(peer).cni()? {
        Some(l) if l.kind == "veth" && l.peer_index == Some(container.index) => Ok(Ok(l)),
        _ => Ok(Err(format!(
            "veth peer with index {peer} is not in host ns"
        ))),
    }
}

/// ADD and CHECK: the host veth, which must be one of prevResult's host
/// interfaces.
pub fn find(prev: &CniResult, ifname: &str, ns: &NetNs, host: &Netlink) -> Result<Link, CniError> {
    if prev.interfaces.is_empty() {
        return Err(CniError::internal("no interfaces provided"));
    }
    let link = veth_peer(ns, host, ifname)?.map_err(CniError::internal)?;
    if prev
        .interfaces
        .iter()
        .any(|i| i.sandbox.is_empty() && i.name == link.name)
    {
        Ok(link)
    } else {
        Err(CniError::internal(
            "no veth peer of container interface found in host ns",
        ))
    }
}

/// DEL: the host veth if the container and its interface still exist
/// (then the qdiscs there are ours to remove); `None` otherwise.
pub fn surviving(
    ns_path: Option<&Path>,
    ifname: &str,
    host: &Netlink,
) -> Result<Option<Link>, CniError> {
    let Some(path) = ns_path else {
        return Ok(None);
    };
    let Some(ns) = cni_plugin::netns::open_if_present(path)? else {
        return Ok(None);
    };
    Ok(veth_peer(&ns, host, ifname)?.ok())
}
