//! Knowledge entries' vectors, by embedding model and the SHA-256 of the entry's text.

use std::collections::{HashMap, HashSet};

use super::sql::{Value, args};
use super::{Store, StoreError};
use crate::llm::embed::{from_bytes, to_bytes};

/// Hashes asked for in one query at most (the rest in further queries).
const HASHES_PER_QUERY: usize = 500;

impl Store {
    /// The vectors kept of these entries (by hash), for `model`; missing ones are absent.
    pub async fn knowledge_vectors(
        &self,
        model: &str,
        hashes: Vec<String>,
    ) -> Result<HashMap<String, Vec<f32>>, StoreError> {
        let model = model.to_string();
        self.read(move |db| {
            let mut found = HashMap::new();
            for batch in hashes.chunks(HASHES_PER_QUERY) {
                let placeholders: Vec<String> = (0..batch.len()).map(|i| format!("?{}", i + 2)).collect();
                let mut values = vec![Value::from(model.clone())];
                values.extend(batch.iter().map(|h| Value::from(h.clone())));
                let sql = format!(
                    "SELECT hash, vector FROM knowledge_vectors WHERE model = ?1 AND hash IN ({})",
                    placeholders.join(", ")
                );
                for row in db.query(&sql, &values)? {
                    found.insert(row.get::<String>(0)?, from_bytes(&row.get::<Vec<u8>>(1)?));
                }
            }
            Ok(found)
        })
        .await
    }

    /// Keeps vectors of entries (by hash) for `model`; one already kept stays as it is.
    pub async fn put_knowledge_vectors(&self, model: &str, vectors: Vec<(String, Vec<f32>)>) -> Result<(), StoreError> {
        let model = model.to_string();
        self.write(move |db| {
            let now = crate::clock::now_ms();
            for (hash, vector) in vectors {
                db.execute(
                    "INSERT INTO knowledge_vectors (model, hash, vector, created_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (model, hash) DO NOTHING",
                    args![model.clone(), hash, to_bytes(&vector), now],
                )?;
            }
            Ok(())
        })
        .await
    }

    /// Deletes the vectors kept before `before` (ms) of entries no agent has (an entry's
    /// key is `hash(entry)`), of every model; how many went. Read and deleted in one write,
    /// so an apply cannot come to use a vector between the two.
    pub async fn delete_unused_knowledge_vectors(
        &self,
        before: i64,
        hash: fn(&str) -> String,
    ) -> Result<usize, StoreError> {
        self.write(move |db| {
            let mut in_use = HashSet::new();
            for row in db.query("SELECT knowledge FROM agents", args![])? {
                let entries: Vec<String> = super::json_column(&row.get::<String>(0)?, "agent knowledge")?;
                in_use.extend(entries.iter().map(|entry| hash(entry)));
            }
            let mut deleted = 0;
            for row in db.query(
                "SELECT model, hash FROM knowledge_vectors WHERE created_at < ?1",
                args![before],
            )? {
                let (model, hash): (String, String) = (row.get(0)?, row.get(1)?);
                if !in_use.contains(&hash) {
                    deleted += db.execute(
                        "DELETE FROM knowledge_vectors WHERE model = ?1 AND hash = ?2",
                        args![model, hash],
                    )? as usize;
                }
            }
            Ok(deleted)
        })
        .await
    }
}
