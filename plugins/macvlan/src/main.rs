//! The CNI macvlan plugin: a macvlan child of `master` (by default the
//! interface of the default route), created straight into the container.
//! Everything but the config and the link kind is `cni_net::link_plugin`.

mod config;

use cni_net::link_plugin::{self, Addressing, Ctx, Expect, L3Opts, NewLink};
use cni_net::{ChildKind, Link};
use cni_skel::{CmdArgs, CmdResult, CniError, Output, Plugin};
use config::Conf;
use std::process::ExitCode;

struct Macvlan;

fn kind(conf: &Conf) -> ChildKind {
    ChildKind::Macvlan {
        mode: conf.mode,
        bc_queue_len: conf.bc_queue_len,
    }
}

/// The parent, where the link will be created.
fn master(cx: &Ctx, conf: &Conf) -> Result<Link, CniError> {
    link_plugin::resolve_master(cx.parent_nl(conf.link_in_container), conf.master.as_deref())
}

impl Plugin for Macvlan {
    fn about(&self) -> String {
        format!("CNI macvlan plugin v{}", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        let cni_args = args.cni_args(&["MAC"])?;
        let mac = link_plugin::requested_mac(
            conf.mac.as_deref(),
            cni_args.get("MAC"),
            conf.runtime_mac.as_deref(),
        )?;
        let cx = Ctx::open(args)?;
        let master = master(&cx, &conf)?;
        let mtu = link_plugin::check_mtu(conf.mtu, &master)?;
        let new = NewLink {
            what: "macvlan",
            kind: kind(&conf),
            master: Some(&master),
            in_container: conf.link_in_container,
            mtu,
            mac,
        };
        let (addressing, opts) = if conf.ipam {
            let opts = L3Opts {
                arp_notify: true,
                ndisc_notify: true,
                dns: Some(conf.dns.clone()),
            };
            (Addressing::Ipam, opts)
        } else {
            let opts = L3Opts {
                dns: Some(conf.dns.clone()),
                ..L3Opts::default()
            };
            (Addressing::L2, opts)
        };
        Ok(Output::Result(link_plugin::add(
            args, &cx, &new, addressing, &opts,
        )?))
    }

    /// As the reference since v1.4.0: the config's JSON only, so DEL works
    /// with the parent gone (it took the macvlan with it).
    fn del(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        link_plugin::del(args, conf.ipam)?;
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        args.cni_args(&["MAC"])?;
        let cx = Ctx::open(args)?;
        let master = master(&cx, &conf)?;
        link_plugin::check_mtu(conf.mtu, &master)?;
        let expect = Expect {
            kind: Some("macvlan"),
            data: Some(kind(&conf)),
            routes: true,
            ..Expect::default()
        };
        link_plugin::check(args, &cx, conf.ipam, &expect)?;
        Ok(Output::Nothing)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        config::load(args)?;
        link_plugin::gc(args)?;
        Ok(Output::Nothing)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(args)?;
        let master = conf.master.as_deref().filter(|_| !conf.link_in_container);
        link_plugin::status(args, master)?;
        Ok(Output::Nothing)
    }
}

fn main() -> ExitCode {
    cni_skel::run(&Macvlan)
}
