use super::*;
use crate::domain::{Allowance, ChatRates, Network, SignInTerms, UnitRates};

fn parse_str(source: &str) -> Result<AgentManifest, ManifestError> {
    parse(source, "agent.toml", PluginSource::Files(Path::new(".")))
}

const GOOD: &str = r#"
username = "helper"
name = "Helper"
personality = "Kind."
knowledge = ["Opens at 9."]

[[commands]]
command = "hello"
handler_type = "simple_text"
price_usd = 0.05
integrations = ["x402", "chatapp", "x402"]
parameters = [{ name = "name", type = "string", required = true, description = "Who" }]
config = { text = "Hello, {{name}}!" }

[x402]
enabled = true
default_price_usd = "0.01"
"#;

#[test]
fn reads_a_good_manifest() {
    let m = parse_str(GOOD).unwrap();
    assert_eq!(m.agent.username, "helper");
    assert_eq!(m.agent.x402.default_price, Some(MicroUsdc(10_000)));
    assert_eq!(m.agent.x402.networks, vec![Network::Solana, Network::Base]);
    let cmd = &m.commands[0];
    assert_eq!(cmd.price, Some(MicroUsdc(50_000)));
    assert_eq!(cmd.integrations, vec![Integration::X402, Integration::Chatapp]);
    assert_eq!(cmd.config.text("text").as_deref(), Some("Hello, {{name}}!"));
    assert!(cmd.enabled);
}

#[test]
fn names_line_and_field_of_a_semantic_error() {
    let bad = GOOD.replace("price_usd = 0.05", "price_usd = 0.0500001");
    let err = parse_str(&bad).unwrap_err();
    assert_eq!(err.line, Some(10));
    assert_eq!(err.field.as_deref(), Some("commands[0].price_usd"));
    assert!(
        err.to_string()
            .starts_with("agent.toml:10: commands[0].price_usd: has more than 6 decimal"),
        "{err}"
    );
}

#[test]
fn sign_in_terms_are_read_and_checked() {
    let with =
        |terms: &str| parse_str(&GOOD.replace("price_usd = 0.05", &format!("price_usd = 0.05\nsign_in = {terms}")));
    let terms = with("{ pass = { calls = 3 }, free = { calls = 1, hours = 24 } }")
        .unwrap()
        .commands[0]
        .sign_in;
    assert_eq!(
        terms,
        Some(SignInTerms {
            pass: Some(Allowance {
                calls: Some(3),
                hours: None,
                total: None,
            }),
            free: Some(Allowance {
                calls: Some(1),
                hours: Some(24),
                total: None,
            }),
        })
    );
    for (bad, says) in [
        ("{}", "a pass, a free allowance"),
        ("{ pass = {} }", "calls, hours or both"),
        ("{ pass = { calls = 0 } }", "between 1 and"),
        ("{ pass = { hours = 9000 } }", "between 1 and 8760"),
        ("{ free = { calls = 2 } }", "both calls and hours"),
        ("{ pass = { calls = 2, total = 5 } }", "free calls only"),
        ("{ free = { calls = 2, hours = 1, total = 0 } }", "total must be"),
    ] {
        let err = with(bad).unwrap_err();
        assert!(err.message.contains(says), "{bad}: {err}");
        assert!(
            err.field.as_deref().unwrap().starts_with("commands[0].sign_in"),
            "{bad}: {err}"
        );
    }
    // Unknown keys are refused, and so are terms for a command that is not sold.
    assert!(with("{ pass = { days = 1 } }").is_err());
    let unsold = GOOD.replace("\"x402\", \"chatapp\", \"x402\"", "\"chatapp\"");
    let err = parse_str(&unsold.replace(
        "price_usd = 0.05",
        "price_usd = 0.05\nsign_in = { pass = { calls = 1 } }",
    ))
    .unwrap_err();
    assert!(err.message.contains("needs \"x402\""), "{err}");
}

#[test]
fn a_price_of_nothing_is_refused() {
    for zero in ["0", "0.00", "\"0.000000\""] {
        let err = parse_str(&GOOD.replace("price_usd = 0.05", &format!("price_usd = {zero}"))).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("commands[0].price_usd"), "{zero}");
        assert!(err.message.contains("more than 0"), "{err}");
    }
}

#[test]
fn names_line_of_a_syntax_or_type_error() {
    let bad = GOOD.replace("handler_type = \"simple_text\"", "handler_type = \"telepathy\"");
    let err = parse_str(&bad).unwrap_err();
    assert_eq!(err.line, Some(9));
    assert!(err.message.contains("telepathy"), "{err}");
    assert!(!err.to_string().contains('\n'));
    let err = parse_str("username = \"x\"\nname = [").unwrap_err();
    assert_eq!(err.line, Some(2));
}

