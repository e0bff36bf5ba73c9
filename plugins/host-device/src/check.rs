//! CHECK.

use crate::config;
use crate::device::dpdk;
use crate::sysfs::Sysfs;
use cni_plugin::link_plugin::{self, Ctx, Expect};
use cni_skel::{CmdArgs, CmdResult, Command, Output, delegate};

pub fn check(args: &CmdArgs, sys: &Sysfs) -> CmdResult {
    let conf = config::load(args, sys)?;
    if dpdk(&conf, sys)? {
        if conf.ipam {
            delegate::ipam_run(Command::Check, args)?;
        }
        args.required_prev_result("Required prevResult missing")?;
        return Ok(Output::Nothing);
    }
    let cx = Ctx::open(args)?;
    let expect = Expect {
        routes: true,
        ..Expect::default()
    };
    link_plugin::check(args, &cx, conf.ipam, &expect)?;
    Ok(Output::Nothing)
}
