//! What the link-kind plugins share (macvlan, ipvlan, vlan, dummy): create
//! a link of some kind on a parent straight into the container, under its
//! final name (or a temporary one, then renamed there), then either set it
//! up (L2) or run IPAM and configure the addresses and routes (L3), undoing
//! everything when a step fails; DEL and CHECK. host-device uses the
//! "configure and undo" half ([`configure`], [`check_link`]).
//!
//! Each plugin keeps only its config and its [`ChildKind`]; the keys the
//! plugins making a child of a parent share are [`ChildConf`].

use crate::NetResult;
use crate::iface::{check_addresses, check_routes, configure_iface_with, random_veth_name};
use crate::ipam::IpamJob;
use crate::rollback::Rollback;
use cni_net::{ChildKind, ChildOpts, IpFamily, Link, Mac, NetNs, Netlink, sysctl};
use cni_skel::error::code;
use cni_skel::{CmdArgs, CniError, CniResult, Command, Dns, Interface, NetConf, delegate};

/// How many random temporary names to try.
const TEMP_NAME_TRIES: usize = 10;

/// The container namespace with a netlink handle in it, and one in the
/// plugin's own ("host") namespace.
#[derive(Debug)]
pub struct Ctx {
    /// The container's namespace (`CNI_NETNS`).
    pub ns: NetNs,
    /// A handle inside it.
    pub ns_nl: Netlink,
    /// A handle in the plugin's namespace.
    pub host_nl: Netlink,
}

impl Ctx {
    /// Opens `CNI_NETNS` (`failed to open netns "<path>": …`) and both handles.
    pub fn open(args: &CmdArgs) -> Result<Ctx, CniError> {
        let ns = crate::netns::open_required(args)?;
        let ns_nl = Netlink::for_ns(&ns).cni()?;
        let host_nl = Netlink::host().cni()?;
        Ok(Ctx { ns, ns_nl, host_nl })
    }

    /// The handle of the namespace where the parent lives: the container's
    /// with `linkInContainer`, else the host's.
    pub fn parent_nl(&self, in_container: bool) -> &Netlink {
        if in_container {
            &self.ns_nl
        } else {
            &self.host_nl
        }
    }

    /// `CNI_NETNS` as given, which results carry as `sandbox`.
    pub fn sandbox(&self) -> String {
        self.ns.path().display().to_string()
    }
}

/// The parent named `name`, or (no name) the interface of the first
/// default route of the main table, IPv4 before IPv6, as the reference
/// picks it.
pub fn resolve_master(nl: &Netlink, name: Option<&str>) -> Result<Link, CniError> {
    match name {
        Some(n) => nl.link_by_name(n).cni()?.ok_or_else(|| {
            CniError::internal(format!("failed to lookup master {n:?}: Link not found"))
        }),
        None => default_route_link(nl),
    }
}

fn default_route_link(nl: &Netlink) -> Result<Link, CniError> {
    for family in [IpFamily::V4, IpFamily::V6] {
        for r in nl.routes(family, None).cni()? {
            if r.dst.prefix() != 0 {
                continue;
            }
            // A multipath default has no single interface.
            let Some(oif) = r.oif else {
                return Err(CniError::internal(
                    "default route has no single interface (multipath)",
                ));
            };
            return nl.link_by_index(oif).cni()?.ok_or_else(|| {
                CniError::internal(format!(
                    "failed to lookup default route interface {oif}: Link not found"
                ))
            });
        }
    }
    Err(CniError::internal("no default route interface found"))
}

/// What the plugins making a child of a parent link (macvlan, ipvlan,
/// vlan) configure alike, besides their kind's own keys.
#[derive(Debug, Clone)]
pub struct ChildConf {
    /// `master`; `None` (absent or empty) leaves the choice to the plugin.
    pub master: Option<String>,
    /// `mtu` as given (0 = the parent's).
    pub mtu: i64,
    /// `linkInContainer`: the parent is in the container's namespace.
    pub link_in_container: bool,
    /// `dns`, which replaces IPAM's in the result.
    pub dns: Dns,
    /// `ipam.type` is set.
    pub ipam: bool,
}

