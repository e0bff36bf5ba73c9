//! A held lease: the ACK it came from, its times, the CNI result it gives,
//! and its on-disk form (one JSON file per client id, so that a restarted
//! daemon keeps renewing and later DELs still release: plugins#235).

use cni_net::{NetError, NetNs};
use cni_skel::state::StateFile;
use cni_skel::{CniResult, IpConfig, Route};
use dhcp4::{Message, classless_routes, opt, static_routes};
use ipnetwork::{IpNetwork, Ipv4Network};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

/// Lease times as wall-clock seconds since the epoch: they must survive a
/// restart of the daemon (a monotonic clock does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Times {
    pub acquired: u64,
    pub renew: u64,
    pub rebind: u64,
    pub expire: u64,
}

/// The shortest lease the daemon schedules by: a server's shorter one is
/// taken as this long, as dhclient does (`expiry < 60` becomes 60).
pub const MIN_LEASE: u64 = 60;
/// The earliest first renewal (T1) after an ACK: a rogue or broken server
/// answering T1 = 0 (or 1 s) would otherwise be asked again the moment it
/// answers, for ever (the Go daemon does that: it sleeps until T1).
pub const MIN_RENEW: u64 = 15;

impl Times {
    /// From the ACK's options 51/58/59 with the RFC 2131 defaults
    /// (T1 = 50%, T2 = 85%); 60 minutes when the server sends no lease
    /// time, as the reference. Then made sane, whatever the server sent
    /// (see [`schedule`]).
    pub fn from_ack(ack: &Message, now: u64) -> Times {
        let (renew, rebind, lease) = schedule(
            ack.u32_option(opt::LEASE_TIME),
            ack.u32_option(opt::RENEWAL_TIME),
            ack.u32_option(opt::REBINDING_TIME),
        );
        Times {
            acquired: now,
            renew: now + renew,
            rebind: now + rebind,
            expire: now + lease,
        }
    }
}

/// `(T1, T2, lease)` in seconds from the ACK's options 58, 59 and 51, with
/// `MIN_RENEW <= T1 < T2 < lease` and `lease >= MIN_LEASE` always:
/// - no lease time: 3600 s (the reference); shorter than [`MIN_LEASE`]:
///   that (dhclient);
/// - T2 of 0, or not below the lease: 85 % of it; T1 of 0, or not below
///   T2: 50 % (RFC 2131 4.4.5), and if that is not below T2 either, both
///   defaults (systemd-networkd's checks);
/// - T1 at least [`MIN_RENEW`], T2 then moved half-way to expiry if T1
///   caught up with it.
pub fn schedule(lease: Option<u32>, t1: Option<u32>, t2: Option<u32>) -> (u64, u64, u64) {
    let lease = lease.map_or(3600, u64::from).max(MIN_LEASE);
    let default_t2 = lease * 85 / 100;
    let t2 = t2
        .map(u64::from)
        .filter(|&v| v > 0 && v < lease)
        .unwrap_or(default_t2);
    let t1 = t1
        .map(u64::from)
        .filter(|&v| v > 0 && v < t2)
        .unwrap_or(lease / 2);
    let (t1, t2) = if t1 < t2 {
        (t1, t2)
    } else {
        (lease / 2, default_t2)
    };
    let t1 = t1.max(MIN_RENEW);
    let t2 = if t2 > t1 { t2 } else { (t1 + lease) / 2 };
    (t1, t2, lease)
}

/// Everything the daemon keeps about one attachment, as stored on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The reference's client id (without option 61's type byte).
    #[serde(with = "bytes_text")]
    pub client_id: Vec<u8>,
    pub container_id: String,
    pub net_name: String,
    pub if_name: String,
    /// The netns path as used (host prefix included): only how to find
    /// the namespace again, which `netns_id` says it must still be.
    pub netns: PathBuf,
    /// The namespace the lease was acquired in. `None` only in a record
    /// stored by an older daemon (adopting it stamps the one found).
    #[serde(default)]
    pub netns_id: Option<NsIdentity>,
    /// Option 55 and the provided options, for renewals.
    pub request: Vec<u8>,
    pub provide: Vec<(u8, Vec<u8>)>,
    /// The last DHCPACK, as received.
    #[serde(with = "bytes_text")]
    pub ack: Vec<u8>,
    pub times: Times,
}

