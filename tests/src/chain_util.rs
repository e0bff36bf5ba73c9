//! A plugin chain (a conflist) run through cni-runtime as a runtime runs
//! it, from a private "host" namespace, for `eth0` of one container
//! namespace: for tests of a chained plugin behind a main one.

use crate::tempdir::TempDir;
use crate::{Netns, bin_dir};
use cni_runtime::{CniConfig, CniError, NetworkConfigList, RuntimeConf};
use serde_json::{Value, json};

/// The namespaces, the chain and the runtime's cache; all removed on drop.
pub struct ChainInHost {
    /// The private "host" the plugins run in.
    pub host: Netns,
    /// The container.
    pub container: Netns,
    /// Private files: the runtime's cache in `cache/`, the rest free for
    /// the plugins' configs (host-local's `dataDir`).
    pub dir: TempDir,
    list: NetworkConfigList,
    cni: CniConfig,
    rt: RuntimeConf,
}

impl ChainInHost {
    /// The network `name` (cniVersion 1.0.0, container ID `name` too) of
    /// the plugins `plugins(dir)` returns, the namespaces tagged `tag`h
    /// and `tag`c.
    pub fn new(tag: &str, name: &str, plugins: impl FnOnce(&TempDir) -> Value) -> ChainInHost {
        let host = Netns::new(&format!("{tag}h"));
        let container = Netns::new(&format!("{tag}c"));
        let dir = TempDir::new(name);
        let list = json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins(&dir)});
        let list = NetworkConfigList::from_bytes(list.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("conflist {list}: {e:?}"));
        let cni = CniConfig::new(vec![bin_dir()]).with_cache_dir(dir.join("cache"));
        let rt = RuntimeConf {
            container_id: name.into(),
            netns: container.path().display().to_string(),
            ifname: "eth0".into(),
            args: Vec::new(),
            capability_args: Default::default(),
        };
        ChainInHost {
            host,
            container,
            dir,
            list,
            cni,
            rt,
        }
    }

    /// ADD of the chain.
    pub fn add(&self) -> Result<(), CniError> {
        self.host
            .run_in(|| self.cni.add_network_list(&self.list, &self.rt))
            .map(drop)
    }

    /// CHECK of the chain, with the cached result.
    pub fn check(&self) -> Result<(), CniError> {
        self.host
            .run_in(|| self.cni.check_network_list(&self.list, &self.rt))
    }

    /// DEL of the chain, with the cached result.
    pub fn del(&self) -> Result<(), CniError> {
        self.host
            .run_in(|| self.cni.del_network_list(&self.list, &self.rt))
    }
}
