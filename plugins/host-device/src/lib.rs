//! The CNI host-device plugin: moves an existing host network device into
//! the container as `CNI_IFNAME` (its host name kept in `IFLA_IFALIAS`) and
//! back on DEL, each way in one netns move that never shows the device on
//! the host under a foreign name. What it had on the host (MTU, up/down,
//! addresses, routes) is saved at ADD and put back at DEL ([`hostside`]),
//! with what the container cannot change about the device ([`identity`]):
//! DEL moves back that device, whatever it is named, and nothing else.
//! Addressing, undo, CHECK are `cni_plugin::link_plugin`'s.

pub mod add;
pub mod check;
pub mod config;
pub mod del;
pub mod device;
pub mod gc;
pub mod hostside;
pub mod identity;
pub mod sysfs;

use cni_plugin::link_plugin;
use cni_skel::{CmdArgs, CmdResult, Output, Plugin};
use std::process::ExitCode;
use sysfs::Sysfs;

/// The plugin.
pub struct HostDevice;

impl Plugin for HostDevice {
    fn about(&self) -> String {
        cni_skel::about("host-device")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add::add(args, &Sysfs::default())
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del::del(args, &Sysfs::default())
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check::check(args, &Sysfs::default())
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        gc::gc(args, &Sysfs::default())
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::load(args, &Sysfs::default())?;
        link_plugin::status(args, None)?;
        Ok(Output::Nothing)
    }
}

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    cni_skel::run(&HostDevice)
}
