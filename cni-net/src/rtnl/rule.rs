//! Policy routing rules (`ip rule`): add, delete, dump, for IPv4 and IPv6.

use super::{IpFamily, Netlink, ok_if_missing};
use crate::error::{NetError, libc_errno};
use crate::nl::rtm::{RTM_DELRULE, RTM_GETRULE, RTM_NEWRULE, Rtm};
use ipnetwork::IpNetwork;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};
use std::fmt;

/// A rule "from `src` lookup `table`". Only what the meta plugins use is
/// modelled; rules of other kinds still appear in dumps (with `src` None
/// when they have no source selector, `table` 0 when they are no lookup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Address family of the rule.
    pub family: IpFamily,
    /// Source selector (`from`); `None` = from all.
    pub src: Option<IpNetwork>,
    /// Table looked up (`FRA_TABLE`, else the header's byte).
    pub table: u32,
    /// Priority; `None` on add lets the kernel pick one just below the
    /// first non-zero rule (as the Go reference leaves it).
    pub priority: Option<u32>,
    /// `l3mdev` rule (the one a VRF needs).
    pub l3mdev: bool,
}

impl Rule {
    /// "from `src` lookup `table`", no priority.
    pub fn from_source(src: IpNetwork, table: u32) -> Rule {
        Rule {
            family: if src.is_ipv4() {
                IpFamily::V4
            } else {
                IpFamily::V6
            },
            src: Some(src),
            table,
            priority: None,
            l3mdev: false,
        }
    }

    fn to_message(&self) -> RuleMessage {
        let mut m = RuleMessage::default();
        m.header.family = family_of(self.family);
        m.header.action = RuleAction::ToTable;
        m.header.table = u8::try_from(self.table).unwrap_or(0);
        if let Some(src) = self.src {
            m.header.src_len = src.prefix();
            m.attributes.push(RuleAttribute::Source(src.network()));
        }
        m.attributes.push(RuleAttribute::Table(self.table));
        if let Some(p) = self.priority {
            m.attributes.push(RuleAttribute::Priority(p));
        }
        m
    }

    fn from_message(m: RuleMessage) -> Option<Rule> {
        let family = match m.header.family {
            AddressFamily::Inet => IpFamily::V4,
            AddressFamily::Inet6 => IpFamily::V6,
            _ => return None,
        };
        let mut rule = Rule {
            family,
            src: None,
            table: u32::from(m.header.table),
            priority: None,
            l3mdev: false,
        };
        for a in m.attributes {
            match a {
                RuleAttribute::Source(ip) => {
                    rule.src = IpNetwork::new(ip, m.header.src_len).ok();
                }
                RuleAttribute::Table(t) => rule.table = t,
                RuleAttribute::Priority(p) => rule.priority = Some(p),
                RuleAttribute::L3MDev(on) => rule.l3mdev = on,
                _ => {}
            }
        }
        Some(rule)
    }
}

fn family_of(f: IpFamily) -> AddressFamily {
    match f {
        IpFamily::V4 => AddressFamily::Inet,
        IpFamily::V6 => AddressFamily::Inet6,
    }
}

impl fmt::Display for Rule {
    /// `ip rule`-like: `32765: from 10.0.0.2/32 lookup 100`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = self.priority {
            write!(f, "{p}: ")?;
        }
        match self.src {
            Some(s) => write!(f, "from {s}")?,
            None => write!(f, "from all")?,
        }
        if self.l3mdev {
            write!(f, " lookup [l3mdev-table]")
        } else {
            write!(f, " lookup {}", self.table)
        }
    }
}

impl Netlink {
    // ---- rules ----

    /// Adds a rule; an identical one already present is an EEXIST error.
    pub fn add_rule(&self, rule: &Rule) -> Result<(), NetError> {
        let m = Rtm(RTM_NEWRULE, rule.to_message());
        self.route()
            .ack(&m, NLM_F_CREATE | NLM_F_EXCL, &format!("add rule {rule}"))
    }

    /// Deletes the rule matching `rule` (its priority only if given); no
    /// such rule is not an error.
    pub fn del_rule(&self, rule: &Rule) -> Result<(), NetError> {
        let m = Rtm(RTM_DELRULE, rule.to_message());
        let r = self.route().ack(&m, 0, &format!("delete rule {rule}"));
        ok_if_missing(r, &[libc_errno::ENOENT, libc_errno::ESRCH])
    }

    /// The rules of both families in one dump (`AF_UNSPEC`).
    pub fn all_rules(&self) -> Result<Vec<Rule>, NetError> {
        self.route().dump(
            || Rtm(RTM_GETRULE, RuleMessage::default()),
            "list rules",
            |m| match m {
                // Multicast routing rules (RTNL_FAMILY_IPMR …) are left out.
                Rtm(RTM_NEWRULE, m) => Rule::from_message(m),
                _ => None,
            },
        )
    }

    /// The rules of one family, in the kernel's (priority) order.
    pub fn rules(&self, family: IpFamily) -> Result<Vec<Rule>, NetError> {
        self.route().dump(
            || {
                let mut m = RuleMessage::default();
                m.header.family = family_of(family);
                Rtm(RTM_GETRULE, m)
            },
            "list rules",
            |m| match m {
                Rtm(RTM_NEWRULE, m) => Rule::from_message(m),
                _ => None,
            },
        )
    }
}
