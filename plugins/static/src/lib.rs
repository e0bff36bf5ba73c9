//! The CNI `static` IPAM plugin: hands out the addresses, routes and DNS the
//! config (or CNI_ARGS, `args`, `runtimeConfig`) names. Pure computation:
//! no kernel access, no state, so DEL, GC and STATUS have nothing to do.

pub mod config;

use cni_skel::{CmdArgs, CmdResult, CniError, CniResult, IpConfig, Output, Plugin};
use config::StaticConf;

/// The plugin.
pub struct Static;

/// The result ADD prints: the addresses in order (no interface), then the
/// routes and DNS of the config.
fn result(conf: StaticConf, version: &str) -> CniResult {
    CniResult {
        cni_version: version.to_string(),
        interfaces: Vec::new(),
        ips: conf
            .addresses
            .into_iter()
            .map(|a| IpConfig {
                interface: None,
                address: a.address,
                gateway: a.gateway,
            })
            .collect(),
        routes: conf.routes,
        dns: conf.dns,
    }
}

/// CHECK: every configured address must be in `prevResult`, with the
/// configured gateway when one is configured. The reference accepts an
/// address that is missing altogether; we report it.
fn check_prev(conf: &StaticConf, prev: &CniResult, ifname: &str) -> Result<(), CniError> {
    for want in &conf.addresses {
        let ip = want.address.ip();
        let Some(got) = prev.ips.iter().find(|i| i.address.ip() == ip) else {
            return Err(CniError::internal(format!(
                "static: Failed to find addr {ip} on interface {ifname}: it is not in prevResult"
            )));
        };
        if want.gateway.is_some() && want.gateway != got.gateway {
            return Err(CniError::internal(format!(
                "static: Failed to match addr {ip} on interface {ifname}"
            )));
        }
    }
    Ok(())
}

impl Plugin for Static {
    fn about(&self) -> String {
        cni_skel::about("static")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(&args.config, &args.args)?;
        Ok(result(conf, args.cni_version()).into())
    }

    /// Nothing was allocated: DEL succeeds for any config the skel accepts,
    /// as the reference's, which does not read it.
    fn del(&self, _args: &CmdArgs) -> CmdResult {
        Ok(Output::Nothing)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        let conf = config::load(&args.config, &args.args)?;
        let prev = args
            .prev_result_value()
            .ok_or_else(|| CniError::internal("Required prevResult missing"))?;
        let prev = CniResult::parse_prev(prev, args.cni_version())?;
        check_prev(&conf, &prev, &args.ifname)?;
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> std::process::ExitCode {
    cni_skel::run(&Static)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(addresses: &[(&str, Option<&str>)]) -> StaticConf {
        StaticConf {
            addresses: addresses
                .iter()
                .map(|(a, g)| config::Address {
                    address: a.parse().unwrap(),
                    gateway: g.map(|g| g.parse().unwrap()),
                })
                .collect(),
            routes: Vec::new(),
            dns: Default::default(),
        }
    }

    fn prev(json: &str) -> CniResult {
        CniResult::parse(json.as_bytes(), "1.0.0").unwrap()
    }

    #[test]
    fn check_compares_addresses_and_gateways() {
        let p = prev(
            r#"{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.5/24","gateway":"10.0.0.1"},{"address":"fd00::5/64"}]}"#,
        );
        check_prev(
            &conf(&[("10.0.0.5/24", Some("10.0.0.1")), ("fd00::5/64", None)]),
            &p,
            "eth0",
        )
        .unwrap();
        // The prefix is not compared, as in the reference (it compares IPs).
        check_prev(&conf(&[("10.0.0.5/16", None)]), &p, "eth0").unwrap();
        let e = check_prev(&conf(&[("10.0.0.5/24", Some("10.0.0.2"))]), &p, "eth0").unwrap_err();
        assert_eq!(
            e.msg,
            "static: Failed to match addr 10.0.0.5 on interface eth0"
        );
        let e = check_prev(&conf(&[("fd00::5/64", Some("fd00::1"))]), &p, "net1").unwrap_err();
        assert_eq!(
            e.msg,
            "static: Failed to match addr fd00::5 on interface net1"
        );
        let e = check_prev(&conf(&[("10.0.0.6/24", None)]), &p, "eth0").unwrap_err();
        assert!(e.msg.contains("Failed to find addr 10.0.0.6"), "{e:?}");
        check_prev(&conf(&[]), &p, "eth0").unwrap();
    }

    #[test]
    fn result_keeps_order_and_has_no_interface() {
        let mut c = conf(&[("fd00::5/64", None), ("10.0.0.5/24", Some("10.0.0.1"))]);
        c.routes = vec![cni_skel::Route::new("0.0.0.0/0".parse().unwrap(), None); 2];
        let r = result(c, "1.0.0");
        assert_eq!(r.ips.len(), 2);
        assert!(r.ips.iter().all(|i| i.interface.is_none()));
        assert_eq!(r.ips[0].address.to_string(), "fd00::5/64");
        assert_eq!(r.routes.len(), 2);
    }
}