impl ChildConf {
    /// From the plugin's `master`, `mtu` and `linkInContainer` keys and
    /// the common config.
    pub fn new(
        master: Option<String>,
        mtu: Option<i64>,
        link_in_container: Option<bool>,
        common: &NetConf,
    ) -> ChildConf {
        ChildConf {
            master: master.filter(|m| !m.is_empty()),
            mtu: mtu.unwrap_or(0),
            link_in_container: link_in_container.unwrap_or(false),
            dns: common.dns.clone().unwrap_or_default(),
            ipam: common.ipam_type().is_some(),
        }
    }

    /// The configured parent (`master`; `None`: the interface of the
    /// default route), in the namespace it lives in.
    pub fn parent(&self, cx: &Ctx) -> Result<Link, CniError> {
        self.parent_named(cx, self.master.as_deref())
    }

    /// [`ChildConf::parent`] called `name` (ipvlan's is the previous
    /// result's interface when none is configured).
    pub fn parent_named(&self, cx: &Ctx, name: Option<&str>) -> Result<Link, CniError> {
        resolve_master(cx.parent_nl(self.link_in_container), name)
    }

    /// The link ADD makes on `master`, with the configured MTU checked
    /// against the parent's.
    pub fn new_link<'a>(
        &self,
        kind: ChildKind,
        master: &'a Link,
        mac: Option<Mac>,
    ) -> Result<NewLink<'a>, CniError> {
        Ok(NewLink {
            kind,
            master: Some(master),
            in_container: self.link_in_container,
            mtu: check_mtu(self.mtu, master)?,
            mac,
        })
    }

    /// Where ADD's addresses come from, decided before the namespace is
    /// opened and the parent looked up: with IPAM, its ADD started at once
    /// ([`IpamJob::early`]: host-local and static; any other once the
    /// link is there), so that the child's start-up overlaps that work
    /// and the link's making (dropped on an error return, the job undoes
    /// itself); else the addresses of `prev` when it has any (ipvlan
    /// chained on a previous plugin); else L2.
    pub fn addressing<'a>(
        &self,
        args: &'a CmdArgs,
        prev: Option<&CniResult>,
    ) -> Result<Addressing<'a>, CniError> {
        Ok(match prev {
            _ if self.ipam => Addressing::Started(IpamJob::early(args)?),
            Some(r) if !r.ips.is_empty() => Addressing::Prev(r.clone()),
            _ => Addressing::L2,
        })
    }

    /// STATUS: the configured parent, when it is on the host, must exist.
    pub fn status(&self, args: &CmdArgs) -> Result<(), CniError> {
        let master = self.master.as_deref().filter(|_| !self.link_in_container);
        status(args, master)
    }
}

/// `mtu` from the config: 0 means the parent's (nothing sent); otherwise it
/// must not exceed the parent's, which the kernel would not check for
/// every kind.
pub fn check_mtu(mtu: i64, master: &Link) -> Result<Option<u32>, CniError> {
    if mtu < 0 || mtu > i64::from(master.mtu) {
        return Err(CniError::invalid_config(format!(
            "invalid MTU {mtu}, must be [0, master MTU({})]",
            master.mtu
        )));
    }
    Ok(u32::try_from(mtu).ok().filter(|m| *m > 0))
}

/// The MAC a plugin was asked for: `mac` in the config, then CNI_ARGS
/// `MAC`, then `runtimeConfig.mac`; the last one set wins.
pub fn requested_mac(
    conf: Option<&str>,
    cni_args: Option<&str>,
    runtime: Option<&str>,
) -> Result<Option<Mac>, CniError> {
    let Some(text) = runtime.or(cni_args).or(conf).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    text.parse::<Mac>().map(Some).map_err(|_| {
        CniError::invalid_config(format!(
            "invalid args {text} for MAC addr: address {text}: invalid MAC address"
        ))
    })
}

