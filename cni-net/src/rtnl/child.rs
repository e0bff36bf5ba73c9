//! Links of the "child" kinds the interface plugins create (macvlan,
//! ipvlan, vlan, dummy), moving a link between namespaces under a new
//! name, `IFLA_IFALIAS`, and reading a link's kind data back for CHECK,
//! on netlink-packet-route's types.

use super::link::{get_message, set_message};
use super::{Mac, Netlink, format_hw};
use crate::error::{NetError, libc_errno};
use crate::netns::NetNs;
use crate::nl::rtm::{RTM_NEWLINK, Rtm};
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    InfoData, InfoIpVlan, InfoKind, InfoMacVlan, InfoVlan, IpVlanFlags, IpVlanMode as NlIpvlan,
    LinkAttribute, LinkInfo, LinkMessage, MacVlanMode as NlMacvlan,
};
use std::os::fd::AsRawFd;

/// macvlan modes (`MACVLAN_MODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacvlanMode {
    /// Children cannot talk to each other.
    Private,
    /// Traffic between children goes out to the switch.
    Vepa,
    /// Children talk to each other directly.
    Bridge,
    /// One child takes over the parent.
    Passthru,
}

impl MacvlanMode {
    fn to_nl(self) -> NlMacvlan {
        match self {
            MacvlanMode::Private => NlMacvlan::Private,
            MacvlanMode::Vepa => NlMacvlan::Vepa,
            MacvlanMode::Bridge => NlMacvlan::Bridge,
            MacvlanMode::Passthru => NlMacvlan::Passthrough,
        }
    }

    fn from_nl(m: NlMacvlan) -> Option<MacvlanMode> {
        Some(match m {
            NlMacvlan::Private => MacvlanMode::Private,
            NlMacvlan::Vepa => MacvlanMode::Vepa,
            NlMacvlan::Bridge => MacvlanMode::Bridge,
            NlMacvlan::Passthrough => MacvlanMode::Passthru,
            _ => return None,
        })
    }

    /// The config spelling (`bridge`, `private`, `vepa`, `passthru`).
    pub fn name(self) -> &'static str {
        match self {
            MacvlanMode::Private => "private",
            MacvlanMode::Vepa => "vepa",
            MacvlanMode::Bridge => "bridge",
            MacvlanMode::Passthru => "passthru",
        }
    }

    /// Parses the config spelling (case-sensitive, as the reference).
    pub fn parse(s: &str) -> Option<MacvlanMode> {
        [
            MacvlanMode::Bridge,
            MacvlanMode::Private,
            MacvlanMode::Vepa,
            MacvlanMode::Passthru,
        ]
        .into_iter()
        .find(|m| m.name() == s)
    }
}

/// ipvlan modes (`IPVLAN_MODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpvlanMode {
    /// Layer 2: the children answer ARP/ND themselves.
    L2,
    /// Layer 3: the parent routes.
    L3,
    /// Layer 3 with netfilter on the way (l3s).
    L3s,
}

impl IpvlanMode {
    fn to_nl(self) -> NlIpvlan {
        match self {
            IpvlanMode::L2 => NlIpvlan::L2,
            IpvlanMode::L3 => NlIpvlan::L3,
            IpvlanMode::L3s => NlIpvlan::L3S,
        }
    }

    fn from_nl(m: NlIpvlan) -> Option<IpvlanMode> {
        Some(match m {
            NlIpvlan::L2 => IpvlanMode::L2,
            NlIpvlan::L3 => IpvlanMode::L3,
            NlIpvlan::L3S => IpvlanMode::L3s,
            _ => return None,
        })
    }

    /// The config spelling (`l2`, `l3`, `l3s`).
    pub fn name(self) -> &'static str {
        match self {
            IpvlanMode::L2 => "l2",
            IpvlanMode::L3 => "l3",
            IpvlanMode::L3s => "l3s",
        }
    }

    /// Parses the config spelling (case-sensitive, as the reference).
    pub fn parse(s: &str) -> Option<IpvlanMode> {
        [IpvlanMode::L2, IpvlanMode::L3, IpvlanMode::L3s]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// A link kind with the attributes its plugin sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind {
    /// `macvlan` with its mode and broadcast queue length (0 = kernel default).
    Macvlan {
        /// Mode.
        mode: MacvlanMode,
        /// `IFLA_MACVLAN_BC_QUEUE_LEN`, sent only when above 0.
        bc_queue_len: u32,
    },
    /// `ipvlan` with its mode (flags 0: bridge).
    Ipvlan {
        /// Mode.
        mode: IpvlanMode,
    },
    /// An 802.1Q `vlan` with its id.
    Vlan {
        /// VLAN id, 0 to 4094.
        id: u16,
    },
    /// `dummy`.
    Dummy,
}

