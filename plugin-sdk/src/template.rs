//! `{{name}}` templates for command texts and prompts.
//!
//! One pass, left to right: a value substituted for a placeholder is never read again, so
//! a parameter holding `{{other}}` stays literal text (no template injection). A name that
//! is not among the values renders empty; `{{{{` is not special. Whitespace inside the
//! braces is allowed: `{{ name }}`.

use serde_json::{Map, Value};

pub fn render(template: &str, values: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}") {
            Some(end) if is_name(after[..end].trim()) => {
                if let Some(value) = values.get(after[..end].trim()) {
                    push_value(&mut out, value);
                }
                rest = &after[end + 2..];
            }
            _ => {
                // Not a placeholder: keep the braces as text and move on.
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_name(text: &str) -> bool {
    !text.is_empty() && text.len() <= 64 && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn push_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => {}
        Value::String(s) => out.push_str(s),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn substitutes_and_leaves_missing_empty() {
        let v = values(json!({"name": "Ann", "n": 3, "ok": true, "list": [1, 2]}));
        assert_eq!(render("Hello, {{name}}!", &v), "Hello, Ann!");
        assert_eq!(
            render("{{ name }} has {{n}} ({{ok}}) {{list}}", &v),
            "Ann has 3 (true) [1,2]"
        );
        assert_eq!(render("Hi {{missing}}.", &v), "Hi .");
    }

    #[test]
    fn values_are_not_rendered_again() {
        let v = values(json!({"name": "{{secret}}", "secret": "s3cret"}));
        assert_eq!(render("Hello, {{name}}", &v), "Hello, {{secret}}");
    }

    #[test]
    fn stray_braces_stay_text() {
        let v = values(json!({"a": "x"}));
        assert_eq!(render("{{ not a name }} {{a}} {{", &v), "{{ not a name }} x {{");
        assert_eq!(render("{{{a}}}", &v), "{{{a}}}", "triple braces are not a placeholder");
        assert_eq!(render("no placeholders", &v), "no placeholders");
    }
}
