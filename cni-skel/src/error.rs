//! The CNI error type and the spec's error codes.
//!
//! | code | meaning | used for |
//! |---|---|---|
//! | 1 | incompatible CNI version | unsupported `cniVersion`; CHECK < 0.4.0; GC/STATUS < 1.1.0 |
//! | 2 | unsupported field | a key or value we refuse (the message names both) |
//! | 3 | unknown container | |
//! | 4 | invalid environment variables | missing or invalid `CNI_*` |
//! | 5 | I/O failure | reading stdin, state directories |
//! | 6 | decoding failure | bad JSON, bad `prevResult` |
//! | 7 | invalid network config | bad network name, failed config validation |
//! | 8 | invalid netns | `CNI_NETNS` is the plugin's own netns, or not a netns |
//! | 11 | try again later | transient failures |
//! | 50/51 | STATUS only | plugin not available / limited connectivity |
//! | 999 | internal | kernel and other plain errors (Go's `ErrInternal`) |
//!
//! The process always exits with status 1 on error, never with the code.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Spec error codes.
pub mod code {
    /// Incompatible CNI version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unsupported field in the network configuration.
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// Container unknown or does not exist.
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid necessary environment variables.
    pub const INVALID_ENV: u32 = 4;
    /// I/O failure.
    pub const IO_FAILURE: u32 = 5;
    /// Failed to decode content.
    pub const DECODING_FAILURE: u32 = 6;
    /// Invalid network config.
    pub const INVALID_NETWORK_CONFIG: u32 = 7;
    /// Invalid network namespace.
    pub const INVALID_NETNS: u32 = 8;
    /// Try again later.
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin is not available.
    pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
    /// STATUS: limited connectivity for existing containers.
    pub const LIMITED_CONNECTIVITY: u32 = 51;
    /// Internal error.
    pub const INTERNAL: u32 = 999;
}

/// A CNI error: what a plugin prints on stdout when it fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniError {
    /// The spec error code.
    pub code: u32,
    /// A short message.
    pub msg: String,
    /// Longer details; omitted from the JSON when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// An error with a code, a message and details.
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    /// A plain plugin error (code 999), as Go plugins return for any non-typed error.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(code::INTERNAL, msg, "")
    }

    /// Invalid network configuration (code 7).
    pub fn invalid_config(msg: impl Into<String>) -> Self {
        Self::new(code::INVALID_NETWORK_CONFIG, msg, "")
    }

    /// Prefixes the message with some context: `"<context>: <msg>"`.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.msg = format!("{context}: {}", self.msg);
        self
    }

    /// The JSON printed on stdout, with the config's `cniVersion` first.
    pub fn to_json(&self, cni_version: &str) -> String {
        #[derive(Serialize)]
        struct Printed<'a> {
            #[serde(rename = "cniVersion")]
            cni_version: &'a str,
            code: u32,
            msg: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            details: &'a str,
        }
        crate::types::to_pretty_json(&Printed {
            cni_version,
            code: self.code,
            msg: &self.msg,
            details: &self.details,
        })
    }
}

impl fmt::Display for CniError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.details.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}; {}", self.msg, self.details)
        }
    }
}

impl std::error::Error for CniError {}

impl From<std::io::Error> for CniError {
    fn from(e: std::io::Error) -> Self {
        CniError::internal(e.to_string())
    }
}

impl From<serde_json::Error> for CniError {
    fn from(e: serde_json::Error) -> Self {
        CniError::new(code::DECODING_FAILURE, e.to_string(), "")
    }
}

/// Adds context to any error on its way to becoming a [`CniError`].
pub trait Context<T> {
    /// Maps the error to a [`CniError`] whose message is `"<context>: <error>"`.
    fn context(self, context: impl fmt::Display) -> Result<T, CniError>;
}

impl<T, E: Into<CniError>> Context<T> for Result<T, E> {
    fn context(self, context: impl fmt::Display) -> Result<T, CniError> {
        self.map_err(|e| e.into().context(context))
    }
}
