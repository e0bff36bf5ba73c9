//! STATUS: whether this kernel can do what ADD needs. Modules load on
//! demand and may be built in (then /proc/modules does not list them), so
//! the answer comes from doing it: in a new, empty network namespace that
//! vanishes with this process, an ifb, a tbf on it, an ingress qdisc and a
//! u32 filter with a mirred redirect.

use cni_net::{NetNs, Netlink};
use cni_skel::error::code;
use cni_skel::{CmdResult, CniError, Output};

pub fn status() -> CmdResult {
    let unavailable = |what: &str, e: &dyn std::fmt::Display| {
        CniError::new(
            code::PLUGIN_NOT_AVAILABLE,
            format!("bandwidth: {what}: {e}"),
            "",
        )
    };
    let ns = NetNs::new_anonymous()
        .map_err(|e| unavailable("cannot create a network namespace to probe the kernel", &e))?;
    let nl = Netlink::for_ns(&ns).map_err(|e| unavailable("netlink", &e))?;
    let dev = nl
        .create_ifb("probe0", 1500, None)
        .map_err(|e| unavailable("no ifb device (CONFIG_IFB)", &e))?;
    nl.add_tbf(
        &dev,
        &cni_net::tc::Tbf {
            rate: 125_000,
            buffer: 15_625_000,
            limit: 128_125,
        },
    )
    .map_err(|e| unavailable("no tbf qdisc (CONFIG_NET_SCH_TBF)", &e))?;
    nl.add_ingress_qdisc(&dev)
        .map_err(|e| unavailable("no ingress qdisc (CONFIG_NET_SCH_INGRESS)", &e))?;
    nl.add_redirect_filter(&dev, &dev).map_err(|e| {
        unavailable(
            "no u32 filter with mirred redirect (CONFIG_NET_CLS_U32, CONFIG_NET_ACT_MIRRED)",
            &e,
        )
    })?;
    Ok(Output::Nothing)
}