/// Which network namespace a path led to: the device and inode of its nsfs
/// file and the kernel's never-reused cookie (the inode number alone is
/// handed to the next namespace once one dies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsIdentity {
    pub dev: u64,
    pub ino: u64,
    /// `None` on a kernel without `SO_NETNS_COOKIE` (before 5.14).
    pub cookie: Option<u64>,
}

impl NsIdentity {
    pub fn of(ns: &NetNs) -> Result<NsIdentity, String> {
        let (dev, ino) = ns
            .id()
            .ok_or_else(|| format!("fstat netns {}: failed", ns.path().display()))?;
        let cookie = ns.cookie().map_err(|e| e.to_string())?;
        Ok(NsIdentity { dev, ino, cookie })
    }
}

impl std::fmt::Display for NsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dev {} inode {}", self.dev, self.ino)?;
        match self.cookie {
            Some(c) => write!(f, " cookie {c}"),
            None => Ok(()),
        }
    }
}

/// Why [`Record::open_netns`] gave no namespace.
#[derive(Debug)]
pub enum Reopen {
    /// The path names no namespace, or another one: the lease's is gone
    /// for this daemon.
    Gone(String),
    /// It could not be told (out of file descriptors, say): ask again.
    Unsure(String),
}

impl std::fmt::Display for Reopen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reopen::Gone(m) | Reopen::Unsure(m) => f.write_str(m),
        }
    }
}

impl Record {
    /// Opens the lease's namespace by its path again and checks that the
    /// path still names the namespace the lease was acquired in. A
    /// container's `/proc/<pid>/ns/net` names another process's namespace
    /// after PID reuse, and `/run/netns/<name>` a new namespace after the
    /// runtime deleted and re-created it: acting there (setting a link
    /// DOWN, sending from it) would touch someone else's interface.
    pub fn open_netns(&self) -> Result<NetNs, Reopen> {
        let ns = NetNs::open(&self.netns).map_err(|e| match e {
            NetError::NsNotFound { .. } | NetError::NotNetNs { .. } => {
                Reopen::Gone(format!("netns gone ({e})"))
            }
            e => Reopen::Unsure(e.to_string()),
        })?;
        let Some(want) = self.netns_id else {
            return Ok(ns); // an older daemon's record, before adoption
        };
        let found = NsIdentity::of(&ns).map_err(Reopen::Unsure)?;
        let same = found.dev == want.dev
            && found.ino == want.ino
            && (want.cookie.is_none() || found.cookie == want.cookie);
        if !same {
            return Err(Reopen::Gone(format!(
                "netns path {} names another namespace now ({found}; the lease's was {want})",
                self.netns.display()
            )));
        }
        Ok(ns)
    }

    pub fn ack(&self) -> Option<Message> {
        Message::decode(&self.ack)
    }

    pub fn leased(&self) -> Ipv4Addr {
        self.ack()
            .map(|m| m.yiaddr)
            .unwrap_or(Ipv4Addr::UNSPECIFIED)
    }

    pub fn server(&self) -> Option<Ipv4Addr> {
        self.ack().and_then(|m| m.ip_option(opt::SERVER_ID))
    }
}

