//! The CNI tuning plugin: sets sysctls and link attributes (MAC, MTU,
//! promiscuous and all-multicast mode, queue length) of the container's
//! interface, saves the original values and puts them back on DEL.

pub mod add;
pub mod check;
pub mod config;
pub mod del;
pub mod gc;
pub mod regex;
pub mod state;
pub mod tune;

use cni_skel::{CmdArgs, CmdResult, Output, Plugin};
use std::process::ExitCode;

/// The plugin.
pub struct Tuning;

impl Plugin for Tuning {
    fn about(&self) -> String {
        cni_skel::about("tuning")
    }

    fn add(&self, args: &CmdArgs) -> CmdResult {
        add::add(args)
    }

    fn del(&self, args: &CmdArgs) -> CmdResult {
        del::del(args)
    }

    fn check(&self, args: &CmdArgs) -> CmdResult {
        check::check(args)
    }

    fn gc(&self, args: &CmdArgs) -> CmdResult {
        gc::gc(args)
    }

    fn status(&self, args: &CmdArgs) -> CmdResult {
        config::parse(args)?;
        Ok(Output::Nothing)
    }
}

/// Why tuning, which passes the prevResult on, cannot run first.
const NO_PREV_RESULT: &str = "Required prevResult missing";

/// Runs the plugin as its binary does; `_args` are the command-line
/// arguments after the program name, which a CNI plugin does not read (its
/// input is the environment and stdin).
pub fn main(_args: cni_skel::ProgramArgs) -> ExitCode {
    cni_skel::run(&Tuning)
}