/// The link to create.
#[derive(Debug, Clone, Copy)]
pub struct NewLink<'a> {
    /// Kind and attributes; the kind names it in errors (`failed to
    /// create macvlan: …`).
    pub kind: ChildKind,
    /// The parent, looked up where the link is created.
    pub master: Option<&'a Link>,
    /// Create it from inside the container (`linkInContainer`, dummy).
    pub in_container: bool,
    /// MTU; `None` = the parent's.
    pub mtu: Option<u32>,
    /// MAC; `None` = the kernel's.
    pub mac: Option<Mac>,
}

/// Where the addresses come from.
#[derive(Debug)]
pub enum Addressing<'a> {
    /// None: the link is set up, the result has no IPs.
    L2,
    /// ADD on the config's IPAM plugin.
    Ipam,
    /// ADD on the config's IPAM plugin, started by the caller
    /// ([`IpamJob::early`]) before it opened the namespace and looked
    /// the parent up, so that the child's start-up overlaps them too
    /// ([`ChildConf::addressing`]).
    Started(IpamJob<'a>),
    /// A previous plugin's result (ipvlan chained on it).
    Prev(CniResult),
}

impl Addressing<'_> {
    /// The link gets addresses (not [`Addressing::L2`]).
    pub fn l3(&self) -> bool {
        !matches!(self, Addressing::L2)
    }
}

/// How the result is finished and the link announced.
#[derive(Debug, Clone, Default)]
pub struct L3Opts {
    /// `net/ipv4/conf/<if>/arp_notify=1`: a gratuitous ARP per address
    /// when the link goes up.
    pub arp_notify: bool,
    /// `net/ipv6/conf/<if>/ndisc_notify=1`: unsolicited NAs.
    pub ndisc_notify: bool,
    /// `Some`: the result's `dns` (the config's, even empty); `None`: keep IPAM's.
    pub dns: Option<Dns>,
}

/// ADD of a link plugin: IPAM (started first, it runs while the link is
/// made, when it needs no link: [`IpamJob::early`]), the link (then
/// IPAM, for one that may use it), then its configuration. Any failure
/// undoes all of it.
pub fn add<'a>(
    args: &'a CmdArgs,
    cx: &Ctx,
    new: &NewLink<'_>,
    addressing: Addressing<'a>,
    opts: &L3Opts,
) -> Result<CniResult, CniError> {
    add_with(
        args,
        cx,
        addressing,
        opts,
        || create_in_container(args, cx, new),
        |link| cx.ns_nl.del_link(link).cni(),
    )
}

/// [`add`] with the link placed by `place` (which leaves nothing behind
/// when it fails) and taken away again by `remove` when a later step
/// fails: host-device moves a host device in and back out; tap makes its
/// device by ioctl.
#[inline]
pub fn add_with<'a>(
    args: &'a CmdArgs,
    cx: &Ctx,
    addressing: Addressing<'a>,
    opts: &L3Opts,
    place: impl FnOnce() -> Result<Link, CniError>,
    remove: impl Fn(&Link) -> Result<(), CniError>,
) -> Result<CniResult, CniError> {
    // IPAM that needs no link runs while the link is made; any other (dhcp
    // sends from the link) once it is there. Dropped on an error return
    // (after the link's removal), the job undoes itself.
    let (mut ipam, prev) = match addressing {
        Addressing::Ipam => (Some(IpamJob::early(args)?), None),
        Addressing::Started(job) => (Some(job), None),
        Addressing::Prev(r) => (None, Some(r)),
        Addressing::L2 => (None, None),
    };
    let link = place()?;
    let mut rb = Rollback::default();
    rb.push("remove link", || remove(&link));
    let done = match ipam.as_mut() {
        Some(job) => job.finish().map(Some),
        None => Ok(prev),
    }
    .and_then(|result| configure(args, cx, &link, result, opts))
    .and_then(|r| {
        // A result the config's version cannot express (no IPs in 0.2.0)
        // fails here, while the link can still be undone.
        r.to_json(args.cni_version())?;
        Ok(r)
    });
    match done {
        Ok(r) => {
            rb.disarm();
            if let Some(job) = ipam {
                job.disarm();
            }
            Ok(r)
        }
        Err(e) => {
            rb.run();
            Err(e)
        }
    }
}

