//! What one command's plugin may reach. A capability is granted only when the plugin
//! declares it in its manifest *and* the host allows it for this kind of plugin; HTTP also
//! needs hosts, from the agent manifest's `allowed_hosts` (and a webhook's own URL).
//! Each check is one call that returns an error string for the guest.

use crate::outbound::HostPattern;

use super::bindings::types::Capability;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// One of the four handler components shipped inside the host.
    BuiltIn,
    /// Uploaded by an agent author.
    Custom,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grants {
    pub http_hosts: Vec<HostPattern>,
    pub http: bool,
    pub kv: bool,
    pub llm: bool,
    pub progress: bool,
    pub agent_info: bool,
    /// The agent's owner lets this command pay the x402 services it calls (`[payments]`):
    /// its requests answered 402 are shown to the host's payer (`paying.rs`).
    pub pays: bool,
}

impl Grants {
    /// `allow_llm`: the agent manifest grants this command the host's LLM (built-in
    /// handlers, the `prompt` one among them, have it when they declare it).
    pub fn for_command(
        kind: PluginKind,
        declared: &[Capability],
        allowed_hosts: &[String],
        webhook_url: Option<&str>,
        allow_llm: bool,
    ) -> Grants {
        let wants = |c: Capability| declared.contains(&c);
        let mut http_hosts: Vec<HostPattern> = allowed_hosts.iter().filter_map(|h| HostPattern::parse(h)).collect();
        if let Some(url) = webhook_url.and_then(|u| reqwest::Url::parse(u).ok())
            && let Some(host) = url.host_str()
        {
            let port = url.port_or_known_default().map(|p| format!(":{p}")).unwrap_or_default();
            if let Some(pattern) = HostPattern::parse(&format!("{host}{port}")) {
                http_hosts.push(pattern);
            }
        }
        Grants {
            http: wants(Capability::Http) && !http_hosts.is_empty(),
            http_hosts,
            kv: wants(Capability::Kv),
            llm: wants(Capability::Llm) && (kind == PluginKind::BuiltIn || allow_llm),
            progress: wants(Capability::Progress),
            agent_info: wants(Capability::AgentInfo) && kind == PluginKind::BuiltIn,
            pays: false,
        }
    }

    /// None granted: for inspecting a component's manifest.
    pub fn none() -> Grants {
        Grants::default()
    }

    pub fn check_http(&self) -> Result<&[HostPattern], String> {
        if self.http {
            Ok(&self.http_hosts)
        } else if self.http_hosts.is_empty() {
            Err("this command has no allowed_hosts in its agent manifest".into())
        } else {
            Err("this plugin does not declare the http capability".into())
        }
    }

    pub fn check_kv(&self) -> Result<(), String> {
        if self.kv {
            Ok(())
        } else {
            Err("this plugin does not declare the kv capability".into())
        }
    }

    pub fn check_llm(&self) -> Result<(), String> {
        if self.llm {
            Ok(())
        } else {
            Err("the llm capability needs both the plugin's declaration and allow_llm = true on the command in its agent manifest".into())
        }
    }

    pub fn check_agent_info(&self) -> Result<(), String> {
        if self.agent_info {
            Ok(())
        } else {
            Err("agent-info is granted to built-in plugins only".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_needs_a_declaration_and_a_grant() {
        let none = Grants::for_command(PluginKind::Custom, &[], &["api.example.com".into()], None, false);
        assert!(none.check_http().is_err(), "declared nothing");
        assert!(none.check_kv().is_err());
        let no_hosts = Grants::for_command(PluginKind::Custom, &[Capability::Http], &[], None, false);
        assert!(no_hosts.check_http().unwrap_err().contains("allowed_hosts"));
        let ok = Grants::for_command(
            PluginKind::Custom,
            &[Capability::Http, Capability::Kv],
            &["api.example.com".into()],
            None,
            false,
        );
        assert_eq!(ok.check_http().unwrap().len(), 1);
        assert!(ok.check_kv().is_ok());
        assert!(ok.check_llm().is_err());
    }

    #[test]
    fn a_custom_plugin_needs_its_command_to_grant_the_llm() {
        let declared = [Capability::Llm];
        let ungranted = Grants::for_command(PluginKind::Custom, &declared, &[], None, false);
        assert!(ungranted.check_llm().unwrap_err().contains("allow_llm"));
        assert!(
            Grants::for_command(PluginKind::Custom, &declared, &[], None, true)
                .check_llm()
                .is_ok()
        );
        assert!(
            Grants::for_command(PluginKind::BuiltIn, &declared, &[], None, false)
                .check_llm()
                .is_ok()
        );
        assert!(
            Grants::for_command(PluginKind::Custom, &[], &[], None, true)
                .check_llm()
                .is_err()
        );
    }

    #[test]
    fn agent_info_is_for_built_ins_only() {
        let custom = Grants::for_command(PluginKind::Custom, &[Capability::AgentInfo], &[], None, false);
        assert!(custom.check_agent_info().is_err());
        let built_in = Grants::for_command(PluginKind::BuiltIn, &[Capability::AgentInfo], &[], None, false);
        assert!(built_in.check_agent_info().is_ok());
    }

    #[test]
    fn a_webhook_may_reach_its_own_host() {
        let g = Grants::for_command(
            PluginKind::BuiltIn,
            &[Capability::Http],
            &[],
            Some("https://hooks.example.com/x"),
            false,
        );
        let hosts = g.check_http().unwrap();
        assert!(hosts[0].matches("hooks.example.com", 443));
        assert!(!hosts[0].matches("hooks.example.com", 8443));
        assert!(!hosts[0].matches("evil.com", 443));
    }
}
