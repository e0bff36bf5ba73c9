//! What a container cannot change about the device it was given, so that
//! DEL moves back that device and nothing else. Its name, alias and MAC
//! are the container's to set: a container with CAP_NET_ADMIN can rename
//! the device away and plant a veth with the device's name, MAC and alias,
//! which a DEL trusting them would move to the host (a link into the
//! container) and give the host's addresses and routes.
//!
//! Recorded at ADD, from the device in the container, in the host-side
//! state file ([`crate::hostside`]), out of the container's reach:
//! - its kind (`IFLA_INFO_KIND`): none for a physical device, and a
//!   container cannot create a link without a kind;
//! - its permanent address (`IFLA_PERM_ADDRESS`) and the bus device under
//!   it (`IFLA_PARENT_DEV_BUS_NAME`/`IFLA_PARENT_DEV_NAME`), where it has
//!   them: set by the driver, not by anyone through netlink;
//! - what it is linked to (`IFLA_LINK` and `IFLA_LINK_NETNSID`): a veth's
//!   peer, a macvlan's lower device, by index in another namespace and that
//!   namespace's id as the container's namespace numbers it. The container
//!   can choose neither while the device lives: an id names one namespace
//!   for as long as both live, and the container holds no handle on the
//!   host's namespaces to link a veth of its own there;
//! - its index in the container's namespace. Alone it proves nothing (a
//!   container can move the device away and create a link under its
//!   index), but no two links share it.
//!
//! A device that has none of the first three (a dummy) is told only by
//! kind and index, which a container can imitate; such a device carries
//! nothing out of the container either.

use cni_net::{Link, LinkExtras, NetError, Netlink};
use serde::{Deserialize, Serialize};

/// The device's identity (see the module's doc).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Its index in the namespace it was read in.
    pub index: u32,
    /// `IFLA_INFO_KIND`, empty for a physical device.
    #[serde(default)]
    pub kind: String,
    /// `IFLA_PERM_ADDRESS`, empty when it has none (virtual links).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub perm_mac: String,
    /// The bus of the device under it (`pci`), empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_bus: String,
    /// The device under it (`0000:01:00.0`), empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub parent_dev: String,
    /// `IFLA_LINK`: the peer's or lower device's index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<u32>,
    /// `IFLA_LINK_NETNSID`: the namespace `link` is in, as the namespace
    /// the identity was read in numbers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_netnsid: Option<i32>,
}

impl Identity {
    /// `link`'s identity, read through `nl`, the handle of the namespace
    /// it is in. A link gone meanwhile reads as one without extras (it then
    /// matches nothing that had them).
    pub fn of(nl: &Netlink, link: &Link) -> Result<Identity, NetError> {
        let extras = nl.link_extras(link.index)?.unwrap_or_default();
        Ok(Identity::from_parts(link, &extras))
    }

    /// The identity of `link` with its `extras`.
    pub fn from_parts(link: &Link, x: &LinkExtras) -> Identity {
        Identity {
            index: link.index,
            kind: link.kind.clone(),
            perm_mac: x.perm_mac.clone(),
            parent_bus: x.parent_bus.clone(),
            parent_dev: x.parent_dev.clone(),
            link: link.peer_index,
            link_netnsid: link.link_netnsid,
        }
    }

    /// What a move to another namespace keeps that differs in `after`:
    /// empty when `after` can be this device moved (the index and the
    /// namespace id are per namespace, and not compared).
    pub fn moved_differences(&self, after: &Identity) -> Vec<String> {
        let mut d = Vec::new();
        let mut cmp = |what: &str, want: &str, have: &str| {
            if !want.eq_ignore_ascii_case(have) {
                d.push(format!("{what} {have:?}, not {want:?}"));
            }
        };
        cmp("kind", &self.kind, &after.kind);
        cmp("permanent address", &self.perm_mac, &after.perm_mac);
        cmp("bus", &self.parent_bus, &after.parent_bus);
        cmp("bus device", &self.parent_dev, &after.parent_dev);
        if self.link != after.link {
            d.push(format!(
                "linked to index {:?}, not {:?}",
                after.link, self.link
            ));
        }
        d
    }

    /// What differs in `found`, read in the same namespace as this one:
    /// empty when it is the same device.
    pub fn differences(&self, found: &Identity) -> Vec<String> {
        let mut d = Vec::new();
        if self.index != found.index {
            d.push(format!("index {}, not {}", found.index, self.index));
        }
        d.extend(self.moved_differences(found));
        if self.link_netnsid != found.link_netnsid {
            d.push(format!(
                "linked into namespace id {:?}, not {:?}",
                found.link_netnsid, self.link_netnsid
            ));
        }
        d
    }