fn undo_link(cx: &Ctx, link: &Link) {
    if let Err(e) = cx.ns_nl.del_link(link) {
        log::warn!("rollback: deleting {}: {e}", link.name);
    }
}

/// Creates the link in the container as `CNI_IFNAME`.
///
/// A kernel before about 6.14 looks a new link's name up in the
/// *requesting* namespace too, so `eth0` on the host made an `eth0` for the
/// container fail with EEXIST. The final name is tried first (kernels that
/// only look in the target namespace need nothing else, and nothing can be
/// left behind under another name); on EEXIST with the name free in the
/// container, the link is made under a random `veth<8 hex>` name and
/// renamed there, and deleted if the rename fails. `NLM_F_EXCL` is always
/// sent, so an existing link is never modified.
fn create_in_container(args: &CmdArgs, cx: &Ctx, new: &NewLink<'_>) -> Result<Link, CniError> {
    let ifname = args.ifname.as_str();
    let what = new.kind.kind();
    let nl = cx.parent_nl(new.in_container);
    let create = |name: &str| {
        nl.create_child(&ChildOpts {
            name,
            kind: new.kind,
            master: new.master.map(|m| m.index),
            mtu: new.mtu,
            mac: new.mac,
            ns: (!new.in_container).then_some(&cx.ns),
        })
    };
    let failed = |e: cni_net::NetError| {
        CniError::internal(format!("failed to create {what}: {}", e.reason()))
    };
    match create(ifname) {
        Ok(()) => return cx.ns_nl.must_link(ifname).cni(),
        Err(e) if e.is_exists() => {
            if new.in_container || cx.ns_nl.link_by_name(ifname).cni()?.is_some() {
                return Err(CniError::internal(format!(
                    "failed to create {what} {ifname:?} in the container: file exists"
                )));
            }
        }
        Err(e) => return Err(failed(e)),
    }
    let mut temp = None;
    for _ in 0..TEMP_NAME_TRIES {
        let name = random_veth_name();
        match create(&name) {
            Ok(()) => {
                temp = Some(name);
                break;
            }
            Err(e) if e.is_exists() => continue,
            Err(e) => return Err(failed(e)),
        }
    }
    let temp = temp.ok_or_else(|| {
        CniError::internal(format!("failed to create {what}: no free temporary name"))
    })?;
    let link = cx.ns_nl.must_link(&temp).cni()?;
    if let Err(e) = cx.ns_nl.set_name(&link, ifname) {
        undo_link(cx, &link);
        return Err(CniError::internal(format!(
            "failed to rename {what} to {ifname:?}: {}",
            e.reason()
        )));
    }
    cx.ns_nl.must_link(ifname).cni()
}

