//! Links of the "child" kinds the interface plugins create (macvlan,
//! ipvlan, vlan, dummy), moving a link between namespaces under a new
//! name, `IFLA_IFALIAS`, and reading a link's kind data back for CHECK.

use super::link::{
    IFINFOMSG_LEN, IFLA_ADDRESS, IFLA_IFNAME, IFLA_INFO_DATA, IFLA_INFO_KIND, IFLA_LINK,
    IFLA_LINKINFO, IFLA_MTU, IFLA_NET_NS_FD, get_request, ifinfomsg, set_request,
};
use super::msg::{
    self, AF_UNSPEC, Malformed, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, RTM_NEWLINK,
    Request, attrs, cstr, find_attr,
};
use super::{Mac, Netlink};
use crate::error::{NetError, libc_errno};
use crate::netns::NetNs;
use std::os::fd::AsRawFd;

const IFLA_IFALIAS: u16 = 20;
const IFLA_PERM_ADDRESS: u16 = 54;

const IFLA_MACVLAN_MODE: u16 = 1;
const IFLA_MACVLAN_BC_QUEUE_LEN: u16 = 7;
const IFLA_IPVLAN_MODE: u16 = 1;
const IFLA_IPVLAN_FLAGS: u16 = 2;
const IFLA_VLAN_ID: u16 = 1;

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
    fn bits(self) -> u32 {
        match self {
            MacvlanMode::Private => 1,
            MacvlanMode::Vepa => 2,
            MacvlanMode::Bridge => 4,
            MacvlanMode::Passthru => 8,
        }
    }

    fn from_bits(b: u32) -> Option<MacvlanMode> {
        Some(match b {
            1 => MacvlanMode::Private,
            2 => MacvlanMode::Vepa,
            4 => MacvlanMode::Bridge,
            8 => MacvlanMode::Passthru,
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
    fn bits(self) -> u16 {
        match self {
            IpvlanMode::L2 => 0,
            IpvlanMode::L3 => 1,
            IpvlanMode::L3s => 2,
        }
    }

    fn from_bits(b: u16) -> Option<IpvlanMode> {
        Some(match b {
            0 => IpvlanMode::L2,
            1 => IpvlanMode::L3,
            2 => IpvlanMode::L3s,
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
    /// The kind data of the kinds in [`ChildKind`].
    pub kind: Option<ChildKind>,
}

impl LinkExtras {
    fn from_msg(m: &[u8]) -> Result<LinkExtras, Malformed> {
        let mut x = LinkExtras::default();
        for a in attrs(m.get(IFINFOMSG_LEN..).unwrap_or_default()) {
            let (kind, p) = a?;
            match kind {
                IFLA_IFALIAS => x.alias = cstr(p),
                IFLA_PERM_ADDRESS => x.perm_mac = super::format_hw(p),
                IFLA_LINKINFO => x.kind = kind_data(p)?,
                _ => {}
            }
        }
        Ok(x)
    }
}

/// `IFLA_LINKINFO` → the kind data of the kinds we create.
fn kind_data(info: &[u8]) -> Result<Option<ChildKind>, Malformed> {
    let Some(k) = find_attr(info, IFLA_INFO_KIND)? else {
        return Ok(None);
    };
    let data = find_attr(info, IFLA_INFO_DATA)?.unwrap_or_default();
    let u16_of = |t: u16| -> Result<Option<u16>, Malformed> {
        find_attr(data, t)?.map(|p| msg::u16_at(p, 0)).transpose()
    };
    Ok(match cstr(k).as_str() {
        "macvlan" => {
            let mode = find_attr(data, IFLA_MACVLAN_MODE)?
                .map(|p| msg::u32_at(p, 0))
                .transpose()?
                .and_then(MacvlanMode::from_bits);
            let bc = find_attr(data, IFLA_MACVLAN_BC_QUEUE_LEN)?
                .map(|p| msg::u32_at(p, 0))
                .transpose()?
                .unwrap_or(0);
            mode.map(|mode| ChildKind::Macvlan {
                mode,
                bc_queue_len: bc,
            })
        }
        "ipvlan" => u16_of(IFLA_IPVLAN_MODE)?
            .and_then(IpvlanMode::from_bits)
            .map(|mode| ChildKind::Ipvlan { mode }),
        "vlan" => u16_of(IFLA_VLAN_ID)?.map(|id| ChildKind::Vlan { id }),
        "dummy" => Some(ChildKind::Dummy),
        _ => None,
    })
}

/// A file descriptor as the u32 that `IFLA_NET_NS_FD` carries.
fn fd_u32(ns: &NetNs) -> u32 {
    u32::try_from(ns.as_raw_fd()).unwrap_or(u32::MAX)
}

/// `ip link add link <master> name <n> [mtu] [address] [netns] type <kind> …`,
/// always with `NLM_F_CREATE | NLM_F_EXCL`: without EXCL an older kernel
/// that finds the name in the caller's namespace modifies that link.
/// `IFLA_TXQLEN` is never sent (0 would zero the queue).
pub(crate) fn child_request(o: &ChildOpts<'_>) -> Request {
    let mut r = Request::new(
        RTM_NEWLINK,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        &ifinfomsg(AF_UNSPEC, 0, 0, 0),
    );
    r.attr_str(IFLA_IFNAME, o.name);
    if let Some(m) = o.master {
        r.attr_u32(IFLA_LINK, m);
    }
    if let Some(mtu) = o.mtu {
        r.attr_u32(IFLA_MTU, mtu);
    }
    if let Some(mac) = o.mac {
        r.attr(IFLA_ADDRESS, &mac.0);
    }
    if let Some(ns) = o.ns {
        r.attr_u32(IFLA_NET_NS_FD, fd_u32(ns));
    }
    let info = r.nest(IFLA_LINKINFO);
    r.attr_str(IFLA_INFO_KIND, o.kind.kind());
    match o.kind {
        ChildKind::Macvlan { mode, bc_queue_len } => {
            let d = r.nest(IFLA_INFO_DATA);
            r.attr_u32(IFLA_MACVLAN_MODE, mode.bits());
            if bc_queue_len > 0 {
                r.attr_u32(IFLA_MACVLAN_BC_QUEUE_LEN, bc_queue_len);
            }
            r.end(d);
        }
        ChildKind::Ipvlan { mode } => {
            let d = r.nest(IFLA_INFO_DATA);
            r.attr(IFLA_IPVLAN_MODE, &mode.bits().to_ne_bytes());
            r.attr(IFLA_IPVLAN_FLAGS, &0u16.to_ne_bytes());
            r.end(d);
        }
        ChildKind::Vlan { id } => {
            let d = r.nest(IFLA_INFO_DATA);
            r.attr(IFLA_VLAN_ID, &id.to_ne_bytes());
            r.end(d);
        }
        ChildKind::Dummy => {}
    }
    r.end(info);
    r
}

impl Netlink {
    /// Creates a child link (in `opts.ns` when given, else here). A taken
    /// name is an EEXIST error; a kind the kernel lacks is EOPNOTSUPP.
    pub fn create_child(&self, opts: &ChildOpts<'_>) -> Result<(), NetError> {
        let op = format!("create {} {}", opts.kind.kind(), opts.name);
        log::debug!("{op}");
        self.exec(child_request(opts), &op)
    }

    /// Renames a link (it must be down, or the kernel refuses with EBUSY).
    pub fn set_name(&self, link: &super::Link, name: &str) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        r.attr_str(IFLA_IFNAME, name);
        self.exec(r, &format!("rename {} to {name}", link.name))
    }

    /// Moves a link into `ns` and renames it there to `name`, in one request.
    /// The kernel moves it first and renames after, so a taken `name` can
    /// leave it moved under its old name: only use this towards a namespace
    /// where neither name can be taken (an empty one).
    pub fn set_ns_name(&self, link: &super::Link, ns: &NetNs, name: &str) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        r.attr_u32(IFLA_NET_NS_FD, fd_u32(ns));
        r.attr_str(IFLA_IFNAME, name);
        self.exec(
            r,
            &format!(
                "move {} to netns {} as {name}",
                link.name,
                ns.path().display()
            ),
        )
    }

    /// Sets `IFLA_IFALIAS`; an empty alias clears it.
    pub fn set_alias(&self, link: &super::Link, alias: &str) -> Result<(), NetError> {
        let mut r = set_request(link.index, 0, 0);
        // Not NUL-terminated: the kernel stores the bytes as given.
        r.attr(IFLA_IFALIAS, alias.as_bytes());
        self.exec(r, &format!("set alias of {} to {alias:?}", link.name))
    }

    /// Alias, permanent MAC and kind data of the link with index `index`;
    /// `Ok(None)` when there is no such link.
    pub fn link_extras(&self, index: u32) -> Result<Option<LinkExtras>, NetError> {
        let got = self.collect(
            || get_request(index, None),
            RTM_NEWLINK,
            &format!("get link {index}"),
            |p| LinkExtras::from_msg(p).map(Some),
        );
        match got {
            Ok(v) => Ok(v.into_iter().next()),
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
            assert_eq!(MacvlanMode::from_bits(mode.bits()), Some(mode));
        }
    }

    #[test]
    fn child_request_round_trips_through_the_parser() {
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
            let r = child_request(&ChildOpts {
                name: "veth01234567",
                kind,
                master: Some(7),
                mtu: Some(1400),
                mac: Some(Mac([2, 0, 0, 0, 0, 1])),
                ns: None,
            });
            assert_eq!(r.kind(), RTM_NEWLINK);
            assert_eq!(
                r.flags(),
                NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
            );
            let l = super::super::Link::from_msg(r.payload()).unwrap();
            assert_eq!(
                (l.name.as_str(), l.mtu, l.peer_index, l.mac.as_str()),
                ("veth01234567", 1400, Some(7), "02:00:00:00:00:01")
            );
            assert_eq!(l.kind, kind.kind());
            let x = LinkExtras::from_msg(r.payload()).unwrap();
            assert_eq!(x.kind, Some(kind));
        }
    }
}
