//! ADD: the tap made in the container (with `selinuxContext`, by `ip`
//! under that exec label), MTU, MAC, bridge port, then its addresses; any
//! failure undoes everything.

use crate::config::{self, TapConf};
use crate::selinux;
use cni_net::tuntap::{TapOpts, create_persistent_tap};
use cni_net::{Link, Netlink};
use cni_plugin::NetResult;
use cni_plugin::link_plugin::{self, Addressing, Ctx, L3Opts};
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// Creates `CNI_IFNAME` as a persistent tap in the container, down, with
/// MTU, MAC and bridge applied; deletes it again if any of those fails.
fn create(args: &CmdArgs, conf: &TapConf, cx: &Ctx) -> Result<Link, CniError> {
    let ifname = args.ifname.as_str();
    let opts = TapOpts {
        name: ifname,
        multi_queue: conf.multi_queue,
        owner: conf.owner,
        group: conf.group,
    };
    match &conf.selinux_context {
        Some(ctx) => selinux::create_labelled_tap(&cx.ns, &opts, ctx)
            .map_err(|e| CniError::internal(format!("failed to create tap: {}", e.msg)))?,
        None => cx.ns.run(|| create_persistent_tap(&opts)).cni()?.map_err(|e| {
            if e.is_exists() {
                CniError::internal(format!(
                    "failed to create tap: a link named {ifname:?} already exists in the container"
                ))
            } else {
                CniError::internal(format!("failed to create tap: {e}"))
            }
        })?,
    }
    let nl = &cx.ns_nl;
    let configured = nl
        .must_link(ifname)
        .map_err(cni_plugin::net_error)
        .and_then(|link| setup(conf, nl, &link));
    if configured.is_err() {
        // Whatever failed, no tap of ours stays behind.
        if let Err(undo) = nl.del_link_by_name(ifname) {
            log::warn!("rollback: deleting {ifname}: {undo}");
        }
    }
    configured
}

/// MTU, MAC, bridge port; returns the link as it now is (looked up again
/// only after a MAC or bridge change: an MTU the kernel took is the one
/// asked for, so that lookup, a netlink round trip the bench's floor does
/// not make, is left out).
fn setup(conf: &TapConf, nl: &Netlink, link: &Link) -> Result<Link, CniError> {
    let name = &link.name;
    if let Some(mtu) = conf.mtu {
        nl.set_mtu(link, mtu).map_err(|e| {
            CniError::internal(format!("failed to set MTU {mtu} on tap {name}: {e}"))
        })?;
    }
    if conf.mac.is_none() && conf.bridge.is_none() {
        return Ok(Link {
            mtu: conf.mtu.unwrap_or(link.mtu),
            ..link.clone()
        });
    }
    if let Some(mac) = conf.mac {
        nl.set_mac(link, mac).map_err(|e| {
            CniError::internal(format!("failed to set MAC {mac} on tap {name}: {e}"))
        })?;
    }
    if let Some(bridge) = &conf.bridge {
        let br = nl.link_by_name(bridge).cni()?.ok_or_else(|| {
            CniError::internal(format!("failed to get bridge {bridge}: Link not found"))
        })?;
        nl.set_master(link, Some(br.index)).map_err(|e| {
            CniError::internal(format!(
                "failed to set tap {name} as a port of bridge {bridge}: {e}"
            ))
        })?;
    }
    nl.must_link(name).cni()
}

/// ADD.
pub fn add(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    if let Some(ctx) = &conf.selinux_context {
        selinux::check_settable(ctx)?;
    }
    let cx = Ctx::open(args)?;
    let addressing = match conf.ipam {
        Some(_) => Addressing::Ipam,
        None => Addressing::L2,
    };
    // The result's dns is the config's, replacing IPAM's even when
    // empty; arp_notify as the reference sets it (IPv4 only).
    let opts = L3Opts {
        arp_notify: true,
        ndisc_notify: false,
        dns: Some(conf.dns.clone()),
    };
    let r = link_plugin::add_with(
        args,
        &cx,
        addressing,
        &opts,
        || create(args, &conf, &cx),
        |link| cx.ns_nl.del_link(link).cni(),
    )?;
    Ok(Output::Result(r))
}