/// The "configure" half of ADD, on a link already in the container:
/// L2 (`result` None) sets it up; L3 writes the announcement sysctls,
/// adds the addresses, sets it up and adds the routes (the reference's
/// `ConfigureIface`). Returns the plugin's result: one interface
/// (`{name, mac, sandbox}`), every IP on it.
pub fn configure(
    args: &CmdArgs,
    cx: &Ctx,
    link: &Link,
    result: Option<CniResult>,
    opts: &L3Opts,
) -> Result<CniResult, CniError> {
    let iface = Interface {
        name: link.name.clone(),
        mac: link.mac.clone(),
        sandbox: cx.sandbox(),
        ..Interface::default()
    };
    let Some(mut result) = result else {
        cx.ns_nl.set_up(link).map_err(|e| {
            CniError::internal(format!("failed to set {:?} UP: {}", link.name, e.reason()))
        })?;
        let mut r = CniResult {
            cni_version: args.cni_version().to_string(),
            interfaces: vec![iface],
            ..CniResult::default()
        };
        if let Some(dns) = &opts.dns {
            r.dns = dns.clone();
        }
        return Ok(r);
    };
    if result.ips.is_empty() {
        return Err(CniError::internal("IPAM plugin returned missing IP config"));
    }
    result.interfaces = vec![iface];
    for ip in &mut result.ips {
        ip.interface = Some(0);
    }
    announce(cx, &link.name, opts);
    configure_iface_with(&cx.ns, &cx.ns_nl, link, &result)?;
    if let Some(dns) = &opts.dns {
        result.dns = dns.clone();
    }
    Ok(result)
}

/// The announcement sysctls; failures are ignored, as in the reference
/// (a kernel without IPv6 has no `ndisc_notify`).
fn announce(cx: &Ctx, ifname: &str, opts: &L3Opts) {
    let mut keys = Vec::new();
    if opts.arp_notify {
        keys.push(format!("net/ipv4/conf/{ifname}/arp_notify"));
    }
    if opts.ndisc_notify {
        keys.push(format!("net/ipv6/conf/{ifname}/ndisc_notify"));
    }
    if keys.is_empty() {
        return;
    }
    let _ = cx.ns.run(|| {
        for k in &keys {
            let _ = sysctl::write(k, "1");
        }
    });
}

/// DEL of a link plugin: IPAM DEL when `ipam`, to its end, then
/// `CNI_IFNAME` in the container ([`delegate::del_ipam_and_link`]: the
/// dhcp daemon sends its DHCPRELEASE from the link). A netns or link that
/// is already gone is success; both steps always run.
pub fn del(args: &CmdArgs, ipam: bool) -> Result<(), CniError> {
    del_of_kind(args, ipam, None)
}

/// [`del`] that deletes `CNI_IFNAME` only if it is of link kind `kind`
/// (when given): a link of another kind under that name is not ours (an
/// ADD that failed on the name clash is followed by the runtime's DEL) and
/// is left alone. tap uses it.
pub fn del_of_kind(args: &CmdArgs, ipam: bool, kind: Option<&str>) -> Result<(), CniError> {
    let (ipam, link) = delegate::del_ipam_and_link(args, ipam, || match args.netns.as_deref() {
        Some(path) => del_in(path, &args.ifname, kind),
        None => Ok(()),
    });
    cni_skel::teardown::Teardown::of([ipam, link]).finish()
}

fn del_in(path: &std::path::Path, ifname: &str, kind: Option<&str>) -> Result<(), CniError> {
    let del = |nl: Netlink| -> Result<(), cni_net::NetError> {
        match nl.link_by_name(ifname)? {
            Some(l) if kind.is_none_or(|k| l.kind == k) => nl.del_link(&l),
            Some(l) => {
                log::warn!("{ifname} is a {:?} link, not ours: left alone", l.kind);
                Ok(())
            }
            None => Ok(()),
        }
    };
    let Some(ns) = crate::netns::open_if_present(path)? else {
        return Ok(());
    };
    Netlink::for_ns(&ns).and_then(del).map_err(|e| {
        CniError::internal(format!(
            "failed to delete {ifname:?} in {:?}: {e}",
            path.display()
        ))
    })
}

/// What CHECK expects of the container's link.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expect {
    /// The link kind (`IFLA_INFO_KIND`), when checked.
    pub kind: Option<&'static str>,
    /// Kind data to compare: macvlan/ipvlan mode, vlan id.
    pub data: Option<ChildKind>,
    /// It must be administratively up (dummy).
    pub up: bool,
    /// Check the `prevResult` routes too.
    pub routes: bool,
}

