//! The one SQL interface the store's functions are written against, so each of them is
//! written once for SQLite and PostgreSQL. Statements use the subset of SQL both share,
//! with parameters numbered `?1`, `?2`, ... (rewritten to `$1` for PostgreSQL). Values are
//! the four kinds the schema uses: integers (times, money, flags), text, bytes and null.

use super::StoreError;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

/// A database connection or transaction. Calls block the current thread; the store runs
/// them on the blocking pool.
pub trait Db {
    /// The rows of one statement.
    fn query(&self, sql: &str, args: &[Value]) -> Result<Vec<Row>, StoreError>;
    /// Runs one statement; the number of rows it changed.
    fn execute(&self, sql: &str, args: &[Value]) -> Result<u64, StoreError>;
    /// Runs several statements without parameters (migrations).
    fn batch(&self, sql: &str) -> Result<(), StoreError>;
    /// Inside a write: waits until no other transaction anywhere holds `name`, and holds it
    /// until this one ends, for a read-then-write that must see every earlier write.
    /// (SQLite's one writer at a time already is that.)
    fn serialize(&self, name: &str) -> Result<(), StoreError>;
}

impl dyn Db + '_ {
    /// The first row, if any.
    pub fn query_opt(&self, sql: &str, args: &[Value]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, args)?.into_iter().next())
    }

    /// The first row; a statement that returns none is a bug in the store.
    pub fn query_one(&self, sql: &str, args: &[Value]) -> Result<Row, StoreError> {
        self.query_opt(sql, args)?
            .ok_or_else(|| StoreError::Corrupt(format!("no row from: {sql}")))
    }
}

/// Builds a statement's arguments: `args![id, name, 5]`.
macro_rules! args {
    () => { &[] as &[$crate::store::sql::Value] };
    ($($value:expr),+ $(,)?) => { &[$($crate::store::sql::Value::from($value)),+] };
}
pub(crate) use args;

#[derive(Debug, Clone)]
pub struct Row(pub(super) Vec<Value>);

impl Row {
    /// Column `index` as `T`; a type the column does not hold is reported as corruption.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T, StoreError> {
        let value = self
            .0
            .get(index)
            .ok_or_else(|| StoreError::Corrupt(format!("column {index} is missing")))?;
        T::from_value(value).ok_or_else(|| StoreError::Corrupt(format!("column {index} holds {value:?}")))
    }

    pub fn into_values(self) -> Vec<Value> {
        self.0
    }
}

pub trait FromValue: Sized {
    fn from_value(value: &Value) -> Option<Self>;
}

impl FromValue for i64 {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
}

macro_rules! narrow_int {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: &Value) -> Option<Self> {
                i64::from_value(value).and_then(|n| <$t>::try_from(n).ok())
            }
        }
    )*};
}
narrow_int!(u8, u32, u64);

impl FromValue for bool {
    fn from_value(value: &Value) -> Option<Self> {
        i64::from_value(value).map(|n| n != 0)
    }
}

impl FromValue for String {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Text(text) => Some(text.clone()),
            _ => None,
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Blob(bytes) => Some(bytes.clone()),
            _ => None,
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::Null => Some(None),
            other => T::from_value(other).map(Some),
        }
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Value {
                Value::Int(i64::from(n))
            }
        }
    )*};
}
int_value!(i64, i32, u32, u8, bool);

impl From<String> for Value {
    fn from(text: String) -> Value {
        Value::Text(text)
    }
}

impl From<&String> for Value {
    fn from(text: &String) -> Value {
        Value::Text(text.clone())
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Text(text.to_string())
    }
}

impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Value {
        Value::Blob(bytes)
    }
}

impl From<&[u8]> for Value {
    fn from(bytes: &[u8]) -> Value {
        Value::Blob(bytes.to_vec())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Value {
        value.map_or(Value::Null, Into::into)
    }
}

impl From<&Option<String>> for Value {
    fn from(value: &Option<String>) -> Value {
        value.as_ref().map_or(Value::Null, Into::into)
    }
}

/// The statement with `?N` parameters written as PostgreSQL's `$N` (quoted text is left
/// alone).
pub fn postgres_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_postgres_outside_quotes() {
        assert_eq!(
            postgres_placeholders("SELECT '?1', x FROM t WHERE a = ?1 AND b IN (?12, ?2) AND c = '?'"),
            "SELECT '?1', x FROM t WHERE a = $1 AND b IN ($12, $2) AND c = '?'"
        );
    }

    #[test]
    fn values_convert_both_ways_and_mismatches_are_errors() {
        let row = Row(vec![
            Value::Int(300),
            Value::Null,
            Value::Text("x".into()),
            Value::Int(1),
        ]);
        assert_eq!(row.get::<u32>(0).unwrap(), 300);
        assert!(row.get::<u8>(0).is_err(), "300 does not fit a byte");
        assert_eq!(row.get::<Option<i64>>(1).unwrap(), None);
        assert!(row.get::<i64>(1).is_err(), "null is not a number");
        assert_eq!(row.get::<String>(2).unwrap(), "x");
        assert!(row.get::<bool>(3).unwrap());
        assert!(row.get::<String>(9).is_err());
        assert_eq!(Value::from(Some(true)), Value::Int(1));
        assert_eq!(Value::from(None::<String>), Value::Null);
    }
}
