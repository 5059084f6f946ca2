//! What each handler type needs in a command's `config` (and `plugin`), checked as the
//! manifest is read.

use std::ops::Range;

use super::{Checker, ManifestError};
use crate::domain::HandlerType;

/// The settings each handler type cannot work without.
pub(super) fn check_config(
    check: &Checker<'_>,
    span: &Range<usize>,
    at: &dyn Fn(&str) -> String,
    handler: HandlerType,
    config: &toml::Table,
    has_plugin: bool,
) -> Result<(), ManifestError> {
    let need_string = |key: &str| -> Result<(), ManifestError> {
        match config.get(key) {
            Some(toml::Value::String(_)) => Ok(()),
            Some(_) => Err(check.err(Some(span), at(&format!("config.{key}")), "must be a string")),
            None => Err(check.err(
                Some(span),
                at(&format!("config.{key}")),
                format!("is required for handler_type {}", handler.as_str()),
            )),
        }
    };
    match handler {
        HandlerType::SimpleText => need_string("text")?,
        HandlerType::Prompt => need_string("template")?,
        HandlerType::Webhook => {
            need_string("url")?;
            let url = config.get("url").and_then(toml::Value::as_str).unwrap_or_default();
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(check.err(Some(span), at("config.url"), "must be an http:// or https:// URL"));
            }
        }
        HandlerType::BuiltIn | HandlerType::Custom => {}
    }
    match (handler, has_plugin) {
        (HandlerType::Custom, false) => Err(check.err(
            Some(span),
            at("plugin"),
            "is required for handler_type custom (the path of a .wasm component)",
        )),
        (HandlerType::Custom, true) | (_, false) => Ok(()),
        (_, true) => Err(check.err(Some(span), at("plugin"), "is only allowed with handler_type custom")),
    }
}