impl ChildKind {
    /// The `IFLA_INFO_KIND` string.
    pub fn kind(&self) -> &'static str {
        match self {
            ChildKind::Macvlan { .. } => "macvlan",
            ChildKind::Ipvlan { .. } => "ipvlan",
            ChildKind::Vlan { .. } => "vlan",
            ChildKind::Dummy => "dummy",
        }
    }
}

/// How to create a child link ([`Netlink::create_child`]).
#[derive(Debug, Clone, Copy)]
pub struct ChildOpts<'a> {
    /// Name at creation.
    pub name: &'a str,
    /// Kind and its attributes.
    pub kind: ChildKind,
    /// Index of the parent (`IFLA_LINK`), in the requesting handle's namespace.
    pub master: Option<u32>,
    /// MTU; `None` = the kernel's choice (the parent's).
    pub mtu: Option<u32>,
    /// MAC; `None` = the kernel's choice.
    pub mac: Option<Mac>,
    /// Create it straight into this namespace (`IFLA_NET_NS_FD`).
    pub ns: Option<&'a NetNs>,
}

/// What CHECK and host-device read besides [`super::Link`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkExtras {
    /// `IFLA_IFALIAS` (empty when unset).
    pub alias: String,
    /// `IFLA_PERM_ADDRESS`, `aa:bb:..` (empty when the kernel has none).
    pub perm_mac: String,
    /// `IFLA_PARENT_DEV_NAME`: the bus device under a physical netdev
    /// (`0000:01:00.0`); empty for virtual links.
    pub parent_dev: String,
    /// `IFLA_PARENT_DEV_BUS_NAME`: that device's bus (`pci`, `virtio`).
    pub parent_bus: String,
    /// The kind data of the kinds in [`ChildKind`].
    pub kind: Option<ChildKind>,
}

impl LinkExtras {
    fn from_message(m: LinkMessage) -> LinkExtras {
        let mut x = LinkExtras::default();
        for a in m.attributes {
            match a {
                LinkAttribute::IfAlias(s) => x.alias = s,
                LinkAttribute::PermAddress(b) => x.perm_mac = format_hw(&b),
                LinkAttribute::ParentDevName(s) => x.parent_dev = s,
                LinkAttribute::ParentDevBusName(s) => x.parent_bus = s,
                LinkAttribute::LinkInfo(infos) => x.kind = kind_data(infos),
                _ => {}
            }
        }
        x
    }
}

/// `IFLA_LINKINFO` → the kind data of the kinds we create.
fn kind_data(infos: Vec<LinkInfo>) -> Option<ChildKind> {
    let mut kind = None;
    let mut data = None;
    for i in infos {
        match i {
            LinkInfo::Kind(k) => kind = Some(k),
            LinkInfo::Data(d) => data = Some(d),
            _ => {}
        }
    }
    match (kind?, data) {
        (InfoKind::Dummy, _) => Some(ChildKind::Dummy),
        (InfoKind::MacVlan, Some(InfoData::MacVlan(opts))) => {
            let mut mode = None;
            let mut bc_queue_len = 0;
            for o in opts {
                match o {
                    InfoMacVlan::Mode(m) => mode = MacvlanMode::from_nl(m),
                    InfoMacVlan::BcQueueLen(n) => bc_queue_len = n,
                    _ => {}
                }
            }
            mode.map(|mode| ChildKind::Macvlan { mode, bc_queue_len })
        }
        (InfoKind::IpVlan, Some(InfoData::IpVlan(opts))) => {
            opts.into_iter().find_map(|o| match o {
                InfoIpVlan::Mode(m) => {
                    IpvlanMode::from_nl(m).map(|mode| ChildKind::Ipvlan { mode })
                }
                _ => None,
            })
        }
        (InfoKind::Vlan, Some(InfoData::Vlan(opts))) => opts.into_iter().find_map(|o| match o {
            InfoVlan::Id(id) => Some(ChildKind::Vlan { id }),
            _ => None,
        }),
        _ => None,
    }
}

