//! CHECK of one attachment's masquerade rules: present in the backend the
//! config selects, for every address (the spec wants CHECK to fail when
//! untracked resources such as firewall rules are missing).

use super::{
    Attachment, Backend, NFT_CHAIN, NFT_TABLE, families, host_len, instance_comment, ipt_err,
    nft_err,
};
use crate::hash::chain_name;
use crate::iptables::{self, Family};
use crate::nft;
use cni_skel::CniError;
use ipnetwork::IpNetwork;

/// Fails unless `backend` holds the masquerade rules [`super::setup`]
/// writes for `addrs` of `att`.
pub fn check(backend: Backend, addrs: &[IpNetwork], att: Attachment<'_>) -> Result<(), CniError> {
    match backend {
        Backend::Iptables => check_iptables(addrs, att),
        Backend::Nftables => check_nftables(addrs, att),
    }
}

fn missing(what: String) -> CniError {
    CniError::internal(format!("ipMasq: {what} missing"))
}

fn check_iptables(addrs: &[IpNetwork], att: Attachment<'_>) -> Result<(), CniError> {
    let chain = chain_name(att.network, att.container_id);
    for family in families(addrs) {
        let table = iptables::save(family, "nat").map_err(ipt_err)?;
        let tool = match family {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        };
        if !table.has_chain(&chain) {
            return Err(missing(format!("{tool} nat chain {chain}")));
        }
        if !table.rules(&chain).any(|r| r.ends_with("-j MASQUERADE")) {
            return Err(missing(format!(
                "MASQUERADE rule in {tool} nat chain {chain}"
            )));
        }
        for a in addrs.iter().filter(|a| Family::of(&a.ip()) == family) {
            let source = format!("-s {}/{} ", a.ip(), host_len(a.ip()));
            let jump = format!("-j {chain}");
            if !table
                .rules("POSTROUTING")
                .any(|r| r.contains(&source) && r.ends_with(&jump))
            {
                return Err(missing(format!(
                    "{tool} nat POSTROUTING rule for {} to {chain}",
                    a.ip()
                )));
            }
        }
    }
    Ok(())
}

fn check_nftables(addrs: &[IpNetwork], att: Attachment<'_>) -> Result<(), CniError> {
    let rules = nft::list_rules("inet", NFT_TABLE).map_err(nft_err)?;
    if !rules.iter().any(|r| r.chain == "postrouting") {
        return Err(missing(format!(
            "nftables chain inet {NFT_TABLE} postrouting"
        )));
    }
    let comment = instance_comment(att);
    let mine = rules
        .iter()
        .filter(|r| r.chain == NFT_CHAIN && r.comment == comment)
        .count();
    if mine < addrs.len() {
        return Err(missing(format!(
            "nftables rules in inet {NFT_TABLE} {NFT_CHAIN} for {} address(es) of {}",
            addrs.len(),
            att.container_id
        )));
    }
    Ok(())
}