#[test]
fn rejects_unknown_fields_and_duplicates() {
    let err = parse_str(&GOOD.replace("personality", "personalty")).unwrap_err();
    assert!(err.message.contains("personalty"), "{err}");
    let twice = format!("{GOOD}\n[[commands]]\ncommand = \"hello\"\nhandler_type = \"built_in\"\n");
    let twice = twice.replace("[x402]\nenabled = true\ndefault_price_usd = \"0.01\"\n", "");
    let err = parse_str(&twice).unwrap_err();
    assert!(err.message.contains("defined twice"), "{err}");
}

#[test]
fn requires_handler_settings() {
    let err = parse_str(&GOOD.replace("config = { text = \"Hello, {{name}}!\" }", "")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("commands[0].config.text"));
    let err = parse_str(&GOOD.replace("\"simple_text\"", "\"custom\"")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("commands[0].plugin"));
    let err = parse_str(&GOOD.replace("username = \"helper\"", "username = \"Helper!\"")).unwrap_err();
    assert_eq!((err.line, err.field.as_deref()), (Some(2), Some("username")));
}

#[test]
fn integration_sections_take_enabled_and_never_secrets() {
    let with = |section: &str| parse_str(&format!("{GOOD}\n{section}"));
    let m = with("[chatapp]\nenabled = false\n[social]\nenabled = true\n").unwrap();
    assert_eq!((m.chatapp_enabled, m.social_enabled), (Some(false), Some(true)));
    assert_eq!(parse_str(GOOD).unwrap().chatapp_enabled, None);
    let err = with("[chatapp]\nbot_token = \"123:abc\"\n").unwrap_err();
    assert_eq!(err.field.as_deref(), Some("chatapp.bot_token"));
    assert!(err.message.contains("agent-host chatapp connect"), "{err}");
    let err = with("[social]\nenabled = \"yes\"\n").unwrap_err();
    assert_eq!(err.field.as_deref(), Some("social.enabled"));
}

#[test]
fn x402_needs_a_default_price() {
    let err = parse_str(&GOOD.replace("default_price_usd = \"0.01\"\n", "")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("x402.default_price_usd"));
}

#[test]
fn the_nul_character_is_refused_and_its_field_named() {
    let source = GOOD.replace("Hello, {{name}}!", "Hello\\u0000");
    let err = parse_str(&source).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("commands[0].config.text"));
    assert!(err.message.contains("U+0000"), "{err}");
}

