use crate::plugins::bindings::agent::plugin::kv::Host;
use crate::plugins::state::HostState;

pub const MAX_KEY_BYTES: usize = 256;
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
pub const MAX_KEYS: u32 = 1_000;

impl Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, String>> {
        if let Err(e) = self.call.grants.check_kv() {
            return Ok(Err(e));
        }
        let call = &self.call;
        Ok(call
            .services
            .store
            .kv_get(&call.agent_id, &call.plugin_scope, &key)
            .await
            .map_err(|e| storage_error(&e)))
    }

    async fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
        if let Err(e) = self.call.grants.check_kv() {
            return Ok(Err(e));
        }
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Ok(Err(format!("a key must be 1 to {MAX_KEY_BYTES} bytes")));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Ok(Err(format!("a value may be at most {MAX_VALUE_BYTES} bytes")));
        }
        let call = &self.call;
        Ok(call
            .services
            .store
            .kv_set(&call.agent_id, &call.plugin_scope, &key, value, MAX_KEYS)
            .await
            .map_err(|e| storage_error(&e)))
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<Result<(), String>> {
        if let Err(e) = self.call.grants.check_kv() {
            return Ok(Err(e));
        }
        let call = &self.call;
        Ok(call
            .services
            .store
            .kv_delete(&call.agent_id, &call.plugin_scope, &key)
            .await
            .map_err(|e| storage_error(&e)))
    }
}

fn storage_error(err: &crate::store::StoreError) -> String {
    match err {
        crate::store::StoreError::Conflict(message) => message.clone(),
        other => {
            tracing::error!(error = %other, "plugin key-value store failure");
            "the store failed; try again".into()
        }
    }
}
