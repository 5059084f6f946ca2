//! Where a component's bytes come from: the four handler components built into the host,
//! an upload kept in the database (one copy, content-addressed), or bytes in hand (a
//! component being inspected). The bytes are read only when neither memory nor the
//! compiled cache has the component.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::PluginKind;
use crate::domain::HandlerType;

pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A component to run: where its bytes are, and what kind of plugin it is.
#[derive(Debug, Clone)]
pub struct ComponentRef {
    pub hash: String,
    pub kind: PluginKind,
    pub(super) source: Source,
}

#[derive(Clone)]
pub(super) enum Source {
    Embedded(&'static [u8]),
    Memory(Arc<Vec<u8>>),
    /// An uploaded component, whose bytes the database keeps.
    Stored(crate::store::Store),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Embedded(_) => f.write_str("Embedded"),
            Source::Memory(_) => f.write_str("Memory"),
            Source::Stored(_) => f.write_str("Stored"),
        }
    }
}

impl ComponentRef {
    pub(super) fn stored(hash: &str, store: &crate::store::Store) -> ComponentRef {
        ComponentRef {
            hash: hash.to_string(),
            kind: PluginKind::Custom,
            source: Source::Stored(store.clone()),
        }
    }

    /// A reader of its bytes, for the blocking pool (see `ComponentCache::component`).
    pub(super) fn bytes(&self) -> impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static {
        let (source, hash) = (self.source.clone(), self.hash.clone());
        move || match source {
            Source::Embedded(bytes) => Ok(bytes.to_vec()),
            Source::Memory(bytes) => Ok(bytes.to_vec()),
            Source::Stored(store) => stored_bytes(&hash, &store),
        }
    }
}

/// The database's bytes of an uploaded component, checked against its hash.
fn stored_bytes(hash: &str, store: &crate::store::Store) -> Result<Vec<u8>, String> {
    let stored = tokio::runtime::Handle::current()
        .block_on(store.plugin_component(hash))
        .map_err(|e| format!("cannot read component {hash} from the database: {e}"))?
        .ok_or_else(|| format!("the database holds no component {hash}; apply its agent again"))?;
    if content_hash(&stored) != hash {
        return Err(format!(
            "the database's bytes of component {hash} do not match its hash"
        ));
    }
    Ok(stored)
}

const BUILTIN_COMPONENTS: &[(HandlerType, &[u8])] = &[
    (
        HandlerType::SimpleText,
        include_bytes!(env!("BUILT_PLUGIN_SIMPLE_TEXT")),
    ),
    (HandlerType::Prompt, include_bytes!(env!("BUILT_PLUGIN_PROMPT"))),
    (HandlerType::Webhook, include_bytes!(env!("BUILT_PLUGIN_WEBHOOK"))),
    (HandlerType::BuiltIn, include_bytes!(env!("BUILT_PLUGIN_BUILT_IN"))),
];

/// The handler components built into the host, by handler type.
pub(super) fn builtins() -> Vec<(HandlerType, ComponentRef)> {
    BUILTIN_COMPONENTS
        .iter()
        .map(|(handler, bytes)| {
            let component = ComponentRef {
                hash: content_hash(bytes),
                kind: PluginKind::BuiltIn,
                source: Source::Embedded(bytes),
            };
            (*handler, component)
        })
        .collect()
}
