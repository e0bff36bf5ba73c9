//! VRF devices (`ip link add <name> type vrf table <id>`) and the links
//! enslaved to them. Enslaving and freeing are [`Netlink::set_master`];
//! deleting is [`Netlink::del_link`].

use super::link::link_message;
use super::{Link, Netlink};
use crate::error::NetError;
use crate::nl::rtm::{RTM_GETLINK, RTM_NEWLINK, Rtm};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVrf, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};

/// `ip link add <name> up type vrf table <table>`: up in the same request.
pub(crate) fn vrf_message(name: &str, table: u32) -> Rtm<LinkMessage> {
    let mut m = link_message(0, LinkFlags::Up, LinkFlags::Up);
    m.attributes.push(LinkAttribute::IfName(name.to_string()));
    m.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Vrf),
        LinkInfo::Data(InfoData::Vrf(vec![InfoVrf::TableId(table)])),
    ]));
    Rtm(RTM_NEWLINK, m)
}

/// A link dump the kernel filters (strict checking): by kind
/// (`IFLA_LINKINFO { IFLA_INFO_KIND }`) and/or by controller (`IFLA_MASTER`).
pub(crate) fn filtered_dump_message(
    kind: Option<InfoKind>,
    master: Option<u32>,
) -> Rtm<LinkMessage> {
    let mut m = LinkMessage::default();
    if let Some(i) = master {
        m.attributes.push(LinkAttribute::Controller(i));
    }
    if let Some(k) = kind {
        m.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(k)]));
    }
    Rtm(RTM_GETLINK, m)
}

impl Netlink {
    // ---- VRFs ----

    /// Creates a VRF bound to routing table `table`, already up; an
    /// existing link of that name is an EEXIST error. Returns the VRF.
    pub fn create_vrf(&self, name: &str, table: u32) -> Result<Link, NetError> {
        log::debug!("create vrf {name} table {table}");
        self.route().ack(
            &vrf_message(name, table),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("create vrf {name} table {table}"),
        )?;
        self.must_link(name)
    }

    /// Every VRF in the namespace ([`Link::vrf_table`] set).
    pub fn vrfs(&self) -> Result<Vec<Link>, NetError> {
        self.route().dump(
            || filtered_dump_message(Some(InfoKind::Vrf), None),
            "list vrfs",
            |m| match m {
                // The kind check stays for kernels that ignore the filter.
                Rtm(RTM_NEWLINK, m) => Some(Link::from_message(m)).filter(|l| l.kind == "vrf"),
                _ => None,
            },
        )
    }

    /// The links enslaved to controller `master` (a VRF's or a bridge's
    /// ports).
    pub fn links_with_master(&self, master: u32) -> Result<Vec<Link>, NetError> {
        self.route().dump(
            || filtered_dump_message(None, Some(master)),
            &format!("list links with master {master}"),
            |m| match m {
                Rtm(RTM_NEWLINK, m) => {
                    Some(Link::from_message(m)).filter(|l| l.master == Some(master))
                }
                _ => None,
            },
        )
    }
}
