//! Traffic control, as the bandwidth plugin uses it: ifb devices, root
//! tbf and ingress qdiscs, and a u32 filter that redirects everything to
//! another device with a mirred action. All netlink-packet-route
//! messages; the tbf parameters, which the crate does not type, are
//! [`gaps::TbfQopt`].

use super::{Link, Netlink, ok_if_missing};
use crate::error::NetError;
use crate::nl::gaps::{self, TbfQopt};
use crate::nl::rtm::{
    RTM_DELQDISC, RTM_GETLINK, RTM_GETQDISC, RTM_GETTFILTER, RTM_NEWLINK, RTM_NEWQDISC,
    RTM_NEWTFILTER, RTM_SETLINK, Rtm,
};
use netlink_packet_core::{DefaultNla, NLM_F_CREATE, NLM_F_EXCL, NlasIterator};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::tc::{
    TcAction, TcActionAttribute, TcActionGeneric, TcActionMirrorOption, TcActionOption,
    TcActionType, TcAttribute, TcFilterU32Option, TcHandle, TcMessage, TcMirror,
    TcMirrorActionType, TcOption, TcU32Key, TcU32Selector, TcU32SelectorFlags,
};

/// The root of a device's egress (`TC_H_ROOT`), as a qdisc's parent.
pub const HANDLE_ROOT: u32 = 0xffff_ffff;
/// The parent of an ingress qdisc (`TC_H_INGRESS`).
pub const HANDLE_INGRESS: u32 = 0xffff_fff1;
/// The ingress qdisc's own handle, `ffff:`: the parent of its filters.
pub const HANDLE_INGRESS_QDISC: u32 = 0xffff_0000;
/// The tbf's handle, `1:`, as the reference makes it.
pub const HANDLE_TBF: u32 = 0x0001_0000;
/// `ETH_P_ALL`: a filter for every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// The redirect filter's priority (the reference's).
const FILTER_PRIO: u16 = 1;
/// `errno`s that mean "no such qdisc" on delete: ENOENT, EINVAL (the
/// kernel answers a delete of the default root qdisc with it), ENODEV.
const QDISC_MISSING: [i32; 3] = [2, 22, 19];
/// `ENODEV`: the device is gone.
const ENODEV: i32 = 19;

/// A tbf qdisc's parameters, in the kernel's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Rate, bytes per second.
    pub rate: u64,
    /// Bucket, psched ticks (64 ns) of transmission at `rate`.
    pub buffer: u32,
    /// Queue limit, bytes.
    pub limit: u32,
}

/// A qdisc read back from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    /// Kind: "tbf", "ingress", "noqueue", …
    pub kind: String,
    /// Its handle (`1:` = 0x10000).
    pub handle: u32,
    /// Its parent ([`HANDLE_ROOT`], [`HANDLE_INGRESS`] or a class).
    pub parent: u32,
    /// The parameters, for a tbf.
    pub tbf: Option<Tbf>,
}

/// A filter read back from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Classifier kind: "u32", …
    pub kind: String,
    /// Priority.
    pub priority: u16,
    /// Protocol (host byte order; `ETH_P_ALL` = 3).
    pub protocol: u16,
    /// The device a mirred action redirects to (egress redirect).
    pub redirect_to: Option<u32>,
}

/// An ifb device, as GC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ifb {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// `IFLA_IFALIAS`, empty when unset.
    pub alias: String,
    /// Administratively up.
    pub up: bool,
}

fn handle(h: u32) -> TcHandle {
    TcHandle::from(h)
}

fn index_i32(link: &Link) -> Result<i32, NetError> {
    i32::try_from(link.index)
        .map_err(|_| NetError::other(format!("index of {}", link.name), "out of range"))
}

/// A qdisc message on `link` with `parent` and `handle`.
fn qdisc_msg(link: &Link, parent: u32, h: u32) -> Result<TcMessage, NetError> {
    let mut msg = TcMessage::with_index(index_i32(link)?);
    msg.header.parent = handle(parent);
    msg.header.handle = handle(h);
    Ok(msg)
}