/// `IFLA_LINKINFO` of a new link of `kind`.
fn link_info(kind: ChildKind) -> Vec<LinkInfo> {
    match kind {
        ChildKind::Macvlan { mode, bc_queue_len } => {
            let mut data = vec![InfoMacVlan::Mode(mode.to_nl())];
            if bc_queue_len > 0 {
                data.push(InfoMacVlan::BcQueueLen(bc_queue_len));
            }
            vec![
                LinkInfo::Kind(InfoKind::MacVlan),
                LinkInfo::Data(InfoData::MacVlan(data)),
            ]
        }
        ChildKind::Ipvlan { mode } => vec![
            LinkInfo::Kind(InfoKind::IpVlan),
            LinkInfo::Data(InfoData::IpVlan(vec![
                InfoIpVlan::Mode(mode.to_nl()),
                InfoIpVlan::Flags(IpVlanFlags::empty()),
            ])),
        ],
        ChildKind::Vlan { id } => vec![
            LinkInfo::Kind(InfoKind::Vlan),
            LinkInfo::Data(InfoData::Vlan(vec![InfoVlan::Id(id)])),
        ],
        ChildKind::Dummy => vec![LinkInfo::Kind(InfoKind::Dummy)],
    }
}

/// `ip link add link <master> name <n> [mtu] [address] [netns] type <kind> …`
/// (sent with `NLM_F_CREATE | NLM_F_EXCL`: without EXCL an older kernel
/// that finds the name in the caller's namespace modifies that link).
/// `IFLA_TXQLEN` is never sent (0 would zero the queue).
pub(crate) fn child_message(o: &ChildOpts<'_>) -> Rtm<LinkMessage> {
    let mut m = LinkMessage::default();
    m.attributes.push(LinkAttribute::IfName(o.name.to_string()));
    if let Some(master) = o.master {
        m.attributes.push(LinkAttribute::Link(master));
    }
    if let Some(mtu) = o.mtu {
        m.attributes.push(LinkAttribute::Mtu(mtu));
    }
    if let Some(mac) = o.mac {
        m.attributes.push(LinkAttribute::Address(mac.0.to_vec()));
    }
    if let Some(ns) = o.ns {
        // The namespace file stays open (borrowed) until the ACK.
        m.attributes.push(LinkAttribute::NetNsFd(ns.as_raw_fd()));
    }
    m.attributes
        .push(LinkAttribute::LinkInfo(link_info(o.kind)));
    Rtm(RTM_NEWLINK, m)
}

impl Netlink {
    /// Creates a child link (in `opts.ns` when given, else here). A taken
    /// name is an EEXIST error; a kind the kernel lacks is EOPNOTSUPP.
    pub fn create_child(&self, opts: &ChildOpts<'_>) -> Result<(), NetError> {
        let op = format!("create {} {}", opts.kind.kind(), opts.name);
        log::debug!("{op}");
        self.route()
            .ack(&child_message(opts), NLM_F_CREATE | NLM_F_EXCL, &op)
    }

    /// Renames a link (it must be down, or the kernel refuses with EBUSY).
    pub fn set_name(&self, link: &super::Link, name: &str) -> Result<(), NetError> {
        let m = set_message(link.index, vec![LinkAttribute::IfName(name.to_string())]);
        self.route()
            .ack(&m, 0, &format!("rename {} to {name}", link.name))
    }

    /// Moves a link into `ns` and renames it there to `name`, in one request.
    /// The kernel moves it first and renames after, so a taken `name` can
    /// leave it moved under its old name: only use this towards a namespace
    /// where neither name can be taken (an empty one), or see
    /// [`Netlink::move_rename_alias`].
    pub fn set_ns_name(&self, link: &super::Link, ns: &NetNs, name: &str) -> Result<(), NetError> {
        self.move_rename_alias(link, ns, name, None)
    }

    /// One `RTM_SETLINK` that moves a link into `ns`, names it `name` there
    /// and sets its alias (`Some("")` clears it). The kernel moves the link
    /// under its current name when that name is free in `ns` and renames it
    /// afterwards (a taken `name` then fails after the move); when the
    /// current name is taken there it moves it straight under `name` (a
    /// taken `name` then fails before anything moved). The alias is set
    /// last, inside `ns`.
    pub fn move_rename_alias(
        &self,
        link: &super::Link,
        ns: &NetNs,
        name: &str,
        alias: Option<&str>,
    ) -> Result<(), NetError> {
        let mut attrs = vec![
            LinkAttribute::NetNsFd(ns.as_raw_fd()),
            LinkAttribute::IfName(name.to_string()),
        ];
        if let Some(a) = alias {
            attrs.push(LinkAttribute::IfAlias(a.to_string()));
        }
        let op = format!(
            "move {} to netns {} as {name}",
            link.name,
            ns.path().display()
        );
        self.route().ack(&set_message(link.index, attrs), 0, &op)
    }