impl Expect {
    /// A child link of `kind`, with its mode or id, and the routes.
    pub fn child(kind: ChildKind) -> Expect {
        Expect {
            kind: Some(kind.kind()),
            data: Some(kind),
            routes: true,
            ..Expect::default()
        }
    }
}

/// CHECK of a link plugin, after the plugin checked its config and
/// parent: IPAM CHECK (when `ipam`), the `prevResult` interface, the link
/// ([`check_link`]), its addresses and routes.
pub fn check(args: &CmdArgs, cx: &Ctx, ipam: bool, expect: &Expect) -> Result<(), CniError> {
    if ipam {
        delegate::ipam_run(Command::Check, args)?;
    }
    let prev = args.required_prev_result("Required prevResult missing")?;
    let sandbox = cx.sandbox();
    let intf = prev
        .interfaces
        .iter()
        .find(|i| i.name == args.ifname && i.sandbox == sandbox)
        .ok_or_else(|| {
            let seen = prev
                .interfaces
                .iter()
                .find(|i| i.name == args.ifname)
                .map(|i| i.sandbox.as_str())
                .unwrap_or_default();
            CniError::internal(format!(
                "Sandbox in prevResult {seen} doesn't match configured netns: {sandbox}"
            ))
        })?;
    let link = check_link(cx, intf, expect)?;
    check_addresses(&cx.ns_nl, &link.name, &prev)?;
    if expect.routes {
        check_routes(&cx.ns_nl, &prev)?;
    }
    Ok(())
}

/// The container's link against the `prevResult` interface: present, of
/// the expected kind and mode, with the recorded MAC, up if required.
pub fn check_link(cx: &Ctx, intf: &Interface, expect: &Expect) -> Result<Link, CniError> {
    let name = &intf.name;
    let link = cx.ns_nl.link_by_name(name).cni()?.ok_or_else(|| {
        CniError::internal(format!(
            "Container Interface name in prevResult: {name} not found"
        ))
    })?;
    if let Some(kind) = expect.kind
        && link.kind != kind
    {
        return Err(CniError::internal(format!(
            "Error: Container interface {name} not of type {kind}"
        )));
    }
    if let Some(want) = expect.data {
        let have = cx.ns_nl.link_extras(link.index).cni()?.and_then(|x| x.kind);
        if let Some(msg) = data_mismatch(name, have, want) {
            return Err(CniError::internal(msg));
        }
    }
    if !intf.mac.is_empty() && !intf.mac.eq_ignore_ascii_case(&link.mac) {
        return Err(CniError::internal(format!(
            "Interface {name} Mac {} doesn't match container Mac: {}",
            intf.mac, link.mac
        )));
    }
    if expect.up && !link.up {
        return Err(CniError::internal(format!("Interface {name} is down")));
    }
    Ok(link)
}

/// The reference's texts for a mode mismatch; vlan says what it compares.
fn data_mismatch(name: &str, have: Option<ChildKind>, want: ChildKind) -> Option<String> {
    if have == Some(want) {
        return None;
    }
    Some(match (have, want) {
        (Some(ChildKind::Macvlan { mode: h, .. }), ChildKind::Macvlan { mode: w, .. }) => {
            if h == w {
                return None;
            }
            format!(
                "container macvlan mode {} does not match expected value: {}",
                h.name(),
                w.name()
            )
        }
        (Some(ChildKind::Ipvlan { mode: h }), ChildKind::Ipvlan { mode: w }) => format!(
            "Container IPVlan mode {} does not match expected value: {}",
            h.name(),
            w.name()
        ),
        (Some(ChildKind::Vlan { id: h }), ChildKind::Vlan { id: w }) => {
            format!("Error: Container interface {name} has VLAN id {h}, configured {w}")
        }
        _ => format!(
            "Error: Container interface {name} not of type {}",
            want.kind()
        ),
    })
}

