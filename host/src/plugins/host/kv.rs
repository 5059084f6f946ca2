use crate::plugins::bindings::for_each_version;
use crate::plugins::state::HostState;
use crate::store::KvQuota;

pub const MAX_KEY_BYTES: usize = 256;
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
pub const MAX_KEYS: u32 = 1_000;

impl HostState {
    async fn kv_get(&mut self, key: String) -> Result<Option<Vec<u8>>, String> {
        self.call.grants.check_kv()?;
        let call = &self.call;
        call.services
            .store
            .kv_get(&call.agent_id, &call.plugin_scope, &key)
            .await
            .map_err(|e| storage_error(&e))
    }

    async fn kv_set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        self.call.grants.check_kv()?;
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(format!("a key must be 1 to {MAX_KEY_BYTES} bytes"));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!("a value may be at most {MAX_VALUE_BYTES} bytes"));
        }
        let call = &self.call;
        call.services
            .store
            .kv_set(
                &call.agent_id,
                &call.plugin_scope,
                &key,
                value,
                KvQuota {
                    max_keys: MAX_KEYS,
                    account_id: call.account_id.clone(),
                    max_account_bytes: call.services.kv_max_account_bytes,
                },
            )
            .await
            .map_err(|e| storage_error(&e))
    }

    async fn kv_delete(&mut self, key: String) -> Result<(), String> {
        self.call.grants.check_kv()?;
        let call = &self.call;
        call.services
            .store
            .kv_delete(&call.agent_id, &call.plugin_scope, &key)
            .await
            .map_err(|e| storage_error(&e))
    }
}

macro_rules! kv_host {
    ($v:ident) => {
        impl crate::plugins::bindings::$v::agent::plugin::kv::Host for HostState {
            async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, String>> {
                Ok(self.kv_get(key).await)
            }

            async fn set(&mut self, key: String, value: Vec<u8>) -> wasmtime::Result<Result<(), String>> {
                Ok(self.kv_set(key, value).await)
            }

            async fn delete(&mut self, key: String) -> wasmtime::Result<Result<(), String>> {
                Ok(self.kv_delete(key).await)
            }
        }
    };
}
for_each_version!(kv_host);

fn storage_error(err: &crate::store::StoreError) -> String {
    match err {
        crate::store::StoreError::Conflict(message) | crate::store::StoreError::QuotaExceeded(message) => {
            message.clone()
        }
        other => {
            tracing::error!(error = %other, "plugin key-value store failure");
            "the store failed; try again".into()
        }
    }
}
