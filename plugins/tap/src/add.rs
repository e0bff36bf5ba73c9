//! ADD: the tap made in the container (MTU, MAC, bridge port), then its
//! addresses; any failure undoes everything.

use crate::config::{self, TapConf};
use cni_net::link_plugin::{self, Addressing, Ctx, L3Opts};
use cni_net::tuntap::{TapOpts, create_persistent_tap};
use cni_net::{Link, Netlink};
use cni_skel::error::code;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// `selinuxContext`: the Go plugin writes it to `/proc/thread-self/attr/exec`
/// and runs `ip tuntap` under it, so the device gets that label. Without
/// SELinux the write fails, with the reference's error. With SELinux we
/// cannot label a device we create in-process: refused, rather than made
/// with the wrong label.
fn selinux_label(ctx: &str) -> Result<(), CniError> {
    const ATTR: &str = "/proc/thread-self/attr/exec";
    if let Err(e) = std::fs::write(ATTR, ctx) {
        // Go's spelling: "invalid argument", without "(os error 22)".
        let text = e.to_string();
        let text = text.split(" (os error").next().unwrap_or_default();
        let mut chars = text.chars();
        let reason: String = chars
            .next()
            .map(|f| f.to_lowercase().chain(chars).collect())
            .unwrap_or_default();
        return Err(CniError::internal(format!(
            "failed set socket label: write {ATTR}: {reason}"
        )));
    }
    let _ = std::fs::write(ATTR, "");
    Err(CniError::new(
        code::UNSUPPORTED_FIELD,
        "selinuxContext is not supported: rcni creates the tap in-process and cannot give it another SELinux label",
        format!("selinuxContext: {ctx:?}"),
    ))
}

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
    cx.ns.run(|| create_persistent_tap(&opts))?.map_err(|e| {
        if e.is_exists() {
            CniError::internal(format!(
                "failed to create tap: a link named {ifname:?} already exists in the container"
            ))
        } else {
            CniError::internal(format!("failed to create tap: {e}"))
        }
    })?;
    let nl = &cx.ns_nl;
    let configured = nl
        .must_link(ifname)
        .map_err(CniError::from)
        .and_then(|link| setup(conf, nl, &link));
    if configured.is_err() {
        // Whatever failed, no tap of ours stays behind.
        if let Err(undo) = nl.del_link_by_name(ifname) {
            log::warn!("rollback: deleting {ifname}: {undo}");
        }
    }
    configured
}

/// MTU, MAC, bridge port; returns the link as it now is.
fn setup(conf: &TapConf, nl: &Netlink, link: &Link) -> Result<Link, CniError> {
    let name = &link.name;
    if let Some(mtu) = conf.mtu {
        nl.set_mtu(link, mtu).map_err(|e| {
            CniError::internal(format!("failed to set MTU {mtu} on tap {name}: {e}"))
        })?;
    }
    if let Some(mac) = conf.mac {
        nl.set_mac(link, mac).map_err(|e| {
            CniError::internal(format!("failed to set MAC {mac} on tap {name}: {e}"))
        })?;
    }
    if let Some(bridge) = &conf.bridge {
        let br = nl.link_by_name(bridge)?.ok_or_else(|| {
            CniError::internal(format!("failed to get bridge {bridge}: Link not found"))
        })?;
        nl.set_master(link, Some(br.index)).map_err(|e| {
            CniError::internal(format!(
                "failed to set tap {name} as a port of bridge {bridge}: {e}"
            ))
        })?;
    }
    Ok(nl.must_link(name)?)
}

/// ADD.
pub fn add(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    if let Some(ctx) = &conf.selinux_context {
        selinux_label(ctx)?;
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
        |link| Ok(cx.ns_nl.del_link(link)?),
    )?;
    Ok(Output::Result(r))
}
