//! The runtime side of CNI, with libcni's semantics (cni:libcni/api.go):
//! load network config lists, run their plugins for ADD / DEL / CHECK /
//! GC / STATUS with the config each plugin must see, and keep libcni's
//! result cache so DEL, CHECK and GC find an attachment's `prevResult`.
//!
//! ```no_run
//! use cni_runtime::{CniConfig, NetworkConfigList, RuntimeConf};
//! let list = NetworkConfigList::from_file("/etc/cni/net.d/10-mynet.conflist")?;
//! let cni = CniConfig::new(vec!["/opt/cni/bin".into()]);
//! let rt = RuntimeConf {
//!     container_id: "c1".into(),
//!     netns: "/run/netns/c1".into(),
//!     ifname: "eth0".into(),
//!     ..Default::default()
//! };
//! let result = cni.add_network_list(&list, &rt)?;
//! println!("{}", result.to_json(&list.cni_version)?);
//! cni.del_network_list(&list, &rt)?;
//! # Ok::<(), cni_skel::CniError>(())
//! ```
//!
//! Differences from libcni, all deliberate:
//! - the request config of ADD / DEL / CHECK carries no `capabilities` key
//!   (the spec says it "must not be set"; libcni leaves it in);
//! - [`CniConfig::check_network_list`] fails (code 3) when no cached result
//!   exists, since the spec requires `prevResult` on CHECK (libcni calls the
//!   plugins without one); [`CniConfig::check_network_list_with`] takes an
//!   explicit, optional one;
//! - every plugin failure names the plugin (`plugin type="x" failed (add): …`),
//!   CHECK and STATUS included;
//! - cache files are replaced atomically.

pub mod cache;
pub mod conf;
pub mod exec;

pub use cni_skel::{CniError, CniResult};
pub use conf::{NetworkConfigList, load_network_conf};

use cni_skel::error::code;
use cni_skel::version::Version;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The arguments of one attachment, besides the network config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeConf {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS` (may be empty on DEL).
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_ARGS` pairs, joined as `K=V;K=V`.
    pub args: Vec<(String, String)>,
    /// Capability arguments (`portMappings`, `ips`, `mac`, ...). A plugin
    /// gets, in `runtimeConfig`, those its `capabilities` enable.
    pub capability_args: Map<String, Value>,
}

/// An attachment that is still in use, for GC.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GcAttachment {
    /// The container ID.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// The interface name.
    #[serde(rename = "ifname")]
    pub ifname: String,
}

/// An attachment found in the result cache.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkAttachment {
    /// The container ID.
    pub container_id: String,
    /// The network name.
    pub network: String,
    /// The interface name.
    pub ifname: String,
    /// The config list bytes used for ADD.
    pub config: Vec<u8>,
    /// The netns path.
    pub netns: String,
    /// The `CNI_ARGS` pairs.
    pub cni_args: Vec<(String, String)>,
    /// The capability arguments.
    pub capability_args: Map<String, Value>,
}

/// A plugin's answer to VERSION.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    /// The version the plugin answered in.
    pub cni_version: String,
    /// The spec versions it supports.
    pub supported_versions: Vec<String>,
}

/// `type="bridge"` (plus ` name="x"` when the plugin config has its own name).
pub fn plugin_description(plugin: &Value) -> String {
    let field = |k: &str| plugin.get(k).and_then(Value::as_str).unwrap_or("");
    let mut out = format!("type={:?}", field("type"));
    if !field("name").is_empty() {
        out.push_str(&format!(" name={:?}", field("name")));
    }
    out
}

/// A copy of the plugin config with `values` set (libcni's `InjectConf`).
pub fn inject_conf(
    plugin: &Value,
    values: Vec<(&str, Value)>,
) -> Result<Map<String, Value>, CniError> {
    let Some(obj) = plugin.as_object() else {
        return Err(CniError::invalid_config(format!(
            "plugin config is not a JSON object: {plugin}"
        )));
    };
    let mut obj = obj.clone();
    for (k, v) in values {
        obj.insert(k.to_string(), v);
    }
    Ok(obj)
}