#[test]
fn knowledge_is_bounded_in_entries_and_characters() {
    let with = |entries: Vec<String>| {
        let list = serde_json::to_string(&entries).unwrap();
        parse_str(&GOOD.replace(r#"knowledge = ["Opens at 9."]"#, &format!("knowledge = {list}")))
    };
    assert!(with(vec!["fact".into(); MAX_KNOWLEDGE_ENTRIES]).is_ok());
    let err = with(vec!["fact".into(); MAX_KNOWLEDGE_ENTRIES + 1]).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("knowledge"));
    assert!(err.message.contains("at most 1000 entries"), "{err}");
    let err = with(vec!["x".repeat(MAX_KNOWLEDGE_CHARS / 2 + 1); 2]).unwrap_err();
    assert!(err.message.contains("200000 characters in all"), "{err}");
}

#[test]
fn mcp_shows_what_it_declares_and_refuses_what_cannot_be_served() {
    let with = |mcp: &str| parse_str(&format!("{GOOD}\n[mcp]\n{mcp}"));
    assert!(parse_str(GOOD).unwrap().agent.mcp.is_empty(), "nothing unless declared");
    let m = with(
        r#"knowledge = true
[[mcp.resources]]
uri = "doc://rates/{currency}"
text = "Rate for {{currency}}"
values = { currency = ["EUR", "USD"] }
[[mcp.prompts]]
name = "ask"
description = "Ask"
arguments = [{ name = "q", required = true }]
messages = [{ text = "Question: {{q}}" }]"#,
    )
    .unwrap();
    assert!(m.agent.mcp.knowledge && !m.agent.mcp.personality);
    assert_eq!(m.agent.mcp.resources[0].mime_type, "text/plain");
    assert_eq!(m.agent.mcp.prompts[0].messages[0].role, "user");
    let refused = [
        (
            "[[mcp.resources]]\nuri = \"no scheme\"\ntext = \"x\"",
            "mcp.resources[0].uri",
        ),
        (
            "[[mcp.resources]]\nuri = \"a:b\"\nblob = \"not base64!\"\nmime_type = \"image/png\"",
            "mcp.resources[0].blob",
        ),
        (
            "[[mcp.resources]]\nuri = \"a:b\"\nblob = \"AAAA\"",
            "mcp.resources[0].mime_type",
        ),
        (
            "[[mcp.resources]]\nuri = \"a:{id}\"\ntext = \"{{other}}\"",
            "mcp.resources[0].text",
        ),
        (
            "[[mcp.resources]]\nuri = \"a:b\"\ntext = \"x\"\n[[mcp.resources]]\nuri = \"a:b\"\ntext = \"y\"",
            "mcp.resources[1].uri",
        ),
        (
            "[[mcp.prompts]]\nname = \"p\"\ndescription = \"d\"\nmessages = [{ text = \"{{undeclared}}\" }]",
            "mcp.prompts[0].messages[0]",
        ),
        (
            "[[mcp.prompts]]\nname = \"p\"\ndescription = \"d\"\nmessages = [{ role = \"system\", text = \"x\" }]",
            "mcp.prompts[0].messages[0].role",
        ),
        (
            "[[mcp.prompts]]\nname = \"p\"\ndescription = \"d\"\nmessages = []",
            "mcp.prompts[0].messages",
        ),
        (
            "personality = true\n[[mcp.prompts]]\nname = \"persona\"\ndescription = \"d\"\nmessages = [{ text = \"x\" }]",
            "mcp.prompts[0].name",
        ),
    ];
    for (mcp, field) in refused {
        let err = with(mcp).unwrap_err();
        assert_eq!(err.field.as_deref(), Some(field), "{mcp}: {err}");
    }
}

#[test]
fn parameter_values_are_for_strings_and_distinct() {
    let with = |param: &str| {
        parse_str(&GOOD.replace(
            r#"parameters = [{ name = "name", type = "string", required = true, description = "Who" }]"#,
            &format!("parameters = [{param}]"),
        ))
    };
    let m = with(r#"{ name = "name", type = "string", values = ["Ann", "Bob"] }"#).unwrap();
    assert_eq!(m.commands[0].parameters[0].values, ["Ann", "Bob"]);
    for bad in [
        r#"{ name = "n", type = "number", values = ["1"] }"#,
        r#"{ name = "n", type = "string", values = ["a", "a"] }"#,
        r#"{ name = "n", type = "string", values = [""] }"#,
    ] {
        let err = with(bad).unwrap_err();
        assert_eq!(
            err.field.as_deref(),
            Some("commands[0].parameters[0].values"),
            "{bad}: {err}"
        );
    }
    let m = with(r#"{ name = "n", type = "number", default = 300 }"#).unwrap();
    assert_eq!(m.commands[0].parameters[0].default, Some(serde_json::json!(300)));
    for bad in [
        r#"{ name = "n", type = "number", default = "300" }"#,
        r#"{ name = "n", type = "string", values = ["a"], default = "b" }"#,
    ] {
        let err = with(bad).unwrap_err();
        assert_eq!(
            err.field.as_deref(),
            Some("commands[0].parameters[0].default"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn mcp_tool_metadata_names_offered_tools_and_sane_icons() {
    let mcp_hello = GOOD.replace(
        r#"integrations = ["x402", "chatapp", "x402"]"#,
        r#"integrations = ["mcp"]"#,
    );
    let with = |mcp: &str| parse_str(&format!("{mcp_hello}\n[mcp]\n{mcp}"));
    let m =
        with("[mcp.tools.hello]\ntitle = \"Hi\"\noutput_schema = { type = \"object\", required = [\"a\"] }").unwrap();
    assert_eq!(m.agent.mcp.tools["hello"].title.as_deref(), Some("Hi"));
    assert_eq!(
        m.agent.mcp.tools["hello"].output_schema.as_ref().unwrap()["required"],
        serde_json::json!(["a"])
    );
    assert!(
        with("[mcp.tools.chat]\ntitle = \"Talk\"").is_ok(),
        "the chat tool is one"
    );
    let refused = [
        ("[mcp.tools.nosuch]\ntitle = \"x\"", "mcp.tools.nosuch"),
        (
            "[mcp.tools.hello]\noutput_schema = { type = \"string\" }",
            "mcp.tools.hello.output_schema",
        ),
        (
            "[mcp.tools.hello]\nicon = { mime_type = \"text/html\", data = \"AAAA\" }",
            "mcp.tools.hello.icon",
        ),
        (
            "icon = { mime_type = \"image/png\", data = \"not base64!\" }",
            "mcp.icon",
        ),
    ];
    for (mcp, field) in refused {
        let err = with(mcp).unwrap_err();
        assert_eq!(err.field.as_deref(), Some(field), "{mcp}: {err}");
    }
}

#[test]
fn a_message_may_be_priced_by_its_tokens_on_base() {
    let by_use = |section: &str, networks: &str| {
        let base = GOOD.split("[x402]").next().unwrap();
        parse_str(&format!(
            "{base}\n[x402]\nenabled = true\ndefault_price_usd = 0.01\nnetworks = {networks}\n[x402.chat_by_use]\n{section}"
        ))
    };
    let priced = by_use(
        "per_1k_input_tokens_usd = 0.002\nper_1k_output_tokens_usd = \"0.006\"\nmax_usd = 0.05",
        r#"["base"]"#,
    )
    .unwrap();
    assert_eq!(
        priced.agent.x402.chat_by_use,
        Some(ChatRates {
            per_1k_input: MicroUsdc(2_000),
            per_1k_output: MicroUsdc(6_000),
            max: MicroUsdc(50_000),
        })
    );
    // Output alone may be priced; a rate of 0 is no rate.
    let output_only = by_use(
        "per_1k_input_tokens_usd = 0\nper_1k_output_tokens_usd = 0.01\nmax_usd = 1",
        r#"["base"]"#,
    );
    assert_eq!(
        output_only.unwrap().agent.x402.chat_by_use.unwrap().per_1k_input,
        MicroUsdc(0)
    );
    let refusals = [
        (by_use("max_usd = 1", r#"["base"]"#), "x402.chat_by_use: prices nothing"),
        (
            by_use("per_1k_output_tokens_usd = 0.01", r#"["base"]"#),
            "missing field `max_usd`",
        ),
        (
            by_use("per_1k_output_tokens_usd = 0.01\nmax_usd = 0", r#"["base"]"#),
            "x402.chat_by_use.max_usd: must be more than 0",
        ),
        (
            by_use("per_1k_output_tokens_usd = 0.01\nmax_usd = 1", r#"["solana"]"#),
            "on Base only",
        ),
    ];
    for (refused, why) in refusals {
        let message = refused.unwrap_err().to_string();
        assert!(message.contains(why), "{message}");
    }
}

#[test]
fn a_custom_command_may_be_priced_by_its_units_on_base() {
    // Unit tests run in host/, where Cargo.toml stands in for a component file.
    let with = |command: &str, networks: &str| {
        let base = GOOD.split("[x402]").next().unwrap();
        parse_str(&format!(
            "{base}\n[[commands]]\ncommand = \"pages\"\nhandler_type = \"custom\"\nplugin = \"Cargo.toml\"\n{command}\n\
             [x402]\nenabled = true\ndefault_price_usd = 0.01\nnetworks = {networks}\n"
        ))
    };
    let sold = "integrations = [\"x402\"]";
    let priced = with(
        &format!("{sold}\nby_use = {{ per_unit_usd = 0.0025, unit = \"page\", max_usd = \"0.05\" }}"),
        r#"["base"]"#,
    )
    .unwrap();
    assert_eq!(
        priced.commands[1].by_use,
        Some(UnitRates {
            per_unit: MicroUsdc(2_500),
            unit: "page".into(),
            max: MicroUsdc(50_000),
        })
    );
    let unnamed = with(
        &format!("{sold}\nby_use = {{ per_unit_usd = 0.001, max_usd = 1 }}"),
        r#"["solana", "base"]"#,
    )
    .unwrap();
    assert_eq!(unnamed.commands[1].by_use.as_ref().unwrap().unit, "unit");

    let rates = "by_use = { per_unit_usd = 0.01, max_usd = 1 }";
    let refusals = [
        (with(rates, r#"["base"]"#), "needs \"x402\" in integrations"),
        (with(&format!("{sold}\n{rates}"), r#"["solana"]"#), "on Base only"),
        (
            with(&format!("{sold}\nlong_running = true\n{rates}"), r#"["base"]"#),
            "cannot be on a long-running command",
        ),
        (
            with(
                &format!("{sold}\nby_use = {{ per_unit_usd = 0.01, max_usd = 0.005 }}"),
                r#"["base"]"#,
            ),
            "by_use.max_usd: is less than one unit's price",
        ),
        (
            with(
                &format!("{sold}\nby_use = {{ per_unit_usd = 0, max_usd = 1 }}"),
                r#"["base"]"#,
            ),
            "by_use.per_unit_usd: must be more than 0",
        ),
        (
            with(
                &format!("{sold}\nby_use = {{ per_unit_usd = 0.01, unit = \"Pages!\", max_usd = 1 }}"),
                r#"["base"]"#,
            ),
            "by_use.unit: is 1 to 32",
        ),
        (
            with(&format!("{sold}\nby_use = {{ per_unit_usd = 0.01 }}"), r#"["base"]"#),
            "missing field `max_usd`",
        ),
    ];
    for (refused, why) in refusals {
        let message = refused.unwrap_err().to_string();
        assert!(message.contains(why), "{why}: {message}");
    }
    // Only a custom command reports units.
    let built_in = GOOD.replace(
        "price_usd = 0.05",
        "price_usd = 0.05\nby_use = { per_unit_usd = 0.01, max_usd = 1 }",
    );
    let message = parse_str(&built_in).unwrap_err().to_string();
    assert!(message.contains("is for a custom command"), "{message}");
}

#[test]
fn payments_name_their_limits_payees_and_what_may_pay() {
    let with = |payments: &str| parse_str(&format!("{GOOD}\n[payments]\n{payments}\n"));
    let good = with(
        r#"max_per_payment = "0.05"
max_per_day = 1
payees = ["https://API.example.com:443", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "https://api.example.com"]
commands = ["hello", "hello"]"#,
    )
    .unwrap();
    let policy = good.agent.payments.unwrap();
    assert_eq!(
        (policy.max_per_payment, policy.max_per_day),
        (MicroUsdc(50_000), MicroUsdc(1_000_000))
    );
    assert_eq!(
        policy.payees,
        vec!["https://api.example.com", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"],
        "origins are read as origins, once"
    );
    assert_eq!(policy.commands, vec!["hello"]);
    assert_eq!(policy.networks, vec![Network::Base, Network::Solana]);
    assert!(
        parse_str(GOOD).unwrap().agent.payments.is_none(),
        "nothing is paid without it"
    );

    let refused = |payments: &str| with(payments).unwrap_err();
    let base = r#"max_per_payment = 0.05
max_per_day = 1
payees = ["https://api.example.com"]
commands = ["hello"]"#;
    let cases = [
        (
            base.replace("0.05", "2"),
            "payments.max_per_payment",
            "more than max_per_day",
        ),
        (
            base.replace("max_per_day = 1", "max_per_day = 0"),
            "payments.max_per_day",
            "more than 0",
        ),
        (
            base.replace("[\"https://api.example.com\"]", "[]"),
            "payments.payees",
            "name who may be paid",
        ),
        (
            base.replace("https://api.example.com", "https://api.example.com/v1"),
            "payments.payees",
            "origin alone",
        ),
        (
            base.replace("https://api.example.com", "ftp://api.example.com"),
            "payments.payees",
            "origin alone",
        ),
        (
            base.replace("https://api.example.com", "api.example.com"),
            "payments.payees",
            "neither a server's origin",
        ),
        (
            base.replace("[\"hello\"]", "[\"nope\"]"),
            "payments.commands",
            "'nope' is not one of this agent's commands",
        ),
        (
            base.replace("commands = [\"hello\"]", "commands = []"),
            "payments.commands",
            "name the commands",
        ),
        (
            format!("{base}\nmcp_servers = [\"nowhere\"]"),
            "payments.mcp_servers",
            "not one of this agent's [[mcp_servers]]",
        ),
        (
            format!("{base}\nnetworks = []"),
            "payments.networks",
            "at least one network",
        ),
    ];
    for (payments, field, message) in cases {
        let err = refused(&payments);
        assert_eq!(err.field.as_deref(), Some(field), "{payments}: {err}");
        assert!(err.message.contains(message), "{payments}: {err}");
    }
    // A secret has no place here either: unknown fields are refused.
    assert!(with(&format!("{base}\nprivate_key = \"0xabc\"")).is_err());
}

#[test]
fn a_remote_server_signs_in_with_oauth_or_takes_a_header_not_both() {
    let with = |entry: &str| parse_str(&format!("{GOOD}\n[[mcp_servers]]\nname = \"docs\"\n{entry}\n"));
    let oauth = with("url = \"https://mcp.example.com/mcp\"\noauth = true").unwrap();
    assert!(oauth.agent.mcp_servers[0].oauth);
    assert!(
        with("url = \"http://127.0.0.1:9000/mcp\"\noauth = true").is_ok(),
        "this machine itself"
    );
    let both = with("url = \"https://mcp.example.com/mcp\"\noauth = true\nheader = \"Authorization\"").unwrap_err();
    assert_eq!(both.field.as_deref(), Some("mcp_servers[0].oauth"), "{both}");
    let plain = with("url = \"http://mcp.example.com/mcp\"\noauth = true").unwrap_err();
    assert!(plain.message.contains("https, to sign in to it with OAuth"), "{plain}");
}