/// The CNI result of an ACK, as the reference builds it: the address with
/// option 1's mask, the first router as gateway; routes from option 121
/// alone when present (a 0.0.0.0 router means on-link: scope link), else
/// option 33 plus a default route via the router. `priority` sets every
/// route's metric.
pub fn result_of(ack: &Message, priority: Option<u32>) -> Result<CniResult, String> {
    let mask = ack
        .ip_option(opt::SUBNET_MASK)
        .ok_or_else(|| "DHCP option Subnet Mask not found in DHCPACK".to_string())?;
    let prefix = u32::from(mask).leading_ones() as u8;
    let address = Ipv4Network::new(ack.yiaddr, prefix)
        .map_err(|e| format!("bad address {}/{prefix}: {e}", ack.yiaddr))?;
    let gateway = ack.ip_option(opt::ROUTER);
    let mut routes = Vec::new();
    let classless = ack
        .option(opt::CLASSLESS_ROUTES)
        .and_then(classless_routes)
        .unwrap_or_default();
    let route = |dst: Ipv4Addr, len: u8, gw: Option<Ipv4Addr>| -> Option<Route> {
        let dst = Ipv4Network::new(dst, len).ok()?;
        let mut r = Route::new(IpNetwork::V4(dst), gw.map(IpAddr::V4));
        r.priority = priority.unwrap_or(0);
        Some(r)
    };
    if !classless.is_empty() {
        for (dst, len, gw) in classless {
            let on_link = gw.is_unspecified();
            if let Some(mut r) = route(dst, len, (!on_link).then_some(gw)) {
                if on_link {
                    r.scope = Some(253);
                }
                routes.push(r);
            }
        }
    } else {
        let statics = ack
            .option(opt::STATIC_ROUTES)
            .map(static_routes)
            .unwrap_or_default();
        routes.extend(
            statics
                .into_iter()
                .filter_map(|(dst, len, gw)| route(dst, len, Some(gw))),
        );
        if let Some(gw) = gateway {
            routes.extend(route(Ipv4Addr::UNSPECIFIED, 0, Some(gw)));
        }
    }
    Ok(CniResult {
        cni_version: "1.0.0".into(),
        ips: vec![IpConfig {
            interface: None,
            address: IpNetwork::V4(address),
            gateway: gateway.map(IpAddr::V4),
        }],
        routes,
        ..CniResult::default()
    })
}

/// The lease directory: one `<sha256(client id)>.json` per lease (a client
/// id is up to 254 bytes and may hold `/`: not a file name), written and
/// read as the plugins' state files are (`cni_skel::state`: 0600 through
/// a temporary file made anew and renamed, the directory 0700, never
/// through a symlink or anything but a regular file). No fsync: a file
/// only has to outlive the daemon process (the page cache does); after a
/// power loss the containers' netns are gone too, and with them every
/// lease worth keeping.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: PathBuf) -> Store {
        Store { dir }
    }

    fn file_of(&self, client_id: &[u8]) -> StateFile {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(client_id);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        StateFile::named(&self.dir, &format!("{hex}.json"))
    }

    /// Writes the record atomically (a temporary file renamed over the old).
    pub fn save(&self, r: &Record) -> Result<(), String> {
        let text = serde_json::to_vec(r).map_err(|e| e.to_string())?;
        self.file_of(&r.client_id).write(&text).map_err(|e| e.msg)
    }

    pub fn remove(&self, client_id: &[u8]) {
        if let Err(e) = self.file_of(client_id).remove() {
            log::warn!("{}", e.msg);
        }
    }

    /// Every readable record; unreadable files (and temporary files a
    /// killed daemon left) are logged and removed.
    pub fn load_all(&self) -> Vec<Record> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if cni_skel::state::tmp_target(&name).is_some() {
                log::warn!("{}: left by an interrupted write; removed", path.display());
                let _ = cni_skel::state::remove_if_present(&path);
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let read = StateFile::named(&self.dir, &name)
                .read()
                .map_err(|e| e.msg)
                .and_then(|b| b.ok_or_else(|| "gone".to_string()))
                .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(|e| e.to_string()));
            match read {
                Ok(r) if self.file_of(&r.client_id).path() == path => out.push(r),
                Ok(_) => log::warn!("{}: not named after its client id; ignored", path.display()),
                Err(err) => {
                    log::warn!("{}: unreadable lease ({err}); removed", path.display());
                    let _ = cni_skel::state::remove_if_present(&path);
                }
            }
        }
        out
    }
}

