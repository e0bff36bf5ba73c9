//! CHECK.

use crate::{NO_PREV_RESULT, config};
use cni_net::Netlink;
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

/// Whitespace-normalised: multi-value sysctls print tabs.
fn same_sysctl(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// CHECK: the kernel holds what the config says.
pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args, None)?;
    args.required_prev_result(NO_PREV_RESULT)?;
    let ns = cni_plugin::netns::open_required(args)?;
    ns.run(|| -> Result<(), CniError> {
        for s in &conf.sysctls {
            let current = cni_net::sysctl::read(&s.path).cni()?;
            if !same_sysctl(&current, &s.value) {
                return Err(CniError::internal(format!(
                    "Error: Tuning configured value of /proc/sys/{} is {}, current value is {current}",
                    s.path, s.value
                )));
            }
        }
        let nl = Netlink::host().cni()?;
        let ifname = &args.ifname;
        let link = nl
            .link_by_name(ifname).cni()?
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
    }).cni()??;
    Ok(Output::Nothing)
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