/// The request config of one ADD / DEL / CHECK (spec "Deriving request
/// configuration"): the plugin config with the list's `name` and
/// `cniVersion`, `prevResult` when given, and — with `rt` — `capabilities`
/// replaced by a `runtimeConfig` holding the enabled capabilities the
/// runtime has arguments for (left as configured when there are none).
pub fn build_one_config(
    name: &str,
    cni_version: &str,
    plugin: &Value,
    prev_result: Option<&Value>,
    rt: Option<&RuntimeConf>,
) -> Result<Vec<u8>, CniError> {
    let mut values = vec![
        ("name", Value::String(name.to_string())),
        ("cniVersion", Value::String(cni_version.to_string())),
    ];
    if let Some(prev) = prev_result {
        values.push(("prevResult", prev.clone()));
    }
    let mut obj = inject_conf(plugin, values)?;
    if let Some(rt) = rt {
        let caps = obj.remove("capabilities");
        let mut rc = Map::new();
        if let Some(Value::Object(caps)) = caps {
            for (cap, enabled) in caps {
                if enabled == Value::Bool(true)
                    && let Some(arg) = rt.capability_args.get(&cap)
                {
                    rc.insert(cap, arg.clone());
                }
            }
        }
        if !rc.is_empty() {
            obj.insert("runtimeConfig".into(), Value::Object(rc));
        }
    }
    serde_json::to_vec(&obj).map_err(|e| CniError::internal(e.to_string()))
}

/// A result as JSON in `version`.
fn result_value(result: &CniResult, version: &str) -> Result<Value, CniError> {
    let text = result.to_json(version)?;
    serde_json::from_str(&text).map_err(|e| CniError::internal(e.to_string()))
}

/// Errors of several steps as one: the first one's code, all messages.
fn join_errors(errs: Vec<CniError>) -> Result<(), CniError> {
    let mut iter = errs.into_iter();
    let Some(first) = iter.next() else {
        return Ok(());
    };
    let rest: Vec<String> = iter.map(|e| e.to_string()).collect();
    if rest.is_empty() {
        return Err(first);
    }
    let mut all = vec![first.to_string()];
    all.extend(rest);
    Err(CniError::new(first.code, all.join("\n"), ""))
}

/// Runs plugins for networks: libcni's `CNIConfig`.
#[derive(Debug, Clone)]
pub struct CniConfig {
    /// Where plugin binaries are looked up, in order (becomes `CNI_PATH`).
    pub path: Vec<PathBuf>,
    /// The cache directory; results live in `<cache_dir>/results`.
    pub cache_dir: PathBuf,
}

impl CniConfig {
    /// libcni's default cache directory.
    pub const DEFAULT_CACHE_DIR: &'static str = "/var/lib/cni";

    /// A runtime looking for plugins in `path`, caching in
    /// [`CniConfig::DEFAULT_CACHE_DIR`].
    pub fn new(path: Vec<PathBuf>) -> Self {
        CniConfig {
            path,
            cache_dir: PathBuf::from(Self::DEFAULT_CACHE_DIR),
        }
    }