/// Bytes as text in JSON: UTF-8 strings as they are (client ids are
/// readable), anything else as `hex:...`.
mod bytes_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(b) {
            Ok(t) if !t.starts_with("hex:") => s.serialize_str(t),
            _ => s.serialize_str(&format!(
                "hex:{}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            )),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let t = String::deserialize(d)?;
        match t.strip_prefix("hex:") {
            None => Ok(t.into_bytes()),
            Some(h) => (0..h.len())
                .step_by(2)
                .map(|i| {
                    h.get(i..i + 2)
                        .and_then(|p| u8::from_str_radix(p, 16).ok())
                        .ok_or_else(|| serde::de::Error::custom("bad hex"))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dhcp4::MessageType;

    fn ack(opts: &[(u8, &[u8])]) -> Message {
        let mut m = Message::request(MessageType::Ack, 1, [2, 0, 0, 0, 0, 1]);
        m.op = dhcp4::BOOTREPLY;
        m.yiaddr = Ipv4Addr::new(10, 131, 0, 50);
        for (c, v) in opts {
            m.set_option(*c, v.to_vec());
        }
        m
    }

    #[test]
    fn result_with_router() {
        let m = ack(&[
            (1, &[255, 255, 255, 0]),
            (3, &[10, 131, 0, 1, 10, 131, 0, 2]),
        ]);
        let r = result_of(&m, None).unwrap();
        let j: serde_json::Value = serde_json::from_str(&r.to_json("1.0.0").unwrap()).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"cniVersion":"1.0.0",
                "ips":[{"address":"10.131.0.50/24","gateway":"10.131.0.1"}],
                "routes":[{"dst":"0.0.0.0/0","gw":"10.131.0.1"}]})
        );
    }

    #[test]
    fn result_121_wins_and_priority() {
        let m = ack(&[
            (1, &[255, 255, 0, 0]),
            (3, &[10, 131, 0, 1]),
            (33, &[172, 16, 0, 0, 10, 131, 0, 9]),
            (121, &[16, 192, 168, 0, 0, 0, 0]),
        ]);
        let r = result_of(&m, Some(7)).unwrap();
        assert_eq!(r.routes.len(), 1);
        assert_eq!(r.routes[0].dst.to_string(), "192.168.0.0/16");
        assert_eq!(r.routes[0].gw, None);
        assert_eq!(r.routes[0].scope, Some(253));
        assert_eq!(r.routes[0].priority, 7);
        let m = ack(&[
            (1, &[255, 255, 0, 0]),
            (33, &[172, 16, 0, 0, 10, 131, 0, 9]),
        ]);
        let r = result_of(&m, None).unwrap();
        assert_eq!(r.routes.len(), 1);
        assert_eq!(r.routes[0].dst.to_string(), "172.16.0.0/16");
        assert!(r.ips[0].gateway.is_none());
    }

    #[test]
    fn no_mask() {
        assert_eq!(
            result_of(&ack(&[]), None).unwrap_err(),
            "DHCP option Subnet Mask not found in DHCPACK"
        );
    }

    #[test]
    fn times() {
        let t = Times::from_ack(&ack(&[(51, &120u32.to_be_bytes())]), 1000);
        assert_eq!((t.renew, t.rebind, t.expire), (1060, 1102, 1120));
        let t = Times::from_ack(&ack(&[]), 0);
        assert_eq!(t.expire, 3600);
        // A rogue server's T1 = 0 and 1-second lease, as on the wire.
        let t = Times::from_ack(
            &ack(&[
                (51, &1u32.to_be_bytes()),
                (58, &0u32.to_be_bytes()),
                (59, &0u32.to_be_bytes()),
            ]),
            1000,
        );
        assert_eq!((t.renew, t.rebind, t.expire), (1030, 1051, 1060));
    }

    #[test]
    fn schedule_is_sane_whatever_the_server_says() {
        let s = |l: u32, t1: u32, t2: u32| schedule(Some(l), Some(t1), Some(t2));
        // What a sane server sends is kept.
        assert_eq!(s(120, 60, 105), (60, 105, 120));
        assert_eq!(s(86_400, 600, 80_000), (600, 80_000, 86_400));
        assert_eq!(schedule(Some(600), None, None), (300, 510, 600));
        assert_eq!(schedule(None, None, None), (1800, 3060, 3600));
        // T1 = 0, T2 = 0, a 1 s lease: the lease floor and the defaults.
        assert_eq!(s(1, 0, 0), (30, 51, 60));
        assert_eq!(s(0, 0, 0), (30, 51, 60));
        // T1 of 1 s: raised to the floor, T2 stays above it.
        assert_eq!(s(120, 1, 105), (MIN_RENEW, 105, 120));
        assert_eq!(s(120, 1, 2), (MIN_RENEW, 2 + 65, 120));
        assert_eq!(s(60, 1, 10), (MIN_RENEW, 37, 60));
        // Out of order or past the lease: the RFC's defaults.
        assert_eq!(s(1000, 900, 800), (500, 800, 1000));
        assert_eq!(s(1000, 100, 1000), (100, 850, 1000));
        assert_eq!(s(1000, 600, 550), (500, 550, 1000));
        assert_eq!(s(1000, 600, 400), (500, 850, 1000));
        // The largest values do not overflow; "infinite" stays far away.
        let (t1, t2, l) = s(u32::MAX, u32::MAX, u32::MAX);
        assert_eq!(l, u64::from(u32::MAX));
        assert!(t1 < t2 && t2 < l);
        // Every combination keeps MIN_RENEW <= T1 < T2 < lease, lease >= 60.
        let vals = [
            0,
            1,
            2,
            14,
            15,
            16,
            29,
            30,
            31,
            59,
            60,
            61,
            119,
            120,
            3600,
            u32::MAX,
        ];
        for l in vals {
            for a in vals {
                for b in vals {
                    let (t1, t2, lease) = s(l, a, b);
                    assert!(
                        MIN_RENEW <= t1 && t1 < t2 && t2 < lease && lease >= MIN_LEASE,
                        "{l} {a} {b}: {t1} {t2} {lease}"
                    );
                }
            }
        }
    }

    #[test]
    fn reopen_gone_or_unsure() {
        let dir = std::env::temp_dir().join(format!("dhcpd-reopen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("file");
        std::fs::write(&file, b"").unwrap();
        let at = |p: &std::path::Path| Record {
            client_id: b"c".to_vec(),
            container_id: "c".into(),
            net_name: "n".into(),
            if_name: "eth0".into(),
            netns: p.to_path_buf(),
            netns_id: None,
            request: vec![],
            provide: vec![],
            ack: vec![],
            times: Times::from_ack(&ack(&[]), 0),
        };
        // No such path, or not a namespace there: gone.
        let gone = at(&dir.join("missing")).open_netns();
        assert!(matches!(gone, Err(Reopen::Gone(_))), "{gone:?}");
        let gone = at(&file).open_netns();
        assert!(matches!(gone, Err(Reopen::Gone(_))), "{gone:?}");
        // Cannot even look (ENOTDIR): not a reason to drop a lease.
        let unsure = at(&file.join("x")).open_netns();
        assert!(matches!(unsure, Err(Reopen::Unsure(_))), "{unsure:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn store_round_trip() {
        let dir = std::env::temp_dir().join(format!("dhcpd-store-{}", std::process::id()));
        let s = Store::new(dir.clone());
        let r = Record {
            client_id: b"cid/net/eth0".to_vec(),
            container_id: "cid".into(),
            net_name: "net".into(),
            if_name: "eth0".into(),
            netns: "/run/netns/x".into(),
            netns_id: Some(NsIdentity {
                dev: 4,
                ino: 4026532177,
                cookie: Some(12),
            }),
            request: vec![3, 1],
            provide: vec![(12, b"h".to_vec())],
            ack: ack(&[(1, &[255, 0, 0, 0])]).encode(),
            times: Times::from_ack(&ack(&[]), 5),
        };
        s.save(&r).unwrap();
        std::fs::write(dir.join("junk.json"), b"{").unwrap();
        assert_eq!(s.load_all(), vec![r.clone()]);
        assert!(!dir.join("junk.json").exists());
        s.remove(&r.client_id);
        assert!(s.load_all().is_empty());

        // Links planted under the temporary and the final name, and one
        // more lease-like name: nothing is written or read through them.
        use std::os::unix::fs::{PermissionsExt, symlink};
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let final_name = s.file_of(&r.client_id).path().to_path_buf();
        let name = final_name.file_name().unwrap().to_str().unwrap();
        symlink(&victim, dir.join(format!(".{name}.tmp"))).unwrap();
        symlink(&victim, &final_name).unwrap();
        s.save(&r).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let meta = std::fs::symlink_metadata(&final_name).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        symlink(&victim, dir.join("other.json")).unwrap();
        assert_eq!(s.load_all(), vec![r.clone()]);
        assert!(!dir.join("other.json").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A killed write's temporary file is cleaned up at load.
        std::fs::write(dir.join(format!(".{name}.tmp")), b"{").unwrap();
        assert_eq!(s.load_all(), vec![r.clone()]);
        assert!(!dir.join(format!(".{name}.tmp")).exists());
        let _ = std::fs::remove_dir_all(dir);
    }
}
