//! What a plugin parses its config for: DEL is lenient where ADD refuses.
//!
//! A runtime whose DEL fails retries it and cannot remove the pod. A value
//! ADD refuses (an MTU out of range, a reserved table, a relative path)
//! never reached the kernel or the disk, so it names nothing DEL has to
//! undo: DEL logs it, stands a fallback in for it, and cleans up what the
//! rest of the config names. The reference's DEL does not check those
//! values either. A config that does not parse at all (a key of the wrong
//! JSON type) still fails DEL, as the reference's does.

use crate::{CmdArgs, CniError, Command};

/// The command a config is parsed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParseFor {
    /// ADD, CHECK, STATUS, GC: a refused value fails the command.
    #[default]
    Use,
    /// DEL: a refused value is logged and its fallback used.
    Del,
}

impl ParseFor {
    /// [`ParseFor::Del`] for DEL, else [`ParseFor::Use`].
    pub fn of(args: &CmdArgs) -> ParseFor {
        match args.command {
            Command::Del => ParseFor::Del,
            _ => ParseFor::Use,
        }
    }

    /// `checked`, except that for DEL a refused value is logged and
    /// `fallback` stands in for it.
    pub fn or_else<T>(
        self,
        checked: Result<T, CniError>,
        fallback: impl FnOnce() -> T,
    ) -> Result<T, CniError> {
        match (self, checked) {
            (ParseFor::Del, Err(e)) => {
                log::warn!("DEL goes on without a refused value: {}", e.msg);
                Ok(fallback())
            }
            (_, checked) => checked,
        }
    }

    /// A check of no value: for DEL a failed one is only logged.
    pub fn check(self, checked: Result<(), CniError>) -> Result<(), CniError> {
        self.or_else(checked, || ())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn del_takes_the_fallback_use_the_error() {
        let bad = || Err::<u32, _>(CniError::invalid_config("invalid MTU -1"));
        assert_eq!(ParseFor::Del.or_else(bad(), || 7).ok(), Some(7));
        assert_eq!(ParseFor::Use.or_else(bad(), || 7).unwrap_err().code, 7);
        assert_eq!(ParseFor::Del.or_else(Ok(3), || 7).ok(), Some(3));
        assert!(ParseFor::Del.check(Err(CniError::internal("x"))).is_ok());
        assert!(ParseFor::Use.check(Err(CniError::internal("x"))).is_err());
    }
}
