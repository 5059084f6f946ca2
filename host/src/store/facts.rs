use super::sql::args;
use super::{Store, StoreError};

impl Store {
    /// Records `value` under `name` unless a value is recorded already; the recorded one.
    pub async fn agree_on_fact(&self, name: &str, value: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        let name = name.to_string();
        self.write(move |db| {
            db.execute(
                "INSERT INTO deployment_facts (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                args![&name, value],
            )?;
            db.query_one("SELECT value FROM deployment_facts WHERE name = ?1", args![name])?
                .get(0)
        })
        .await
    }
}