/// The tbf's `TCA_OPTIONS`: the 36-byte parameters and, for a rate that
/// does not fit their 32 bits, `TCA_TBF_RATE64`.
pub(crate) fn tbf_options(t: &Tbf) -> Vec<TcOption> {
    let qopt = TbfQopt {
        rate: u32::try_from(t.rate).unwrap_or(u32::MAX),
        limit: t.limit,
        buffer: t.buffer,
    };
    let mut out = vec![TcOption::Other(DefaultNla::new(
        gaps::TCA_TBF_PARMS,
        qopt.to_bytes().to_vec(),
    ))];
    if t.rate > u64::from(u32::MAX) {
        out.push(TcOption::Other(DefaultNla::new(
            gaps::TCA_TBF_RATE64,
            t.rate.to_ne_bytes().to_vec(),
        )));
    }
    out
}

/// The mirred action "egress redirect to `to`", packet stolen.
fn redirect_action(to: u32) -> TcAction {
    let mut generic = TcActionGeneric::default();
    generic.action = TcActionType::Stolen;
    let mut parms = TcMirror::default();
    parms.generic = generic;
    parms.eaction = TcMirrorActionType::EgressRedir;
    parms.ifindex = to;
    let mut action = TcAction::default();
    action.attributes = vec![
        TcActionAttribute::Kind("mirred".into()),
        TcActionAttribute::Options(vec![TcActionOption::Mirror(TcActionMirrorOption::Parms(
            parms,
        ))]),
    ];
    action
}

/// The reference's filter: u32 matching everything (one zero key,
/// terminal), class 1:1, all protocols, priority 1, under `ffff:`.
pub(crate) fn redirect_filter_msg(from: &Link, to: u32) -> Result<TcMessage, NetError> {
    let mut msg = qdisc_msg(from, HANDLE_INGRESS_QDISC, 0)?;
    msg.header.info = (u32::from(FILTER_PRIO) << 16) | u32::from(ETH_P_ALL.to_be());
    let mut sel = TcU32Selector::default();
    sel.flags = TcU32SelectorFlags::Terminal;
    sel.nkeys = 1;
    sel.keys = vec![TcU32Key::default()];
    msg.attributes = vec![
        TcAttribute::Kind("u32".into()),
        TcAttribute::Options(vec![
            TcOption::U32(TcFilterU32Option::ClassId(TcHandle { major: 1, minor: 1 })),
            TcOption::U32(TcFilterU32Option::Selector(sel)),
            TcOption::U32(TcFilterU32Option::Action(vec![redirect_action(to)])),
        ]),
    ];
    Ok(msg)
}

/// A tbf's parameters from its dumped `TCA_OPTIONS` (which the crate
/// returns whole, as one attribute, for kinds it does not know).
pub(crate) fn parse_tbf(options: &[TcOption]) -> Option<Tbf> {
    let mut qopt = None;
    let mut rate64 = None;
    for opt in options {
        let TcOption::Other(nla) = opt else { continue };
        let outer = gaps::nla_value(nla);
        for inner in NlasIterator::new(&outer[..]).flatten() {
            match inner.kind() {
                gaps::TCA_TBF_PARMS => qopt = TbfQopt::parse(inner.value()),
                gaps::TCA_TBF_RATE64 => {
                    rate64 = inner
                        .value()
                        .get(..8)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .map(u64::from_ne_bytes);
                }
                _ => {}
            }
        }
    }
    let q = qopt?;
    Some(Tbf {
        rate: rate64.unwrap_or(u64::from(q.rate)),
        buffer: q.buffer,
        limit: q.limit,
    })
}

