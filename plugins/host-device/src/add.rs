//! ADD.

use crate::config;
use crate::device::{dpdk, find_device, move_in, move_out};
use crate::hostside::{self, HostSide};
use crate::identity::Identity;
use crate::sysfs::Sysfs;
use cni_net::Link;
use cni_plugin::NetResult;
use cni_plugin::link_plugin::{self, Addressing, Ctx, L3Opts};
use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, Interface, Output, delegate};

pub fn add(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    let conf = config::load(args, sys)?;
    let addressing = if conf.ipam {
        Addressing::Ipam
    } else {
        Addressing::L2
    };
    if dpdk(&conf, sys)? {
        let ns = cni_plugin::netns::open_required(args)?;
        let mut result = if conf.ipam {
            delegate::ipam_add(args)?
        } else {
            CniResult::default()
        };
        result.interfaces = vec![Interface {
            name: args.ifname.clone(),
            sandbox: ns.path().display().to_string(),
            ..Interface::default()
        }];
        for ip in &mut result.ips {
            ip.interface = Some(0);
        }
        result.dns = conf.dns;
        return Ok(Output::Result(result));
    }
    let cx = Ctx::open(args)?;
    let dev = find_device(&cx.host_nl, sys, &conf.selector)?;
    let network = args.conf.name.clone().unwrap_or_default();
    let saved = HostSide::record(&cx.host_nl, &dev, &network)?;
    let before = Identity::of(&cx.host_nl, &dev).cni()?;
    let file = hostside::file(args);
    let opts = L3Opts {
        dns: Some(conf.dns.clone()),
        ..L3Opts::default()
    };
    // Back to the host with its configuration, the state file gone.
    let take_back = |link: &Link| -> Result<(), CniError> {
        move_out(&cx.ns, &cx.ns_nl, link, &dev.name)?;
        saved.restore(&cx.host_nl);
        if let Err(e) = file.remove() {
            log::warn!("rollback: {}", e.msg);
        }
        Ok(())
    };
    let place = || -> Result<Link, CniError> {
        let link = move_in(&cx, &dev, &args.ifname, &saved)?;
        let undo = |e: CniError| {
            if let Err(b) = take_back(&link) {
                log::warn!("rollback: {}", b.msg);
            }
            e
        };
        // What the container cannot change, read in the container: the
        // record DEL finds the device by.
        let after = Identity::of(&cx.ns_nl, &link).map_err(|e| undo(cni_plugin::net_error(e)))?;
        let mut differences = before.moved_differences(&after);
        if link.mac != dev.mac {
            differences.push(format!("MAC {}, not {}", link.mac, dev.mac));
        }
        if !differences.is_empty() {
            // Someone in the container replaced the device as it arrived:
            // nothing there is known to be it, so nothing is moved out.
            return Err(CniError::internal(format!(
                "{:?} in the container is not the device moved there ({}): left alone",
                args.ifname,
                differences.join(", ")
            )));
        }
        let saved = HostSide {
            identity: Some(after),
            ..saved.clone()
        };
        saved.save(&file).map_err(undo)?;
        Ok(link)
    };
    let result = link_plugin::add_with(args, &cx, addressing, &opts, place, take_back)?;
    Ok(Output::Result(result))
}
