//! CHECK: the tbf on the host veth, the ifb with its tbf, and (beyond the
//! reference) the ingress qdisc and the filter redirecting to the ifb.

use crate::shaping::Tbf;
use crate::{config, host, ifb};
use cni_net::{Link, Netlink, tc};
use cni_plugin::NetResult;
use cni_skel::{CmdArgs, CmdResult, CniError, Output};

pub fn check(args: &CmdArgs) -> CmdResult {
    let conf = config::load(args)?;
    let prev = args
        .prev_result()
        .map_err(|e| CniError::internal(format!("could not parse prevResult: {}", e.msg)))?
        .ok_or_else(|| CniError::internal("must be called as a chained plugin"))?;
    let ns = host::open_netns(args.netns.as_deref())?;
    let nl = Netlink::host().cni()?;
    let veth = host::find(&prev, &args.ifname, &ns, &nl)?;
    if let Some(want) = conf.ingress {
        check_tbf(&nl, &veth, &want)?;
    }
    if let Some(want) = conf.egress {
        let name = ifb::name(&conf.network, &args.container_id);
        let dev = nl
            .link_by_name(&name)
            .cni()?
            .filter(|l| l.kind == "ifb")
            .ok_or_else(|| CniError::internal(format!("get ifb device: {name}: Link not found")))?;
        check_tbf(&nl, &dev, &want)?;
        check_redirect(&nl, &veth, &dev)?;
    }
    Ok(Output::Nothing)
}

/// The root qdisc of `link` must be a tbf with the parameters the kernel
/// keeps for `want`.
fn check_tbf(nl: &Netlink, link: &Link, want: &Tbf) -> Result<(), CniError> {
    let qdiscs = nl.qdiscs(link).cni()?;
    let root = qdiscs
        .iter()
        .find(|q| q.parent == tc::HANDLE_ROOT)
        .ok_or_else(|| CniError::internal(format!("Failed to find qdisc on {}", link.name)))?;
    let Some(got) = root.tbf.filter(|_| root.kind == "tbf") else {
        return Err(CniError::internal(format!(
            "the root qdisc of {} is {}, not tbf",
            link.name, root.kind
        )));
    };
    let mismatch = |what: &str, got: u64, want: u64| {
        Err(CniError::internal(format!(
            "{what} doesn't match on {}: {got}, want {want}",
            link.name
        )))
    };
    if got.rate != want.rate {
        return mismatch("Rate", got.rate, want.rate);
    }
    if got.limit != want.limit {
        return mismatch("Limit", got.limit.into(), want.limit.into());
    }
    if got.buffer != want.buffer {
        return mismatch("Buffer", got.buffer.into(), want.buffer.into());
    }
    Ok(())
}

/// The host veth's ingress qdisc must hold a filter redirecting to `dev`.
fn check_redirect(nl: &Netlink, veth: &Link, dev: &Link) -> Result<(), CniError> {
    let has_ingress = nl
        .qdiscs(veth)
        .cni()?
        .iter()
        .any(|q| q.kind == "ingress" && q.parent == tc::HANDLE_INGRESS);
    if !has_ingress {
        return Err(CniError::internal(format!(
            "no ingress qdisc on {}",
            veth.name
        )));
    }
    let redirects = nl
        .filters(veth, tc::HANDLE_INGRESS_QDISC)
        .cni()?
        .iter()
        .any(|f| f.redirect_to == Some(dev.index));
    if !redirects {
        return Err(CniError::internal(format!(
            "no filter on {} redirects to {}",
            veth.name, dev.name
        )));
    }
    Ok(())
}