fn parse_qdisc(msg: TcMessage) -> Qdisc {
    let mut kind = String::new();
    let mut options = Vec::new();
    for a in msg.attributes {
        match a {
            TcAttribute::Kind(k) => kind = k,
            TcAttribute::Options(o) => options = o,
            _ => {}
        }
    }
    let tbf = if kind == "tbf" {
        parse_tbf(&options)
    } else {
        None
    };
    Qdisc {
        kind,
        handle: msg.header.handle.into(),
        parent: msg.header.parent.into(),
        tbf,
    }
}

fn parse_filter(msg: TcMessage) -> Filter {
    let info = msg.header.info;
    let mut f = Filter {
        kind: String::new(),
        priority: (info >> 16) as u16,
        protocol: u16::from_be((info & 0xffff) as u16),
        redirect_to: None,
    };
    for a in msg.attributes {
        match a {
            TcAttribute::Kind(k) => f.kind = k,
            TcAttribute::Options(opts) => {
                for o in opts {
                    let TcOption::U32(TcFilterU32Option::Action(actions)) = o else {
                        continue;
                    };
                    for act in actions {
                        for aa in act.attributes {
                            let TcActionAttribute::Options(ao) = aa else {
                                continue;
                            };
                            for x in ao {
                                if let TcActionOption::Mirror(TcActionMirrorOption::Parms(m)) = x
                                    && m.eaction == TcMirrorActionType::EgressRedir
                                {
                                    f.redirect_to = Some(m.ifindex);
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    f
}

impl Netlink {
    /// Creates the ifb `name` with `mtu` and a transmit queue length of 0
    /// (as the reference, plugins#1097), then labels it with `alias` and
    /// sets it up. The kernel ignores IFLA_IFALIAS when creating a link,
    /// hence the second request; until it, the ifb is down and unlabelled.
    pub fn create_ifb(&self, name: &str, mtu: u32, alias: Option<&str>) -> Result<Link, NetError> {
        let op = format!("create ifb {name}");
        let mut msg = LinkMessage::default();
        msg.attributes = vec![
            LinkAttribute::IfName(name.into()),
            LinkAttribute::Mtu(mtu),
            LinkAttribute::TxQueueLen(0),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Ifb)]),
        ];
        let mut set = LinkMessage::default();
        set.header.flags = LinkFlags::Up;
        set.header.change_mask = LinkFlags::Up;
        set.attributes = vec![LinkAttribute::IfName(name.into())];
        match alias {
            Some(a) => set.attributes.push(LinkAttribute::IfAlias(a.into())),
            // Nothing to label: up from the start, one request.
            None => {
                msg.header.flags = LinkFlags::Up;
                msg.header.change_mask = LinkFlags::Up;
            }
        }
        self.route()
            .ack(&Rtm(RTM_NEWLINK, msg), NLM_F_CREATE | NLM_F_EXCL, &op)?;
        if alias.is_some() {
            self.route()
                .ack(&Rtm(RTM_SETLINK, set), 0, &format!("label ifb {name}"))?;
        }
        self.must_link(name)
    }

    /// The ifb devices of this namespace.
    pub fn ifbs(&self) -> Result<Vec<Ifb>, NetError> {
        self.route().dump(
            || Rtm(RTM_GETLINK, LinkMessage::default()),
            "list links",
            |m| {
                let Rtm(RTM_NEWLINK, l) = m else {
                    return None;
                };
                let mut out = Ifb {
                    index: l.header.index,
                    name: String::new(),
                    alias: String::new(),
                    up: l.header.flags.contains(LinkFlags::Up),
                };
                let mut is_ifb = false;
                for a in l.attributes {
                    match a {
                        LinkAttribute::IfName(n) => out.name = n,
                        LinkAttribute::IfAlias(s) => out.alias = s,
                        LinkAttribute::LinkInfo(infos) => {
                            is_ifb = infos
                                .iter()
                                .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Ifb)));
                        }
                        _ => {}
                    }
                }
                is_ifb.then_some(out)
            },
        )
    }

    /// Adds a tbf as `link`'s root qdisc, handle `1:`; fails if a root
    /// qdisc of ours is there already.
    pub fn add_tbf(&self, link: &Link, tbf: &Tbf) -> Result<(), NetError> {
        let mut msg = qdisc_msg(link, HANDLE_ROOT, HANDLE_TBF)?;
        msg.attributes = vec![
            TcAttribute::Kind("tbf".into()),
            TcAttribute::Options(tbf_options(tbf)),
        ];
        self.route().ack(
            &Rtm(RTM_NEWQDISC, msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("add tbf qdisc to {}", link.name),
        )
    }

    /// Adds the ingress qdisc (`ffff:`) to `link`.
    pub fn add_ingress_qdisc(&self, link: &Link) -> Result<(), NetError> {
        let mut msg = qdisc_msg(link, HANDLE_INGRESS, HANDLE_INGRESS_QDISC)?;
        msg.attributes = vec![TcAttribute::Kind("ingress".into())];
        self.route().ack(
            &Rtm(RTM_NEWQDISC, msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("add ingress qdisc to {}", link.name),
        )
    }

    /// Redirects everything arriving on `from` to `to`'s egress: a u32
    /// filter under `from`'s ingress qdisc with a mirred action.
    pub fn add_redirect_filter(&self, from: &Link, to: &Link) -> Result<(), NetError> {
        let msg = redirect_filter_msg(from, to.index)?;
        self.route().ack(
            &Rtm(RTM_NEWTFILTER, msg),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("add filter redirecting {} to {}", from.name, to.name),
        )
    }

    /// `link`'s qdiscs.
    pub fn qdiscs(&self, link: &Link) -> Result<Vec<Qdisc>, NetError> {
        let index = index_i32(link)?;
        self.route().dump(
            || Rtm(RTM_GETQDISC, TcMessage::with_index(index)),
            &format!("list qdiscs of {}", link.name),
            |m| match m {
                Rtm(RTM_NEWQDISC, q) if q.header.index == index => Some(parse_qdisc(q)),
                _ => None,
            },
        )
    }

    /// `link`'s filters under the qdisc or class `parent`.
    pub fn filters(&self, link: &Link, parent: u32) -> Result<Vec<Filter>, NetError> {
        let mut req = qdisc_msg(link, parent, 0)?;
        req.header.info = 0;
        let index = req.header.index;
        self.route().dump(
            || Rtm(RTM_GETTFILTER, req.clone()),
            &format!("list filters of {}", link.name),
            |m| match m {
                Rtm(RTM_NEWTFILTER, f) if f.header.index == index => Some(parse_filter(f)),
                _ => None,
            },
        )
    }

    /// Deletes `link`'s root qdisc; none (or no device) is success.
    pub fn del_root_qdisc(&self, link: &Link) -> Result<(), NetError> {
        let msg = qdisc_msg(link, HANDLE_ROOT, 0)?;
        ok_if_missing(
            self.route().ack(
                &Rtm(RTM_DELQDISC, msg),
                0,
                &format!("delete root qdisc of {}", link.name),
            ),
            &QDISC_MISSING,
        )
    }

    /// Deletes `link`'s ingress qdisc and with it its filters; none (or no
    /// device) is success.
    pub fn del_ingress_qdisc(&self, link: &Link) -> Result<(), NetError> {
        let msg = qdisc_msg(link, HANDLE_INGRESS, HANDLE_INGRESS_QDISC)?;
        ok_if_missing(
            self.route().ack(
                &Rtm(RTM_DELQDISC, msg),
                0,
                &format!("delete ingress qdisc of {}", link.name),
            ),
            &[2, 22, ENODEV],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Emitable;

    fn link(index: u32) -> Link {
        Link {
            index,
            name: format!("if{index}"),
            ..Link::default()
        }
    }

    #[test]
    fn tbf_qopt_layout() {
        let q = TbfQopt {
            rate: 0x0102_0304,
            limit: 128_125,
            buffer: 15_625_000,
        };
        let b = q.to_bytes();
        assert_eq!(b.len(), 36);
        assert_eq!(b[8..12], 0x0102_0304u32.to_ne_bytes());
        assert_eq!(b[24..28], 128_125u32.to_ne_bytes());
        assert_eq!(b[28..32], 15_625_000u32.to_ne_bytes());
        // Cell log, link layer, overhead, peak rate, mtu: zero, as Go's.
        assert!(
            b[..8]
                .iter()
                .chain(&b[12..24])
                .chain(&b[32..])
                .all(|&x| x == 0)
        );
        assert_eq!(TbfQopt::parse(&b), Some(q));
        assert_eq!(TbfQopt::parse(&b[..35]), None);
    }

    /// The options as the kernel dumps them: one TCA_OPTIONS holding the
    /// nested attributes, which the crate returns as `Other`.
    fn as_dumped(opts: &[TcOption]) -> Vec<TcOption> {
        let mut nested = vec![0u8; opts.buffer_len()];
        opts.emit(&mut nested);
        vec![TcOption::Other(DefaultNla::new(2, nested))]
    }

    #[test]
    fn tbf_options_round_trip() {
        for t in [
            Tbf {
                rate: 125_000,
                buffer: 15_625_000,
                limit: 128_125,
            },
            Tbf {
                rate: 5_000_000_000,
                buffer: 3125,
                limit: 126_000_000,
            },
        ] {
            let opts = tbf_options(&t);
            assert_eq!(opts.len(), if t.rate > u64::from(u32::MAX) { 2 } else { 1 });
            assert_eq!(parse_tbf(&as_dumped(&opts)), Some(t));
        }
        assert_eq!(parse_tbf(&[]), None);
    }

    #[test]
    fn redirect_filter_as_tc_sends_it() {
        let msg = redirect_filter_msg(&link(7), 9).unwrap();
        assert_eq!(msg.header.index, 7);
        assert_eq!(u32::from(msg.header.parent), HANDLE_INGRESS_QDISC);
        // Priority 1, ETH_P_ALL in network byte order: what `tc filter add
        // … protocol all prio 1` sends (guide: 0x00010300 on little endian).
        assert_eq!(msg.header.info >> 16, 1);
        assert_eq!(
            (msg.header.info & 0xffff) as u16,
            u16::from_ne_bytes(0x0003u16.to_be_bytes())
        );
        let f = parse_filter(msg);
        assert_eq!(f.kind, "u32");
        assert_eq!(f.priority, 1);
        assert_eq!(f.protocol, ETH_P_ALL);
        assert_eq!(f.redirect_to, Some(9));
    }

    #[test]
    fn requests_are_encodable() {
        // Every request encodes to a whole message (capture mode: nothing
        // is sent).
        let nl = Netlink::capture();
        let l = link(3);
        nl.add_tbf(
            &l,
            &Tbf {
                rate: 125_000,
                buffer: 15_625_000,
                limit: 128_125,
            },
        )
        .unwrap();
        nl.add_ingress_qdisc(&l).unwrap();
        nl.add_redirect_filter(&l, &link(4)).unwrap();
        nl.del_root_qdisc(&l).unwrap();
        nl.del_ingress_qdisc(&l).unwrap();
        let sent = nl.captured();
        assert_eq!(sent.len(), 5);
        for m in &sent {
            let len = u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize;
            assert_eq!(len, m.len());
        }
        // RTM_NEWQDISC, create + exclusive + ack + request.
        assert_eq!(u16::from_ne_bytes([sent[0][4], sent[0][5]]), 36);
        assert_eq!(u16::from_ne_bytes([sent[0][6], sent[0][7]]), 0x605);
        // RTM_NEWTFILTER.
        assert_eq!(u16::from_ne_bytes([sent[2][4], sent[2][5]]), 44);
    }
}