    /// Sets `IFLA_IFALIAS`; an empty alias clears it.
    pub fn set_alias(&self, link: &super::Link, alias: &str) -> Result<(), NetError> {
        let m = set_message(link.index, vec![LinkAttribute::IfAlias(alias.to_string())]);
        self.route()
            .ack(&m, 0, &format!("set alias of {} to {alias:?}", link.name))
    }

    /// Alias, permanent MAC, bus device and kind data of the link with
    /// index `index`; `Ok(None)` when there is no such link.
    pub fn link_extras(&self, index: u32) -> Result<Option<LinkExtras>, NetError> {
        match self
            .route()
            .get(&get_message(index, None), &format!("get link {index}"))
        {
            Ok(Some(Rtm(RTM_NEWLINK, m))) => Ok(Some(LinkExtras::from_message(m))),
            Ok(_) => Ok(None),
            Err(e) if e.raw_errno() == Some(libc_errno::ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_case_sensitively() {
        assert_eq!(MacvlanMode::parse("bridge"), Some(MacvlanMode::Bridge));
        assert_eq!(MacvlanMode::parse("passthru"), Some(MacvlanMode::Passthru));
        assert_eq!(MacvlanMode::parse("PRIVATE"), None);
        assert_eq!(MacvlanMode::parse("source"), None);
        assert_eq!(IpvlanMode::parse("l3s"), Some(IpvlanMode::L3s));
        assert_eq!(IpvlanMode::parse("L2"), None);
        for m in ["bridge", "private", "vepa", "passthru"] {
            let mode = MacvlanMode::parse(m).unwrap();
            assert_eq!(MacvlanMode::from_nl(mode.to_nl()), Some(mode));
        }
    }

    #[test]
    fn child_request_round_trips_through_the_parser() {
        use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST, Parseable};
        let kinds = [
            ChildKind::Macvlan {
                mode: MacvlanMode::Vepa,
                bc_queue_len: 0,
            },
            ChildKind::Macvlan {
                mode: MacvlanMode::Bridge,
                bc_queue_len: 500,
            },
            ChildKind::Ipvlan {
                mode: IpvlanMode::L3s,
            },
            ChildKind::Vlan { id: 4094 },
            ChildKind::Dummy,
        ];
        for kind in kinds {
            let nl = Netlink::capture();
            nl.create_child(&ChildOpts {
                name: "veth01234567",
                kind,
                master: Some(7),
                mtu: Some(1400),
                mac: Some(Mac([2, 0, 0, 0, 0, 1])),
                ns: None,
            })
            .unwrap();
            let sent = nl.captured().pop().unwrap();
            let msg_type = u16::from_ne_bytes([sent[4], sent[5]]);
            let flags = u16::from_ne_bytes([sent[6], sent[7]]);
            assert_eq!(msg_type, 16, "RTM_NEWLINK");
            assert_eq!(flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
            let m = LinkMessage::parse(&sent[16..]).unwrap();
            let l = super::super::Link::from_message(m.clone());
            assert_eq!(
                (l.name.as_str(), l.mtu, l.peer_index, l.mac.as_str()),
                ("veth01234567", 1400, Some(7), "02:00:00:00:00:01")
            );
            assert_eq!(l.kind, kind.kind());
            assert_eq!(LinkExtras::from_message(m).kind, Some(kind));
        }
    }

    #[test]
    fn extras_of_a_physical_device() {
        let mut m = LinkMessage::default();
        m.attributes = vec![
            LinkAttribute::IfAlias("ens1f0".into()),
            LinkAttribute::PermAddress(vec![2, 0, 0, 0, 0, 0x1f]),
            LinkAttribute::ParentDevName("0000:01:10.0".into()),
            LinkAttribute::ParentDevBusName("pci".into()),
        ];
        assert_eq!(
            LinkExtras::from_message(m),
            LinkExtras {
                alias: "ens1f0".into(),
                perm_mac: "02:00:00:00:00:1f".into(),
                parent_dev: "0000:01:10.0".into(),
                parent_bus: "pci".into(),
                kind: None,
            }
        );
    }
}
