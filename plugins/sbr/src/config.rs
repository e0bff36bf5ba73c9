//! The sbr network config: `table`, the one key of its own.

use cni_skel::{CmdArgs, CniError};
use serde::Deserialize;

/// The keys sbr reads itself.
#[derive(Debug, Default, Deserialize)]
pub struct Conf {
    /// Only add rules to this table (its routes are someone else's).
    #[serde(default)]
    table: Option<i64>,
}

impl Conf {
    /// `table`, checked: `None` = a table per address, chosen by ADD.
    pub fn parse(args: &CmdArgs) -> Result<Option<u32>, CniError> {
        let c: Conf = cni_skel::gojson::from_slice(&args.stdin).map_err(|e| {
            CniError::invalid_config(format!("failed to parse network configuration: {e}"))
        })?;
        match c.table {
            None => Ok(None),
            // 0 (unspec), 253-255 (default, main, local) are the kernel's.
            Some(t) => match u32::try_from(t) {
                Ok(t) if t != 0 && !(253..=255).contains(&t) => Ok(Some(t)),
                _ => Err(CniError::invalid_config(format!(
                    "table {t} is not a usable routing table id"
                ))),
            },
        }
    }
}
