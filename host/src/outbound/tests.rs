use super::*;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

#[test]
fn refuses_internal_addresses() {
    for refused in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "100.64.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        // IPv4-compatible, 6to4 and site-local forms of internal addresses.
        "::127.0.0.1",
        "::a9fe:a9fe",
        "2002:7f00:1::",
        "2002:a9fe:a9fe::1",
        "fec0::1",
    ] {
        assert!(is_refused_ip(ip(refused)), "{refused} should be refused");
    }
    for public in [
        "93.184.216.34",
        "1.1.1.1",
        "8.8.8.8",
        "2606:4700::1111",
        "172.32.0.1",
        "100.128.0.1",
    ] {
        assert!(!is_refused_ip(ip(public)), "{public} is public");
    }
}

fn client(exceptions: &[&str]) -> Outbound {
    Outbound::new(OutboundPolicy {
        allowed_hosts: vec![HostPattern::parse("*").unwrap()],
        private_exceptions: exceptions.iter().map(|e| HostPattern::parse(e).unwrap()).collect(),
        allowed_ports: vec![80, 443],
        own_addresses: vec![ip("93.184.216.34"), ip("2606:4700::1111")],
        own_names: vec!["agents.example.com".into()],
        max_response_bytes: 1024,
        max_timeout: Duration::from_secs(2),
        max_redirects: 3,
        marker: None,
    })
    .unwrap()
}

fn all() -> Vec<HostPattern> {
    vec![HostPattern::parse("*").unwrap()]
}

#[test]
fn checks_grants_schemes_and_literal_addresses() {
    let out = client(&["127.0.0.1:9999"]);
    let url = |u: &str| Url::parse(u).unwrap();
    let api = vec![HostPattern::parse("api.example.com").unwrap()];
    assert!(out.check(&url("https://api.example.com/x"), &api).is_ok());
    assert!(matches!(
        out.check(&url("https://other.com/x"), &api),
        Err(OutboundError::Denied(_))
    ));
    for denied in [
        "file:///etc/passwd",
        "http://169.254.169.254/latest",
        "http://[::1]:80/",
        "http://localhost:9999/",
        // The operator's exception names one port, not the host's others.
        "http://127.0.0.1:9998/",
    ] {
        assert!(
            matches!(out.check(&url(denied), &all()), Err(OutboundError::Denied(_))),
            "{denied} should be refused"
        );
    }
    assert!(
        out.check(&url("http://127.0.0.1:9999/"), &all()).is_ok(),
        "the operator's exception"
    );
}

/// Loopback spelled as one decimal number, in octal or in hex: URL parsing turns each into
/// 127.0.0.1 before the guard looks, so none slips past it.
#[test]
fn loopback_in_decimal_octal_and_hex_is_refused() {
    let out = client(&[]);
    for spelled in [
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://127.1/",
        "http://[::ffff:7f00:1]/",
    ] {
        let url = Url::parse(spelled).unwrap();
        match out.check(&url, &all()) {
            Err(OutboundError::Denied(reason)) => assert!(reason.contains("loopback"), "{spelled}: {reason}"),
            other => panic!("{spelled} should be refused, got {other:?}"),
        }
    }
}

#[test]
fn the_servers_own_addresses_and_other_ports_are_refused() {
    let out = client(&["127.0.0.1"]);
    let url = |u: &str| Url::parse(u).unwrap();
    let refusal = |u: &str| match out.check(&url(u), &all()) {
        Err(OutboundError::Denied(reason)) => reason,
        other => panic!("{u} should be refused, got {other:?}"),
    };
    assert!(refusal("http://93.184.216.34/").contains("own address"));
    assert!(refusal("http://[::ffff:93.184.216.34]/").contains("own address"));
    assert!(refusal("https://[2606:4700::1111]/").contains("own address"));
    assert!(refusal("https://agents.example.com/v1/agents").contains("own name"));
    assert!(
        refusal("https://Agents.Example.com./v1/agents").contains("own name"),
        "a trailing dot"
    );
    assert!(refusal("http://93.184.216.35:8080/").contains("port 8080"));
    assert!(refusal("https://api.example.com:22/").contains("port 22"));
    assert!(out.check(&url("https://93.184.216.35/"), &all()).is_ok());
    assert!(out.check(&url("http://api.example.com/"), &all()).is_ok());
    // The operator's private exception names the host outright: any of its ports.
    assert!(out.check(&url("http://127.0.0.1:9000/"), &all()).is_ok());

    let mut policy = (*out.policy).clone();
    policy.allowed_hosts = vec![
        HostPattern::parse("*").unwrap(),
        HostPattern::parse("api.example.com:8443").unwrap(),
    ];
    let named = Outbound::new(policy).unwrap();
    assert!(named.check(&url("https://api.example.com:8443/"), &all()).is_ok());
    assert!(named.check(&url("https://other.example.com:8443/"), &all()).is_err());
}

#[test]
fn own_addresses_include_every_interface_and_the_public_address() {
    let (addresses, names) = own_addresses(Some("https://203.0.113.9:8443"));
    assert!(addresses.contains(&ip("127.0.0.1")), "{addresses:?}");
    assert!(addresses.contains(&ip("203.0.113.9")));
    assert!(names.is_empty());
    let (_, names) = own_addresses(Some("https://Agents.Example.com/"));
    assert_eq!(names, vec!["agents.example.com".to_string()]);
}

#[tokio::test]
async fn names_that_resolve_privately_are_refused() {
    let out = client(&[]);
    let request = OutboundRequest {
        method: "GET".into(),
        url: "http://localtest.me.invalid.localhost/".into(),
        headers: vec![],
        body: None,
        timeout: None,
        max_bytes: None,
        budget: None,
        follow_redirects: true,
        truncate_body: false,
    };
    assert!(matches!(out.send(request, &all()).await, Err(OutboundError::Denied(_))));
    assert!(matches!(
        out.vet("http://localtest.me.invalid.localhost/", &all()).await,
        Err(OutboundError::Denied(_))
    ));
    assert!(matches!(
        out.vet("http://127.0.0.1:8080/hook", &all()).await,
        Err(OutboundError::Denied(_))
    ));
}

#[test]
fn private_exceptions_are_told_apart() {
    let out = client(&["127.0.0.1:9999", "hooks.internal"]);
    assert!(out.is_private_exception("http://127.0.0.1:9999/hook"));
    assert!(!out.is_private_exception("http://127.0.0.1:9998/hook"), "another port");
    assert!(out.is_private_exception("https://HOOKS.internal/x"));
    assert!(!out.is_private_exception("https://receiver.example.com/hook"));
    assert!(!out.is_private_exception("not a url"));
}