    /// A link a container cannot make: no kind, a bus device under it.
    pub fn is_physical(&self) -> bool {
        self.kind.is_empty() && !self.parent_dev.is_empty()
    }
}

/// The link of `nl`'s namespace that is the device `id` (read in that
/// namespace) describes, whatever its name; `None` when none is. Each link
/// named one of `names` that is not the device is logged as an impostor
/// and left alone.
pub fn find(nl: &Netlink, id: &Identity, names: &[&str]) -> Result<Option<Link>, NetError> {
    let mut found = None;
    for l in nl.links()? {
        // Only a link that can match, or that claims the device's names,
        // costs a second request.
        let candidate = l.index == id.index && l.kind == id.kind;
        if !candidate && !names.contains(&l.name.as_str()) {
            continue;
        }
        let differences = id.differences(&Identity::of(nl, &l)?);
        if differences.is_empty() {
            found = Some(l);
        } else if names.contains(&l.name.as_str()) {
            log::warn!(
                "{:?} in the container is not the device ADD moved there ({}): left alone",
                l.name,
                differences.join(", ")
            );
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn veth() -> Identity {
        Identity {
            index: 7,
            kind: "veth".into(),
            link: Some(12),
            link_netnsid: Some(0),
            ..Identity::default()
        }
    }

    fn vf() -> Identity {
        Identity {
            index: 9,
            perm_mac: "02:00:00:00:00:01".into(),
            parent_bus: "pci".into(),
            parent_dev: "0000:01:10.0".into(),
            ..Identity::default()
        }
    }

    #[test]
    fn same_device_and_impostors() {
        assert!(veth().differences(&veth()).is_empty());
        assert!(vf().differences(&vf()).is_empty());
        // A veth of the container's own, under the device's index: its
        // peer is in another namespace (or has another index).
        let own = Identity {
            link_netnsid: Some(1),
            ..veth()
        };
        assert_eq!(
            veth().differences(&own),
            ["linked into namespace id Some(1), not Some(0)"]
        );
        let local = Identity {
            link_netnsid: None,
            link: Some(3),
            ..veth()
        };
        assert_eq!(veth().differences(&local).len(), 2);
        // The device's index alone, or a veth in a physical device's place.
        let moved = Identity { index: 8, ..veth() };
        assert_eq!(veth().differences(&moved), ["index 8, not 7"]);
        let fake = Identity { index: 9, ..veth() };
        let d = vf().differences(&fake);
        assert!(d.iter().any(|s| s.starts_with("kind \"veth\"")), "{d:?}");
        assert!(d.iter().any(|s| s.starts_with("bus device")), "{d:?}");
        // The permanent address is compared in any case.
        let upper = Identity {
            perm_mac: "02:00:00:00:00:01".to_uppercase(),
            ..vf()
        };
        assert!(vf().differences(&upper).is_empty());
    }

    #[test]
    fn a_move_keeps_all_but_index_and_namespace_id() {
        let host = Identity {
            index: 4,
            link_netnsid: None,
            ..veth()
        };
        assert!(host.moved_differences(&veth()).is_empty());
        assert!(!host.differences(&veth()).is_empty());
        let other_peer = Identity {
            link: Some(13),
            ..veth()
        };
        assert_eq!(
            host.moved_differences(&other_peer),
            ["linked to index Some(13), not Some(12)"]
        );
    }

    #[test]
    fn physical_means_no_kind_and_a_bus_device() {
        assert!(vf().is_physical());
        assert!(!veth().is_physical());
        let kindless_without_bus = Identity {
            parent_dev: String::new(),
            ..vf()
        };
        assert!(!kindless_without_bus.is_physical());
    }

    #[test]
    fn serialized_shape() {
        let text = serde_json::to_string(&vf()).unwrap();
        assert_eq!(
            text,
            r#"{"index":9,"kind":"","perm_mac":"02:00:00:00:00:01","parent_bus":"pci","parent_dev":"0000:01:10.0"}"#
        );
        assert_eq!(serde_json::from_str::<Identity>(&text).unwrap(), vf());
        let text = serde_json::to_string(&veth()).unwrap();
        assert_eq!(
            text,
            r#"{"index":7,"kind":"veth","link":12,"link_netnsid":0}"#
        );
    }
}