/// STATUS: code 50 when the parent is missing, then IPAM STATUS when an
/// IPAM plugin is configured.
pub fn status(args: &CmdArgs, master: Option<&str>) -> Result<(), CniError> {
    if let Some(m) = master {
        let nl = Netlink::host().cni()?;
        if nl.link_by_name(m).cni()?.is_none() {
            return Err(CniError::new(
                code::PLUGIN_NOT_AVAILABLE,
                format!("master {m:?} not found"),
                "",
            ));
        }
    }
    if args.conf.ipam_type().is_some() {
        delegate::ipam_run(Command::Status, args)?;
    }
    Ok(())
}

/// GC: forwarded to the IPAM plugin when there is one (the reference
/// forwards nothing, so IPAM leaks stay).
pub fn gc(args: &CmdArgs) -> Result<(), CniError> {
    if args.conf.ipam_type().is_some() {
        delegate::ipam_run(Command::Gc, args)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cni_net::{IpvlanMode, MacvlanMode};

    #[test]
    fn mtu_range_is_the_parents() {
        let m = Link {
            mtu: 1500,
            ..Link::default()
        };
        assert_eq!(check_mtu(0, &m).unwrap(), None);
        assert_eq!(check_mtu(1500, &m).unwrap(), Some(1500));
        assert_eq!(check_mtu(68, &m).unwrap(), Some(68));
        for bad in [-1, 1501, 9000] {
            assert_eq!(
                check_mtu(bad, &m).unwrap_err().msg,
                format!("invalid MTU {bad}, must be [0, master MTU(1500)]")
            );
        }
    }

    #[test]
    fn mac_precedence_runtime_args_conf() {
        let m = |s: &str| Some(s.parse::<Mac>().unwrap());
        assert_eq!(requested_mac(None, None, None).unwrap(), None);
        assert_eq!(
            requested_mac(Some("02:00:00:00:00:01"), None, None).unwrap(),
            m("02:00:00:00:00:01")
        );
        assert_eq!(
            requested_mac(Some("02:00:00:00:00:01"), Some("02:00:00:00:00:02"), None).unwrap(),
            m("02:00:00:00:00:02")
        );
        assert_eq!(
            requested_mac(
                Some("02:00:00:00:00:01"),
                Some("02:00:00:00:00:02"),
                Some("02:00:00:00:00:03")
            )
            .unwrap(),
            m("02:00:00:00:00:03")
        );
        assert_eq!(
            requested_mac(None, Some("zz"), None).unwrap_err().msg,
            "invalid args zz for MAC addr: address zz: invalid MAC address"
        );
    }

    #[test]
    fn mismatch_texts() {
        let mv = |mode| ChildKind::Macvlan {
            mode,
            bc_queue_len: 0,
        };
        assert_eq!(
            data_mismatch("net1", Some(mv(MacvlanMode::Bridge)), mv(MacvlanMode::Vepa)).unwrap(),
            "container macvlan mode bridge does not match expected value: vepa"
        );
        // The broadcast queue length is the port's maximum: not compared.
        let with_bc = ChildKind::Macvlan {
            mode: MacvlanMode::Bridge,
            bc_queue_len: 1000,
        };
        assert_eq!(
            data_mismatch("net1", Some(with_bc), mv(MacvlanMode::Bridge)),
            None
        );
        assert_eq!(
            data_mismatch(
                "net1",
                Some(ChildKind::Ipvlan {
                    mode: IpvlanMode::L2
                }),
                ChildKind::Ipvlan {
                    mode: IpvlanMode::L3
                }
            )
            .unwrap(),
            "Container IPVlan mode l2 does not match expected value: l3"
        );
        assert_eq!(
            data_mismatch(
                "net1",
                Some(ChildKind::Vlan { id: 5 }),
                ChildKind::Vlan { id: 6 }
            )
            .unwrap(),
            "Error: Container interface net1 has VLAN id 5, configured 6"
        );
        assert_eq!(
            data_mismatch("net1", None, ChildKind::Vlan { id: 6 }).unwrap(),
            "Error: Container interface net1 not of type vlan"
        );
    }
}
