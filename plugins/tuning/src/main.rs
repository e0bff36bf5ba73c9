//! The CNI tuning plugin: sets sysctls and link attributes (MAC, MTU,
//! promiscuous and all-multicast mode, queue length) of the container's
//! interface, saves the original values and puts them back on DEL.

mod config;
mod regex;
mod state;
mod tune;

use cni_net::{NetNs, Netlink};
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Output, Plugin};
use state::{Saved, StateFile};
use std::process::ExitCode;

struct Tuning;

impl Plugin for Tuning {
    fn about(&self) -> String {
        cni_skel::about("tuning")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add(args)
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del(args)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check(args)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        gc(args)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::parse(args)?;
        Ok(Output::Nothing)
    }
}

/// The prevResult, which tuning passes on; it cannot run first.
fn prev_result(args: &CmdArgs) -> Result<CniResult, CniError> {
    args.prev_result()?
        .ok_or_else(|| CniError::internal("Required prevResult missing"))
}

fn open_netns(args: &CmdArgs) -> Result<NetNs, CniError> {
    let path = args
        .netns
        .as_deref()
        .ok_or_else(|| CniError::internal("CNI_NETNS is required"))?;
    Ok(NetNs::open(path)?)
}

/// ADD: everything is validated first; then, in the container's netns,
/// the current values are read, saved (before any change, so a kill
/// leaves what DEL needs), and the new ones applied. A failure puts back
/// what this ADD changed and the saved file as it was.
fn add(args: &CmdArgs) -> CmdResult {
    let allowlist = config::read_allowlist()?;
    let conf = config::load(args, allowlist.as_deref())?;
    let mut result = prev_result(args)?;
    // Podman's chains end with an empty tuning: a pure pass-through.
    if conf.parsed.is_empty() {
        return Ok(Output::Result(result));
    }
    let ns = open_netns(args)?;
    let file = StateFile::new(&conf.parsed.data_dir, &args.container_id, &args.ifname);
    ns.run(|| -> Result<(), CniError> {
        let nl = Netlink::host()?;
        let link = tune::must_link(&nl, &args.ifname)?;
        let before = tune::current(&conf, &link)?;
        // A file from an earlier ADD holds the originals: keep them (an
        // unreadable one is replaced).
        let earlier = state::load(&file)?.and_then(Result::ok);
        let mut saved = earlier.clone().unwrap_or_default();
        saved.fill_from(&before);
        saved.network.clone_from(&conf.parsed.network);
        state::save(&file, &saved)?;
        if let Err(e) = tune::apply(&nl, &conf, &link) {
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
    })??;
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

/// DEL: puts back what the file saved and removes it. Nothing saved,
/// nothing to do. When the netns is gone there is nothing to put back,
/// and the file goes (the reference leaks it); so does a file that cannot
/// be parsed, which no DEL could ever use.
fn del(args: &CmdArgs) -> CmdResult {
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
        Some(path) => NetNs::open_if_present(path)?,
    };
    if let Some(ns) = ns {
        let errors = ns.run(|| -> Result<Vec<String>, CniError> {
            let nl = Netlink::host()?;
            Ok(tune::restore(&nl, &args.ifname, &saved))
        })??;
        if !errors.is_empty() {
            // The file stays, so a retried DEL can still restore.
            return Err(CniError::internal(errors.join("; ")));
        }
    }
    file.remove()?;
    Ok(Output::Nothing)
}

/// Whitespace-normalised: multi-value sysctls print tabs.
fn same_sysctl(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// CHECK: the kernel holds what the config says.
fn check(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args, None)?;
    prev_result(args)?;
    let ns = open_netns(args)?;
    ns.run(|| -> Result<(), CniError> {
        for s in &conf.sysctls {
            let current = cni_net::sysctl::read(&s.path)?;
            if !same_sysctl(&current, &s.value) {
                return Err(CniError::internal(format!(
                    "Error: Tuning configured value of /proc/sys/{} is {}, current value is {current}",
                    s.path, s.value
                )));
            }
        }
        let nl = Netlink::host()?;
        let ifname = &args.ifname;
        let link = nl
            .link_by_name(ifname)?
            .ok_or_else(|| CniError::internal(format!("Cannot find container link {ifname}")))?;
        if let Some(mac) = conf.mac
            && config::parse_go_mac(&link.mac).as_deref() != Some(&mac.0[..])
        {
            return Err(CniError::internal(format!(
                "Error: Tuning configured Ethernet of {ifname} is {}, current value is {}",
                conf.parsed.mac, link.mac
            )));
        }
        if link.promisc != conf.parsed.promisc {
            return Err(CniError::internal(format!(
                "Error: Tuning link {ifname} configured promisc is {}, current value is {}",
                conf.parsed.promisc,
                u8::from(link.promisc)
            )));
        }
        if let Some(mtu) = conf.mtu
            && link.mtu != mtu
        {
            return Err(CniError::internal(format!(
                "Error: Tuning configured MTU of {ifname} is {mtu}, current value is {}",
                link.mtu
            )));
        }
        if let Some(on) = conf.parsed.allmulti
            && link.allmulti != on
        {
            return Err(CniError::internal(format!(
                "Error: Tuning configured all-multicast mode of {ifname} is {on}, current value is {}",
                link.allmulti
            )));
        }
        if let Some(q) = conf.txqlen
            && link.txqlen != q
        {
            return Err(CniError::internal(format!(
                "Error: Tuning configured Transmit Queue Length of {ifname} is {q}, current value is {}",
                link.txqlen
            )));
        }
        Ok(())
    })??;
    Ok(Output::Nothing)
}

/// GC: removes the saved values of this network's attachments that are
/// not in `cni.dev/valid-attachments` (and temporary files a killed ADD
/// left for them). A file belongs to this network when it says so; files
/// the reference wrote do not say, and are left to their DEL.
fn gc(args: &CmdArgs) -> CmdResult {
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

fn main() -> ExitCode {
    cni_skel::run(&Tuning)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sysctl_comparison_ignores_whitespace() {
        assert!(super::same_sysctl(
            "4096\t87380\t6291456",
            "4096 87380 6291456"
        ));
        assert!(super::same_sysctl("1", " 1 "));
        assert!(!super::same_sysctl("1", "0"));
    }
}