    /// The same with another cache directory.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = dir.into();
        self
    }

    /// Finds a plugin binary by type in [`CniConfig::path`].
    pub fn find_plugin(&self, plugin_type: &str) -> Result<PathBuf, CniError> {
        cni_skel::delegate::find_plugin(plugin_type, &self.path)
    }

    fn invoke_args(&self, command: &str, rt: Option<&RuntimeConf>) -> exec::InvokeArgs {
        let path = self
            .path
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        match rt {
            Some(rt) => exec::InvokeArgs {
                command: command.to_string(),
                container_id: rt.container_id.clone(),
                netns: rt.netns.clone(),
                args: exec::join_args(&rt.args),
                ifname: rt.ifname.clone(),
                path,
            },
            None => exec::InvokeArgs {
                command: command.to_string(),
                path,
                ..Default::default()
            },
        }
    }

    fn run(
        &self,
        plugin: &Value,
        conf: &[u8],
        command: &str,
        rt: Option<&RuntimeConf>,
    ) -> Result<Vec<u8>, CniError> {
        let ty = plugin.get("type").and_then(Value::as_str).unwrap_or("");
        let bin = self.find_plugin(ty)?;
        exec::exec_plugin(&bin, conf, &self.invoke_args(command, rt))
    }

    /// ADD: runs the plugins in order, each getting the previous result as
    /// `prevResult`, caches the final result and returns it (in the version
    /// the last plugin answered in; `to_json(&list.cni_version)` converts).
    pub fn add_network_list(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<CniResult, CniError> {
        let mut prev: Option<(CniResult, Value)> = None;
        for plugin in &list.plugins {
            let step = self
                .add_one(list, plugin, prev.as_ref().map(|p| &p.1), rt)
                .map_err(|e| {
                    e.context(format!(
                        "plugin {} failed (add)",
                        plugin_description(plugin)
                    ))
                })?;
            prev = Some(step);
        }
        let Some((result, value)) = prev else {
            return Err(CniError::invalid_config(format!(
                "network {:?} has no plugins",
                list.name
            )));
        };
        self.cache_add(list, rt, &value).map_err(|e| {
            e.context(format!(
                "failed to set network {:?} cached result",
                list.name
            ))
        })?;
        Ok(result)
    }

    fn add_one(
        &self,
        list: &NetworkConfigList,
        plugin: &Value,
        prev: Option<&Value>,
        rt: &RuntimeConf,
    ) -> Result<(CniResult, Value), CniError> {
        let ty = plugin.get("type").and_then(Value::as_str).unwrap_or("");
        let bin = self.find_plugin(ty)?;
        cni_skel::env::validate_container_id(&rt.container_id)?;
        validate_network_name(&list.name)?;
        cni_skel::env::validate_ifname(&rt.ifname)?;
        let conf = build_one_config(&list.name, &list.cni_version, plugin, prev, Some(rt))?;
        let out = exec::exec_plugin(&bin, &conf, &self.invoke_args("ADD", Some(rt)))?;
        let result = CniResult::parse(&out, &list.cni_version)?;
        // What libcni passes on: the result re-encoded in its own version.
        let value = match result_value(&result, &result.cni_version) {
            Ok(v) => v,
            Err(_) => {
                serde_json::from_slice(&out).map_err(|e| CniError::internal(e.to_string()))?
            }
        };
        Ok((result, value))
    }

    fn cache_path(&self, list: &NetworkConfigList, rt: &RuntimeConf) -> Result<PathBuf, CniError> {
        cache::cache_file(&self.cache_dir, &list.name, &rt.container_id, &rt.ifname)
    }

    fn cache_add(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
        result: &Value,
    ) -> Result<(), CniError> {
        let info = cache::CachedInfo {
            kind: cache::CACHE_V1.to_string(),
            container_id: rt.container_id.clone(),
            config: list.bytes.clone(),
            if_name: rt.ifname.clone(),
            network_name: list.name.clone(),
            netns: rt.netns.clone(),
            cni_args: Some(rt.args.clone()).filter(|a| !a.is_empty()),
            capability_args: Some(rt.capability_args.clone()).filter(|c| !c.is_empty()),
            result: result.as_object().cloned(),
        };
        cache::write(&self.cache_path(list, rt)?, &info)
    }

    fn cache_del(&self, list: &NetworkConfigList, rt: &RuntimeConf) {
        if let Ok(p) = self.cache_path(list, rt) {
            let _ = std::fs::remove_file(p);
        }
    }

    /// The cached result of the attachment, converted to the list's version;
    /// `None` when nothing is cached.
    pub fn get_network_list_cached_result(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<Option<CniResult>, CniError> {
        let value = match cache::read(&self.cache_path(list, rt)?)? {
            None => return Ok(None),
            Some(cache::Cached::V1(info)) => match info.result {
                Some(m) => Value::Object(m),
                None => return Ok(None),
            },
            Some(cache::Cached::Legacy(v)) => v,
        };
        let bytes = serde_json::to_vec(&value).map_err(|e| CniError::internal(e.to_string()))?;
        let mut result = CniResult::parse(&bytes, &list.cni_version)?;
        result.to_json(&list.cni_version).map_err(|e| {
            e.context(format!(
                "failed to convert cached result to config version {:?}",
                list.cni_version
            ))
        })?;
        result.cni_version = list.cni_version.clone();
        Ok(Some(result))
    }

    /// The cached config bytes of the attachment, and `rt` with the cached
    /// `CNI_ARGS` and capability arguments; `None` when nothing is cached.
    pub fn get_network_list_cached_config(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<Option<(Vec<u8>, RuntimeConf)>, CniError> {
        let path = self.cache_path(list, rt)?;
        match cache::read(&path)? {
            None => Ok(None),
            Some(cache::Cached::Legacy(_)) => Err(CniError::internal(format!(
                "read cached network {:?} config has wrong kind",
                list.name
            ))),
            Some(cache::Cached::V1(info)) => {
                let mut new_rt = rt.clone();
                if let Some(args) = info.cni_args {
                    new_rt.args = args;
                }
                new_rt.capability_args = info.capability_args.unwrap_or_default();
                Ok(Some((info.config, new_rt)))
            }
        }
    }

    /// All cached attachments (of one container when `container_id` is not empty).
    pub fn get_cached_attachments(
        &self,
        container_id: &str,
    ) -> Result<Vec<NetworkAttachment>, CniError> {
        Ok(cache::attachments(&self.cache_dir, container_id)?
            .into_iter()
            .map(|i| NetworkAttachment {
                container_id: i.container_id,
                network: i.network_name,
                ifname: i.if_name,
                config: i.config,
                netns: i.netns,
                cni_args: i.cni_args.unwrap_or_default(),
                capability_args: i.capability_args.unwrap_or_default(),
            })
            .collect())
    }

    /// DEL: runs the plugins in reverse order. From 0.4.0 on they get the
    /// cached result as `prevResult` (an unreadable cache entry is dropped
    /// and DEL goes on without). The cache entry is removed on success.
    pub fn del_network_list(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<(), CniError> {
        let mut prev = None;
        if Version::parse(&list.cni_version)? >= Version::CHECK {
            match self.get_network_list_cached_result(list, rt) {
                Ok(Some(r)) => prev = result_value(&r, &list.cni_version).ok(),
                Ok(None) => {}
                Err(_) => self.cache_del(list, rt),
            }
        }
        self.del_inner(list, rt, prev.as_ref())
    }

    /// DEL with an explicit `prevResult` (converted to the list's version)
    /// instead of the cached one.
    pub fn del_network_list_with(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
        prev_result: Option<&CniResult>,
    ) -> Result<(), CniError> {
        let prev = prev_result
            .map(|r| result_value(r, &list.cni_version))
            .transpose()?;
        self.del_inner(list, rt, prev.as_ref())
    }

    fn del_inner(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
        prev: Option<&Value>,
    ) -> Result<(), CniError> {
        for plugin in list.plugins.iter().rev() {
            let conf = build_one_config(&list.name, &list.cni_version, plugin, prev, Some(rt))?;
            self.run(plugin, &conf, "DEL", Some(rt)).map_err(|e| {
                e.context(format!(
                    "plugin {} failed (delete)",
                    plugin_description(plugin)
                ))
            })?;
        }
        self.cache_del(list, rt);
        Ok(())
    }

    /// CHECK (from 0.4.0 on; a no-op with `disableCheck`): runs the plugins
    /// in order with the cached result as `prevResult`, which must exist.
    pub fn check_network_list(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<(), CniError> {
        check_version(list)?;
        if list.disable_check {
            return Ok(());
        }
        let cached = self.get_network_list_cached_result(list, rt).map_err(|e| {
            e.context(format!(
                "failed to get network {:?} cached result",
                list.name
            ))
        })?;
        let Some(prev) = cached else {
            return Err(CniError::new(
                code::UNKNOWN_CONTAINER,
                format!(
                    "failed to get network {:?} cached result: no cached result for container {:?} interface {:?}",
                    list.name, rt.container_id, rt.ifname
                ),
                "",
            ));
        };
        let value = result_value(&prev, &list.cni_version)?;
        self.check_inner(list, rt, Some(&value))
    }

    /// CHECK with an explicit `prevResult` (none: the plugins get none).
    pub fn check_network_list_with(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
        prev_result: Option<&CniResult>,
    ) -> Result<(), CniError> {
        check_version(list)?;
        if list.disable_check {
            return Ok(());
        }
        let prev = prev_result
            .map(|r| result_value(r, &list.cni_version))
            .transpose()?;
        self.check_inner(list, rt, prev.as_ref())
    }

    fn check_inner(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
        prev: Option<&Value>,
    ) -> Result<(), CniError> {
        for plugin in &list.plugins {
            let conf = build_one_config(&list.name, &list.cni_version, plugin, prev, Some(rt))?;
            self.run(plugin, &conf, "CHECK", Some(rt)).map_err(|e| {
                e.context(format!(
                    "plugin {} failed (check)",
                    plugin_description(plugin)
                ))
            })?;
        }
        Ok(())
    }

    /// GC (a no-op with `disableGC`): first DEL for every cached attachment
    /// of this network that is not in `valid` (all of them when `valid` is
    /// `None`), then, from 1.1.0 on, GC on every plugin with
    /// `cni.dev/valid-attachments` (and libcni's `cni.dev/attachments`).
    /// Carries on after errors and reports them all.
    pub fn gc_network_list(
        &self,
        list: &NetworkConfigList,
        valid: Option<&[GcAttachment]>,
    ) -> Result<(), CniError> {
        if list.disable_gc {
            return Ok(());
        }
        let mut errs = Vec::new();
        let cached = self.get_cached_attachments("").unwrap_or_default();
        for a in cached.into_iter().filter(|a| a.network == list.name) {
            let key = GcAttachment {
                container_id: a.container_id.clone(),
                ifname: a.ifname.clone(),
            };
            if valid.is_some_and(|v| v.contains(&key)) {
                continue;
            }
            let rt = RuntimeConf {
                container_id: a.container_id,
                netns: a.netns,
                ifname: a.ifname,
                args: a.cni_args,
                capability_args: a.capability_args,
            };
            if let Err(e) = self.del_network_list(list, &rt) {
                errs.push(e.context(format!(
                    "failed to delete stale attachment {} {}",
                    rt.container_id, rt.ifname
                )));
            }
        }
        if Version::parse(&list.cni_version).is_ok_and(|v| v >= Version::GC_STATUS) {
            let mut inject = vec![
                ("name", Value::String(list.name.clone())),
                ("cniVersion", Value::String(list.cni_version.clone())),
            ];
            if let Some(v) = valid {
                let v = serde_json::to_value(v).map_err(|e| CniError::internal(e.to_string()))?;
                inject.push(("cni.dev/valid-attachments", v.clone()));
                inject.push(("cni.dev/attachments", v));
            }
            for plugin in &list.plugins {
                let ty = plugin.get("type").and_then(Value::as_str).unwrap_or("");
                let step = inject_conf(plugin, inject.clone())
                    .and_then(|c| {
                        serde_json::to_vec(&c).map_err(|e| CniError::internal(e.to_string()))
                    })
                    .and_then(|conf| self.run(plugin, &conf, "GC", None));
                if let Err(e) = step {
                    errs.push(e.context(format!("failed to GC plugin {ty}")));
                }
            }
        }
        join_errors(errs)
    }

    /// STATUS (from 1.1.0 on; earlier versions succeed without asking):
    /// every plugin in order; the first failure is returned, code intact.
    pub fn status_network_list(&self, list: &NetworkConfigList) -> Result<(), CniError> {
        if !Version::parse(&list.cni_version).is_ok_and(|v| v >= Version::GC_STATUS) {
            return Ok(());
        }
        let inject = vec![
            ("name", Value::String(list.name.clone())),
            ("cniVersion", Value::String(list.cni_version.clone())),
        ];
        for plugin in &list.plugins {
            let conf = serde_json::to_vec(&inject_conf(plugin, inject.clone())?)
                .map_err(|e| CniError::internal(e.to_string()))?;
            self.run(plugin, &conf, "STATUS", None).map_err(|e| {
                e.context(format!(
                    "plugin {} failed (status)",
                    plugin_description(plugin)
                ))
            })?;
        }
        Ok(())
    }

    /// VERSION on a plugin, as libcni's `GetVersionInfo`.
    pub fn get_version_info(&self, plugin_type: &str) -> Result<VersionInfo, CniError> {
        let bin = self.find_plugin(plugin_type)?;
        let args = exec::InvokeArgs {
            command: "VERSION".into(),
            netns: "dummy".into(),
            ifname: "dummy".into(),
            path: "dummy".into(),
            ..Default::default()
        };
        let stdin = format!("{{\"cniVersion\":{:?}}}", cni_skel::version::CURRENT);
        let out = match exec::exec_plugin(&bin, stdin.as_bytes(), &args) {
            Ok(out) => out,
            Err(e) if e.msg == "unknown CNI_COMMAND: VERSION" => {
                return Ok(VersionInfo {
                    cni_version: "0.1.0".into(),
                    supported_versions: vec!["0.1.0".into()],
                });
            }
            Err(e) => return Err(e),
        };
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            #[serde(default)]
            cni_version: String,
            #[serde(default)]
            supported_versions: Vec<String>,
        }
        let w: Wire = serde_json::from_slice(&out).map_err(|e| {
            CniError::new(
                code::DECODING_FAILURE,
                format!("decoding version info: {e}"),
                "",
            )
        })?;
        if w.cni_version.is_empty() {
            return Err(CniError::new(
                code::DECODING_FAILURE,
                "decoding version info: missing field cniVersion",
                "",
            ));
        }
        let supported_versions = match (w.supported_versions.is_empty(), w.cni_version.as_str()) {
            (false, _) => w.supported_versions,
            (true, "0.2.0") => vec!["0.1.0".into(), "0.2.0".into()],
            (true, _) => {
                return Err(CniError::new(
                    code::DECODING_FAILURE,
                    "decoding version info: missing field supportedVersions",
                    "",
                ));
            }
        };
        Ok(VersionInfo {
            cni_version: w.cni_version,
            supported_versions,
        })
    }
}

/// CHECK needs 0.4.0.
fn check_version(list: &NetworkConfigList) -> Result<(), CniError> {
    if Version::parse(&list.cni_version)? < Version::CHECK {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "configuration version {:?} does not support the CHECK command",
                list.cni_version
            ),
            "",
        ));
    }
    Ok(())
}

/// libcni's `ValidateNetworkName` (code 7).
fn validate_network_name(name: &str) -> Result<(), CniError> {
    if name.is_empty() {
        return Err(CniError::invalid_config("missing network name:"));
    }
    if !cni_skel::env::valid_name(name) {
        return Err(CniError::new(
            code::INVALID_NETWORK_CONFIG,
            "invalid characters found in network name",
            name,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
