//! The master key that encrypts secrets at rest (wallet keys, bot and social tokens).
//! It comes from `AGENT_HOST_MASTER_KEY` or from `DATA_DIR/master.key`, created 0600 on
//! first use. The type never prints its bytes.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;

pub const MASTER_KEY_FILE: &str = "master.key";

pub struct MasterKey([u8; 32]);

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    #[error("AGENT_HOST_MASTER_KEY must be 32 bytes as 64 hex digits or base64")]
    BadEnv,
    #[error("{0}: the master key file must hold 32 bytes as 64 hex digits")]
    BadFile(PathBuf),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

impl MasterKey {
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key from the environment, else the data dir's file, created if missing.
    pub fn load_or_create(data_dir: &Path) -> Result<MasterKey, MasterKeyError> {
        if let Ok(text) = std::env::var("AGENT_HOST_MASTER_KEY") {
            return decode(text.trim()).ok_or(MasterKeyError::BadEnv);
        }
        let path = data_dir.join(MASTER_KEY_FILE);
        let io = |source| MasterKeyError::Io {
            path: path.clone(),
            source,
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => decode(text.trim()).ok_or_else(|| MasterKeyError::BadFile(path.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                crate::random::fill(&mut key);
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                let mut file = options.open(&path).map_err(io)?;
                file.write_all(hex::encode(key).as_bytes()).map_err(io)?;
                file.sync_all().map_err(io)?;
                Ok(MasterKey(key))
            }
            Err(e) => Err(io(e)),
        }
    }
}

fn decode(text: &str) -> Option<MasterKey> {
    let bytes = if text.len() == 64 {
        hex::decode(text).ok()?
    } else {
        base64::engine::general_purpose::STANDARD.decode(text).ok()?
    };
    Some(MasterKey(bytes.try_into().ok()?))
}
